/**
 * GetQueueActivity's points from a queue's samples (store/reads/queue-activity.ts):
 * the window ends with the current minute, steps sum their minutes, and the
 * gauges at each step's end are the counts now less the changes after it.
 */
import { describe, expect, it } from "vitest";
import { LEASE_WAIT_BUCKETS, leaseWaitBucket } from "../../src/domain/queue-activity.js";
import { activityPoints, activityWindow } from "../../src/store/reads/queue-activity.js";
import type { ActivitySample } from "../../src/store/store.js";

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

function sample(minute: number, values: Partial<Omit<ActivitySample, "leaseWaits">> & { waitsMs?: number[] } = {}): ActivitySample {
  const leaseWaits = new Array<number>(LEASE_WAIT_BUCKETS).fill(0);
  for (const w of values.waitsMs ?? []) leaseWaits[leaseWaitBucket(w)]++;
  const { waitsMs: _, ...rest } = values;
  return { minute, completed: 0, failed: 0, queued: 0, retry: 0, running: 0, leaseWaits, ...rest };
}

describe("a queue's activity timeline", () => {
  it("ends its window with the step that holds the minute of now, steps starting at multiples of the step", () => {
    expect(activityWindow(T0 + 7 * MINUTE + 30_000, 60 * MINUTE, 5 * MINUTE)).toEqual({
      startMinute: T0 + 10 * MINUTE - 60 * MINUTE,
      endMinute: T0 + 10 * MINUTE,
      stepMs: 5 * MINUTE,
    });
    expect(activityWindow(T0 + 90_000, 60 * MINUTE, MINUTE)).toEqual({
      startMinute: T0 + 2 * MINUTE - 60 * MINUTE,
      endMinute: T0 + 2 * MINUTE,
      stepMs: MINUTE,
    });
  });

  it("sums the minutes of each step and estimates its waits from their histograms together", () => {
    const window = { startMinute: T0, endMinute: T0 + 10 * MINUTE, stepMs: 5 * MINUTE };
    const points = activityPoints(
      {
        samples: [
          sample(T0, { completed: 2, failed: 1, waitsMs: [10, 10] }),
          sample(T0 + 4 * MINUTE, { completed: 3, waitsMs: [30_000] }),
          sample(T0 + 9 * MINUTE, { failed: 4 }),
        ],
        counts: { queued: 0, retry: 0, running: 0 },
      },
      window,
    );
    expect(points.map((p) => [p.startTime, p.completed, p.failed, p.leased])).toEqual([
      [T0, 5, 1, 3],
      [T0 + 5 * MINUTE, 0, 4, 0],
    ]);
    expect(points[0].leaseWaitP50Ms).toBeLessThanOrEqual(10);
    expect(points[0].leaseWaitP95Ms).toBeGreaterThan(10_000);
    expect(points[1].leaseWaitP50Ms).toBeNull();
  });

  it("counts each gauge back from the counts now, also past samples after the window, and never below zero", () => {
    const window = { startMinute: T0, endMinute: T0 + 3 * MINUTE, stepMs: MINUTE };
    const points = activityPoints(
      {
        samples: [
          sample(T0 - MINUTE, { queued: 50 }),
          sample(T0, { queued: 10 }),
          sample(T0 + 2 * MINUTE, { queued: -4, running: 4 }),
          // A clock that another writer saw ahead: its change is after the window, and still counted back.
          sample(T0 + 3 * MINUTE, { running: -1, retry: 1 }),
        ],
        counts: { queued: 6, retry: 1, running: 3 },
      },
      window,
    );
    expect(points.map((p) => [p.queued, p.retry, p.running])).toEqual([
      [10, 0, 0],
      [10, 0, 0],
      [6, 0, 4],
    ]);
    const short = activityPoints({ samples: [sample(T0 + MINUTE, { queued: 5 })], counts: { queued: 2, retry: 0, running: 0 } }, window);
    expect(short.map((p) => p.queued)).toEqual([0, 2, 2]);
  });
});
