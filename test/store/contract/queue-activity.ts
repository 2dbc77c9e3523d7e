/**
 * Queue activity (docs/api.md "Queue activity"): each minute's sample of a
 * queue is written by the transactions that change its jobs, read back with
 * the queue's counts of the same snapshot, the same from every store
 * instance on the database, and pruned by age.
 */
import { describe, expect, it } from "vitest";
import { LEASE_WAIT_BUCKETS, leaseWaitBucket } from "../../../src/domain/queue-activity.js";
import { activityPoints, activityWindow } from "../../../src/store/reads/queue-activity.js";
import type { ActivitySample } from "../../../src/store/store.js";
import { claimLeases } from "../../helpers/store.js";
import { clock, harness, HOUR, MINUTE, newJob, SECOND, store } from "./helpers.js";

/** A histogram with `n` leases in the bucket of `waitMs`. */
function waits(...entries: Array<[waitMs: number, n: number]>): number[] {
  const buckets = new Array<number>(LEASE_WAIT_BUCKETS).fill(0);
  for (const [waitMs, n] of entries) buckets[leaseWaitBucket(waitMs)] += n;
  return buckets;
}

function sample(minute: number, values: Partial<ActivitySample> = {}): ActivitySample {
  return { minute, completed: 0, failed: 0, queued: 0, retry: 0, running: 0, leaseWaits: waits(), ...values };
}

export function describeQueueActivity(): void {
  describe("queue activity", () => {
    it("records each minute's completions, failed attempts, lease waits and count changes with the transitions", async () => {
      const start = clock.now();
      await store.submit([newJob(), newJob(), newJob(), newJob({ queue: "emails" })]);
      clock.advance(30 * SECOND);
      const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 10 * MINUTE, maxJobs: 2 });
      expect(leases).toHaveLength(2);
      clock.advance(40 * SECOND);
      await store.complete(leases[0].job.id, leases[0].leaseToken, null);
      await store.fail(leases[1].job.id, leases[1].leaseToken, { error: "boom", permanent: false });

      const activity = await store.queueActivity("billing", start);
      expect(activity.samples).toEqual([
        sample(start, { queued: 1, running: 2, leaseWaits: waits([30 * SECOND, 2]) }),
        sample(start + MINUTE, { completed: 1, failed: 1, running: -2, retry: 1 }),
      ]);
      expect(activity.counts).toEqual({ queued: 1, retry: 1, running: 0 });
      expect(await store.queueActivity("emails", start)).toEqual({
        samples: [sample(start, { queued: 1 })],
        counts: { queued: 1, retry: 0, running: 0 },
      });
      // From a later minute on, only the later sample; a queue without jobs has none.
      expect((await store.queueActivity("billing", start + MINUTE)).samples.map((s) => s.minute)).toEqual([start + MINUTE]);
      expect(await store.queueActivity("nothing-here", start)).toEqual({ samples: [], counts: { queued: 0, retry: 0, running: 0 } });
    });

    it("counts a failed attempt once, a lease that expired too, and a release, a snooze or a cancel as none", async () => {
      const start = clock.now();
      await store.submit([newJob({ maxAttempts: 1 }), newJob(), newJob(), newJob()]);
      const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 4 });
      const [expiring, released, snoozed, dead] = leases;
      expect(expiring.job.maxAttempts).toBe(1);
      await store.release(released.job.id, released.leaseToken);
      await store.snooze(snoozed.job.id, snoozed.leaseToken, HOUR);
      await store.fail(dead.job.id, dead.leaseToken, { error: "no", permanent: true });
      const [pending] = await store.listJobs({ queue: "billing", states: ["queued"], limit: 10 });
      await store.cancel(pending.id, "not needed");
      clock.advance(MINUTE);
      // The expiry of a lease with the budget spent stores two events (lease_expired, dead_lettered): one failed attempt.
      expect(await store.recoverExpiredLeases()).toBe(1);
      const activity = await store.queueActivity("billing", start);
      expect(activity.samples.map((s) => [s.minute - start, s.completed, s.failed])).toEqual([
        [0, 0, 1],
        [MINUTE, 0, 1],
      ]);
      expect(activity.samples[0].leaseWaits).toEqual(waits([0, 4]));
    });

    it("answers the same to another store instance on the database, as another server would be", async () => {
      const start = clock.now();
      await store.submit([newJob(), newJob()]);
      clock.advance(2 * SECOND);
      const [lease] = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
      await store.complete(lease.job.id, lease.leaseToken, null);
      const other = await harness.openInstance();
      const seen = await other.queueActivity("billing", start);
      expect(seen).toEqual(await store.queueActivity("billing", start));
      expect(seen.samples).toEqual([sample(start, { completed: 1, queued: 1, leaseWaits: waits([2 * SECOND, 1]) })]);
      // What the other instance writes lands in the same sample.
      const [second] = await claimLeases(other, { queue: "billing", workerId: "w2", leaseDurationMs: MINUTE, maxJobs: 1 });
      await other.complete(second.job.id, second.leaseToken, null);
      expect((await store.queueActivity("billing", start)).samples).toEqual([
        sample(start, { completed: 2, leaseWaits: waits([2 * SECOND, 2]) }),
      ]);
    });

    it("gives each minute of a window its gauges, counted back from the counts now", async () => {
      const start = clock.now();
      await store.submit(Array.from({ length: 5 }, () => newJob()));
      clock.advance(MINUTE);
      const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: HOUR, maxJobs: 3 });
      clock.advance(2 * MINUTE);
      for (const l of leases) await store.complete(l.job.id, l.leaseToken, null);
      clock.advance(30 * SECOND);

      const window = activityWindow(clock.now(), 5 * MINUTE, MINUTE);
      expect(window.startMinute).toBe(start - MINUTE);
      const points = activityPoints(await store.queueActivity("billing", window.startMinute), window);
      expect(points.map((p) => [p.startTime - start, p.queued, p.running, p.completed, p.leased])).toEqual([
        [-MINUTE, 0, 0, 0, 0],
        [0, 5, 0, 0, 0],
        [MINUTE, 2, 3, 0, 3],
        [2 * MINUTE, 2, 3, 0, 0],
        [3 * MINUTE, 2, 0, 3, 0],
      ]);
      expect(points[2].leaseWaitP50Ms).toBeGreaterThan(30 * SECOND);
      expect(points[2].leaseWaitP50Ms).toBeLessThanOrEqual(MINUTE);
    });

    it("prunes the samples of minutes before a cutoff, oldest first, in bounded transactions", async () => {
      const start = clock.now();
      for (let i = 0; i < 3; i++) {
        await store.submit([newJob(), newJob({ queue: "emails" })]);
        clock.advance(MINUTE);
      }
      expect(await store.pruneActivity({ beforeMinute: start + 2 * MINUTE, limit: 3 })).toEqual({ samples: 3, exhausted: false });
      expect((await store.queueActivity("billing", 0)).samples.map((s) => s.minute)).toEqual([start + 2 * MINUTE]);
      expect((await store.queueActivity("emails", 0)).samples.map((s) => s.minute)).toEqual([start + MINUTE, start + 2 * MINUTE]);
      expect(await store.pruneActivity({ beforeMinute: start + 2 * MINUTE, limit: 3 })).toEqual({ samples: 1, exhausted: true });
      expect(await store.pruneActivity({ beforeMinute: start + 2 * MINUTE, limit: 3 })).toEqual({ samples: 0, exhausted: true });
      // The counts are not samples: pruning leaves them.
      expect((await store.queueActivity("emails", 0)).counts.queued).toBe(3);
    });
  });
}
