/**
 * Jittered exponential backoff for reconnecting a worker's stream
 * (domain/backoff.ts): the cap doubles from `initialMs` to `maxMs`, and each
 * wait is drawn uniformly from [cap/2, cap] ("equal jitter"), so a fleet of
 * workers cut off by one server restart does not reconnect in lockstep.
 */
import { jitteredBackoffMs, type BackoffPolicy } from "../domain/backoff.js";

/**
 * A worker's reconnect backoff unless `reconnectBackoff` says otherwise
 * (docs/writing-a-worker.md "Options of `createWorker`"): a first wait of
 * at most 250 ms, so a worker is back soon after a quick restart, and
 * attempts at most 30 s apart, so a worker finds a server that is back
 * within half a minute without a fleet of them hammering one that is down.
 */
export const DEFAULT_RECONNECT_BACKOFF: Readonly<BackoffPolicy> = { initialMs: 250, maxMs: 30_000 };

export interface BackoffOptions {
  /** First wait's cap; default DEFAULT_RECONNECT_BACKOFF.initialMs. */
  initialMs?: number;
  /** Largest cap; default DEFAULT_RECONNECT_BACKOFF.maxMs. */
  maxMs?: number;
}

export function backoffDelay(
  attempt: number,
  { initialMs = DEFAULT_RECONNECT_BACKOFF.initialMs, maxMs = DEFAULT_RECONNECT_BACKOFF.maxMs }: BackoffOptions = {},
  random = Math.random,
): number {
  return jitteredBackoffMs(attempt, { initialMs, maxMs }, random);
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
