/**
 * Exponential backoff, the one formula behind every wait that grows with
 * failures: a job's retry delay (docs/api.md "Retries and backoff":
 * `min(retryBaseDelay * 2^(attempts-1), 1h)`), the worker SDK's
 * reconnects and its resending of an outcome, PostgreSQL's LISTEN
 * reconnects and the console's re-subscriptions. Each caller brings its
 * own parameters; the ones that reconnect draw their wait below the
 * ceiling (equal jitter), so clients cut off together by one restart do
 * not come back in lockstep.
 */

export interface BackoffPolicy {
  /** The ceiling after the first failure (attempt 0). */
  initialMs: number;
  /** The largest ceiling. */
  maxMs: number;
}

/**
 * The ceiling of the wait after `attempt` earlier failures (0 for the
 * first): `initialMs * 2^attempt`, at most `maxMs`.
 */
export function backoffCeilingMs(attempt: number, { initialMs, maxMs }: BackoffPolicy): number {
  // Past 2^30 every policy here is at its maxMs; stopping there keeps 2^attempt finite, so an initialMs of 0 stays 0.
  return Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(0, attempt), 30));
}

/** A wait drawn uniformly from [ceiling/2, ceiling] ("equal jitter"), in whole milliseconds. */
export function jitteredBackoffMs(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const ceiling = backoffCeilingMs(attempt, policy);
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
