/** Reading the Prometheus text exposition of /metrics, enough of the format for tests. */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Samples of a Prometheus text exposition. */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/.exec(line);
    if (!m) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

/** The series names each metric type exposes (a histogram is queried as _bucket, _sum and _count). */
const SERIES_SUFFIXES: Record<string, readonly string[]> = {
  counter: [""],
  gauge: [""],
  untyped: [""],
  histogram: ["_bucket", "_sum", "_count"],
  summary: ["", "_sum", "_count"],
};

/**
 * Every series name a query may select from this exposition: the names of
 * its samples, and the series of every declared metric (`# TYPE`), including
 * one with no sample yet (a labelled counter before its first increment).
 * A histogram's bare family name is not among them: PromQL never selects it.
 */
export function exportedSeriesNames(text: string): Set<string> {
  const names = new Set(parseExposition(text).map((s) => s.name));
  for (const m of text.matchAll(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$/gm)) {
    const suffixes = SERIES_SUFFIXES[m[2]];
    if (suffixes === undefined) throw new Error(`unknown metric type ${m[2]} of ${m[1]}`);
    for (const suffix of suffixes) names.add(m[1] + suffix);
  }
  return names;
}
