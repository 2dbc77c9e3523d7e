/**
 * Durations written as text in settings and flags, the way Go and Prometheus
 * write them: one or more `<number><unit>` parts, units `ms`, `s`, `m`, `h`
 * and `d` (24 h), e.g. `168h`, `30m`, `1h30m`, `1.5h`, `0s`.
 * (docs/configuration.md gives `LEASEQUEUE_RETENTION` as a duration like
 * `168h`; the wire's proto3 JSON form `"60s"` is one of these.)
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

/**
 * How a duration is written, by who reads it:
 *
 * - `"setting"`: settings, flags and the messages about them, in the units
 *   parseDurationText reads back and never in days (`168h`, `30m`, `1500ms`);
 * - `"bound"`: a bound in an error message, days included (`1s`, `1m`,
 *   `12h`, `30d`), the same words from the service's validation and from
 *   PostgreSQL's `submit()`;
 * - `"reference"`: the API reference's bounds table, in days, hours and
 *   seconds, since a Duration's JSON counts seconds (`60s`, `12h`, `30d`);
 * - `"spelled"`: the console's exact durations (a rate period), units
 *   spelled out (`0 s`, `90 s`, `1 min`, `2 h`, `1.5 s`);
 * - `"glance"`: the console's approximate ones (an age, an interval),
 *   rounded down to the two largest units (`0 s`, `1 min 35 s`, `33 min`,
 *   `2 h 5 min`, `3 d 4 h`).
 */
export type DurationStyle = "setting" | "bound" | "reference" | "spelled" | "glance";

/**
 * An exact style: the units it picks from, largest first (the first that
 * divides the duration is taken; 0 is written in the last), and the text
 * of a duration none divides.
 */
interface ExactStyle {
  units: ReadonlyArray<readonly [label: string, ms: number]>;
  rest: (ms: number) => string;
}

const MS_REST = (ms: number) => `${ms}ms`;

const EXACT_STYLES: Record<Exclude<DurationStyle, "glance">, ExactStyle> = {
  setting: {
    units: [
      ["h", UNIT_MS.h],
      ["m", UNIT_MS.m],
      ["s", UNIT_MS.s],
    ],
    rest: MS_REST,
  },
  bound: {
    units: [
      ["d", UNIT_MS.d],
      ["h", UNIT_MS.h],
      ["m", UNIT_MS.m],
      ["s", UNIT_MS.s],
    ],
    rest: MS_REST,
  },
  reference: {
    units: [
      ["d", UNIT_MS.d],
      ["h", UNIT_MS.h],
      ["s", UNIT_MS.s],
    ],
    rest: MS_REST,
  },
  spelled: {
    units: [
      [" h", UNIT_MS.h],
      [" min", UNIT_MS.m],
      [" s", UNIT_MS.s],
    ],
    rest: (ms) => `${ms / 1000} s`,
  },
};

/** A duration as text in `style` (default `"setting"`: `604800000` -> `168h`); see DurationStyle. */
export function formatDurationText(ms: number, style: DurationStyle = "setting"): string {
  if (style === "glance") return glanceText(ms);
  const { units, rest } = EXACT_STYLES[style];
  if (ms === 0) return `0${units[units.length - 1][0]}`;
  for (const [label, size] of units) {
    if (ms % size === 0) return `${ms / size}${label}`;
  }
  return rest(ms);
}

/** The `"glance"` style: whole units, rounded down, at most two of them. */
function glanceText(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m} min ${s % 60} s`;
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}
