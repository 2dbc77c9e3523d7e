/**
 * The arithmetic of queue activity (docs/api.md "Queue activity"): minutes,
 * the lease-wait histogram's buckets, and the percentiles estimated from it.
 */
import { describe, expect, it } from "vitest";
import {
  ACTIVITY_RETENTION_MS,
  LEASE_WAIT_BOUNDS_MS,
  LEASE_WAIT_BUCKETS,
  leaseWaitBucket,
  leaseWaitQuantile,
  minuteOf,
} from "../../src/domain/queue-activity.js";
import { BOUNDS, DEFAULTS } from "../../src/domain/request-bounds.js";

const histogram = (counts: Record<number, number>) => Array.from({ length: LEASE_WAIT_BUCKETS }, (_, i) => counts[i] ?? 0);

describe("queue activity's arithmetic", () => {
  it("puts a time in the minute that starts at or before it", () => {
    const noon = Date.UTC(2026, 10, 30, 12, 0, 0);
    expect(minuteOf(noon)).toBe(noon);
    expect(minuteOf(noon + 59_999)).toBe(noon);
    expect(minuteOf(noon + 60_000)).toBe(noon + 60_000);
    expect(minuteOf(-1)).toBe(-60_000);
  });

  it("counts a wait in the first bucket whose bound is not below it, and past 1 h in the last", () => {
    expect(LEASE_WAIT_BUCKETS).toBe(21);
    expect(leaseWaitBucket(0)).toBe(0);
    expect(leaseWaitBucket(1)).toBe(0);
    expect(leaseWaitBucket(1.5)).toBe(1);
    expect(leaseWaitBucket(30_000)).toBe(LEASE_WAIT_BOUNDS_MS.indexOf(30_000));
    expect(leaseWaitBucket(30_001)).toBe(LEASE_WAIT_BOUNDS_MS.indexOf(60_000));
    expect(leaseWaitBucket(3_600_000)).toBe(19);
    expect(leaseWaitBucket(3_600_001)).toBe(20);
    // Bounds strictly increase: every wait has exactly one bucket.
    expect(LEASE_WAIT_BOUNDS_MS.every((b, i) => i === 0 || b > LEASE_WAIT_BOUNDS_MS[i - 1])).toBe(true);
  });

  it("estimates a quantile inside the bucket that holds its rank, interpolating linearly", () => {
    expect(leaseWaitQuantile(histogram({}), 0.5)).toBeNull();
    // 10 waits in (20, 50] ms: the median is halfway, the 95th near the top.
    const tens = histogram({ [leaseWaitBucket(30)]: 10 });
    expect(leaseWaitQuantile(tens, 0.5)).toBe(35);
    expect(leaseWaitQuantile(tens, 0.95)).toBeCloseTo(48.5);
    // 90 fast (<= 1 ms) and 10 slow (in (10, 30] s): p50 fast, p95 in the slow bucket.
    const split = histogram({ 0: 90, [leaseWaitBucket(20_000)]: 10 });
    expect(leaseWaitQuantile(split, 0.5)).toBeLessThanOrEqual(1);
    expect(leaseWaitQuantile(split, 0.95)).toBe(10_000 + (20_000 * 5) / 10);
    // Past the last bound the estimate is that bound: at least an hour.
    expect(leaseWaitQuantile(histogram({ 20: 3 }), 0.5)).toBe(3_600_000);
  });

  it("keeps the samples for as long as GetQueueActivity's longest window reaches back", () => {
    expect(BOUNDS.activityWindowMs[1]).toBeLessThanOrEqual(ACTIVITY_RETENTION_MS);
    expect(DEFAULTS.activityWindowMs % DEFAULTS.activityStepMs).toBe(0);
  });
});
