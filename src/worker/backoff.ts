/**
 * Jittered exponential backoff for reconnecting a worker's stream
 * (domain/backoff.ts): the cap doubles from `initialMs` to `maxMs`, and each
 * wait is drawn uniformly from [cap/2, cap] ("equal jitter"), so a fleet of
 * workers cut off by one server restart does not reconnect in lockstep.
 */
import { jitteredBackoffMs } from "../domain/backoff.js";

export interface BackoffOptions {
  /** First wait's cap; default 250 ms. */
  initialMs?: number;
  /** Largest cap; default 30 000 ms. */
  maxMs?: number;
}

export function backoffDelay(attempt: number, { initialMs = 250, maxMs = 30_000 }: BackoffOptions = {}, random = Math.random): number {
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
