/**
 * One clock for all bench processes: performance.timeOrigin + performance.now()
 * is wall-clock milliseconds with sub-millisecond resolution, so a submit
 * stamped in a producer process and a completion stamped in a worker process
 * can be subtracted.
 */
export function nowMs() {
  return performance.timeOrigin + performance.now();
}

/** Value at percentile p (0..100) of an already sorted array; NaN when empty. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** p50, p90, p99 and max of samples in milliseconds. */
export function latencySummary(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { samples: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s.at(-1) ?? Number.NaN };
}

/** Resolves after `ms`. */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
