/**
 * Durations written as text in settings and flags, the way Go and
 * Prometheus write them: one or more `<number><unit>` parts, units `ms`, `s`,
 * `m`, `h` and `d` (24 h), e.g. `168h`, `30m`, `1h30m`, `1.5h`, `0s`.
 * (api.md gives `LEASEQUEUE_RETENTION` as a Duration like `168h`; the wire's
 * proto3 JSON form `"60s"` is one of these.)
 */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

const PART = /(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)/y;

/** Milliseconds of a duration text; throws an Error saying what is wrong. */
export function parseDurationText(text: string): number {
  const trimmed = text.trim();
  if (trimmed === "") throw new Error("is empty; write a duration like 168h, 30m or 0s");
  if (/^\d+(\.\d+)?$/.test(trimmed)) throw new Error(`"${text}" has no unit; write e.g. ${trimmed}s or ${trimmed}h`);
  let ms = 0;
  let at = 0;
  while (at < trimmed.length) {
    PART.lastIndex = at;
    const m = PART.exec(trimmed);
    if (m === null) throw new Error(`"${text}" is not a duration; write e.g. 168h, 30m, 1h30m or 0s (units ms, s, m, h, d)`);
    ms += Number(m[1]) * UNIT_MS[m[2]];
    at = PART.lastIndex;
  }
  if (!Number.isFinite(ms)) throw new Error(`"${text}" is too long a duration`);
  return Math.round(ms);
}

/** The shortest text of whole units for a duration (`604800000` -> `168h`), for messages and output. */
export function formatDurationText(ms: number): string {
  if (ms === 0) return "0s";
  for (const [unit, size] of [
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
