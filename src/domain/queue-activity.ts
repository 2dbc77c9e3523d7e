/**
 * Queue activity (docs/api.md "Queue activity"): what every engine records
 * per queue and minute in the transactions that change its jobs, and the
 * arithmetic of reading it back. Pure; times are epoch milliseconds.
 *
 * A minute's sample holds counters (jobs completed, attempts failed), the
 * net change of the queued, retry and running counts during the minute (so
 * a reader gets each count at the end of any minute from the current count,
 * without a sampler that has to run every minute), and a histogram of the
 * waits of the leases granted in it, from which a reader estimates
 * percentiles of any span of minutes by adding the histograms.
 */

export const ACTIVITY_MINUTE_MS = 60_000;

/**
 * How long a queue's samples are kept: the retention pruner deletes minutes
 * older than this (maintenance/pruner.ts), so a queue holds at most 1,440
 * samples however busy it is. GetQueueActivity's longest window fits in it.
 */
export const ACTIVITY_RETENTION_MS = 24 * 60 * ACTIVITY_MINUTE_MS;

/**
 * What a queue's jobs did in one minute: a stored sample's values, or what
 * one transaction adds to them (summed over its operations).
 */
export interface ActivityCounts {
  /** The minute's start (epoch ms; minuteOf). */
  minute: number;
  /** Jobs completed. */
  completed: number;
  /** Attempts that failed (Fail, or an expired lease), retried or dead-lettered. */
  failed: number;
  /** Net changes of the queue's QUEUED, RETRY and RUNNING counts. */
  queued: number;
  retry: number;
  running: number;
  /** Leases granted, by the bucket of their wait (LEASE_WAIT_BUCKETS entries, bounds LEASE_WAIT_BOUNDS_MS). */
  leaseWaits: number[];
}

/** The start of the minute `time` falls in. */
export function minuteOf(time: number): number {
  return time - (((time % ACTIVITY_MINUTE_MS) + ACTIVITY_MINUTE_MS) % ACTIVITY_MINUTE_MS);
}

/**
 * Upper bounds (inclusive, ms) of the lease-wait histogram's buckets, about
 * 2-2.5x apart from 1 ms to 1 h; one more bucket holds the waits past 1 h.
 * The stored samples keep one column per bucket (wait_0 .. wait_20 in the
 * engines' migrations), so these bounds are part of the schema: changing
 * one would misread every sample stored before.
 */
export const LEASE_WAIT_BOUNDS_MS: readonly number[] = Object.freeze([
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000,
]);

/** Buckets of the histogram: one per bound, and the one past the last. */
export const LEASE_WAIT_BUCKETS = LEASE_WAIT_BOUNDS_MS.length + 1;

/** The bucket a wait of `waitMs` is counted in: the first whose bound is not below it. */
export function leaseWaitBucket(waitMs: number): number {
  let i = 0;
  while (i < LEASE_WAIT_BOUNDS_MS.length && waitMs > LEASE_WAIT_BOUNDS_MS[i]) i++;
  return i;
}

/**
 * The `q`-quantile (0 < q <= 1) of the waits counted in `buckets`, or null
 * when it counts none. Estimated as Prometheus' histogram_quantile does:
 * the bucket holding the rank is found, and the wait interpolated linearly
 * within its bounds, so the estimate is never outside the bucket of the
 * true value. Past the last bound it answers that bound (1 h): "at least".
 */
export function leaseWaitQuantile(buckets: readonly number[], q: number): number | null {
  let total = 0;
  for (const n of buckets) total += n;
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    const n = buckets[i];
    if (n > 0 && below + n >= rank) {
      if (i >= LEASE_WAIT_BOUNDS_MS.length) return LEASE_WAIT_BOUNDS_MS[LEASE_WAIT_BOUNDS_MS.length - 1];
      const lower = i === 0 ? 0 : LEASE_WAIT_BOUNDS_MS[i - 1];
      const upper = LEASE_WAIT_BOUNDS_MS[i];
      return lower + ((upper - lower) * (rank - below)) / n;
    }
    below += n;
  }
  return LEASE_WAIT_BOUNDS_MS[LEASE_WAIT_BOUNDS_MS.length - 1];
}
