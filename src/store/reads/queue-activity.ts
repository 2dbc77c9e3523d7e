/**
 * GetQueueActivity's model (docs/api.md "Queue activity"), assembled the
 * same way whichever engine read the samples (Store.queueActivity): a
 * window of whole minutes whose last step holds the current one, in points of a step,
 * each with its counters summed, its lease waits' percentiles estimated
 * from its minutes' histograms added together, and the queue's gauges at
 * its end, counted back from the counts now.
 */
import { ACTIVITY_MINUTE_MS, LEASE_WAIT_BUCKETS, leaseWaitQuantile, minuteOf } from "../../domain/queue-activity.js";
import type { QueueActivity } from "../store.js";

/** The minutes a timeline covers: [startMinute, endMinute), in points of stepMs. */
export interface ActivityWindow {
  startMinute: number;
  /** The end of the last step, which holds the current minute (what happened in it so far). */
  endMinute: number;
  stepMs: number;
}

/** What one queue did in one step. */
export interface ActivityPoint {
  startTime: number;
  completed: number;
  failed: number;
  /** Jobs QUEUED, RETRY and RUNNING at the end of the step (the last step's end is now). */
  queued: number;
  retry: number;
  running: number;
  /** Leases granted in the step. */
  leased: number;
  /** Estimates of the median and the 95th percentile of those leases' waits; null when none. */
  leaseWaitP50Ms: number | null;
  leaseWaitP95Ms: number | null;
}

/**
 * The window of `windowMs` (whole minutes, a multiple of stepMs) whose last
 * step holds the minute of `now`. Steps start at multiples of stepMs since
 * the epoch (a 5-minute step at :00, :05, ...), so a point keeps its place
 * from one read to the next; the last one may reach past the current minute.
 */
export function activityWindow(now: number, windowMs: number, stepMs: number): ActivityWindow {
  const afterNow = minuteOf(now) + ACTIVITY_MINUTE_MS;
  const endMinute = Math.ceil(afterNow / stepMs) * stepMs;
  return { startMinute: endMinute - windowMs, endMinute, stepMs };
}

/** The window's points, oldest first, from samples read from its first minute on. */
export function activityPoints(activity: QueueActivity, window: ActivityWindow): ActivityPoint[] {
  const { startMinute, endMinute, stepMs } = window;
  const n = Math.round((endMinute - startMinute) / stepMs);
  const waits = Array.from({ length: n }, () => new Array<number>(LEASE_WAIT_BUCKETS).fill(0));
  const points: ActivityPoint[] = Array.from({ length: n }, (_, k) => ({
    startTime: startMinute + k * stepMs,
    completed: 0,
    failed: 0,
    queued: 0,
    retry: 0,
    running: 0,
    leased: 0,
    leaseWaitP50Ms: null,
    leaseWaitP95Ms: null,
  }));
  for (const s of activity.samples) {
    const k = Math.floor((s.minute - startMinute) / stepMs);
    if (k < 0 || k >= n) continue;
    points[k].completed += s.completed;
    points[k].failed += s.failed;
    for (let b = 0; b < LEASE_WAIT_BUCKETS; b++) waits[k][b] += s.leaseWaits[b];
  }
  // Each gauge at the end of step k is its count now less the changes of every minute after it.
  const { samples, counts } = activity;
  let later = samples.length - 1;
  const changed = { queued: 0, retry: 0, running: 0 };
  for (let k = n - 1; k >= 0; k--) {
    const end = startMinute + (k + 1) * stepMs;
    for (; later >= 0 && samples[later].minute >= end; later--) {
      changed.queued += samples[later].queued;
      changed.retry += samples[later].retry;
      changed.running += samples[later].running;
    }
    const p = points[k];
    // Never below zero: changes no sample recorded (a database from before samples were kept) could otherwise make one negative.
    p.queued = Math.max(0, counts.queued - changed.queued);
    p.retry = Math.max(0, counts.retry - changed.retry);
    p.running = Math.max(0, counts.running - changed.running);
    for (const w of waits[k]) p.leased += w;
    p.leaseWaitP50Ms = leaseWaitQuantile(waits[k], 0.5);
    p.leaseWaitP95Ms = leaseWaitQuantile(waits[k], 0.95);
  }
  return points;
}
