/**
 * Claim: a lease for the worker with the attempt and delivery counted, in
 * priority, schedule-time and id order, never one job to two claimers.
 */
import { describe, expect, it } from "vitest";
import { claimLeases } from "../../helpers/store.js";
import { claimOne, clock, HOUR, kinds, MINUTE, newJob, SECOND, store, submitOne } from "./helpers.js";

export function describeClaim(): void {
  describe("claim", () => {
    it("leases the job to the worker, counting the attempt and the delivery", async () => {
      const job = await submitOne();
      clock.advance(SECOND);
      const lease = await claimOne("billing", 30 * SECOND, "worker-7");
      expect(lease.leaseToken.length).toBeGreaterThanOrEqual(22);
      expect(lease.job).toMatchObject({
        id: job.id,
        state: "running",
        attempts: 1,
        deliveries: 1,
        workerId: "worker-7",
        leaseExpireTime: clock.now() + 30 * SECOND,
        updateTime: clock.now(),
      });
      expect(await kinds(job.id)).toEqual(["submitted:->queued", "claimed:queued>running"]);
      const events = await store.listJobEvents(job.id);
      expect(events[1]).toMatchObject({ workerId: "worker-7", attempt: 1, eventTime: clock.now() });
    });

    it("returns nothing when no job is eligible", async () => {
      await submitOne({ schedule: { delayMs: MINUTE } });
      await submitOne({ queue: "other" });
      expect(await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 5 })).toEqual([]);
    });

    it("takes priority first, then schedule time, then id", async () => {
      const low = await submitOne({ task: "low", priority: -5 });
      const laterHigh = await submitOne({ task: "later-high", priority: 10, schedule: { at: clock.now() + 10 } });
      const high = await submitOne({ task: "high", priority: 10 });
      const mid1 = await submitOne({ task: "mid1" });
      const mid2 = await submitOne({ task: "mid2" });
      clock.advance(SECOND);
      const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 10 });
      expect(leases.map((l) => l.job.id)).toEqual([high.id, laterHigh.id, mid1.id, mid2.id, low.id]);
    });

    it("does not lease a delayed job before its time, and does after", async () => {
      const job = await submitOne({ schedule: { delayMs: MINUTE } });
      clock.advance(MINUTE - 1);
      expect(await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 })).toEqual([]);
      clock.advance(1);
      expect((await claimOne()).job.id).toBe(job.id);
    });

    it("tells a claim that got fewer jobs than it asked for when the queue's next one becomes eligible, at the claim's time", async () => {
      const claim = (maxJobs: number, queue = "billing") => store.claimOutcome({ queue, workerId: "w", leaseDurationMs: MINUTE, maxJobs });
      const t0 = clock.now();
      await submitOne({ schedule: { delayMs: HOUR } });
      await submitOne({ queue: "emails", schedule: { delayMs: MINUTE } });
      await submitOne({ retryBaseDelayMs: 10 * SECOND });
      const first = await claim(2);
      expect(first).toMatchObject({ leases: [{ job: { state: "running" } }], heldBack: null, nextScheduleTime: t0 + HOUR });
      const [{ job: failing, leaseToken }] = first.leases;
      await store.fail(failing.id, leaseToken, { error: "boom", permanent: false });
      // The retry is due sooner than the delayed job; a job of another queue does not count.
      expect(await claim(1)).toEqual({ leases: [], heldBack: null, nextScheduleTime: t0 + 10 * SECOND });
      clock.advance(10 * SECOND - 1);
      expect((await claim(1)).nextScheduleTime).toBe(t0 + 10 * SECOND);
      clock.advance(1);
      // Due at the claim's time: claimed, not reported; a full claim reports nothing.
      expect(await claim(1)).toMatchObject({ leases: [{ job: { id: failing.id } }], nextScheduleTime: null });
      expect((await claim(1)).nextScheduleTime).toBe(t0 + HOUR);
      await store.pauseQueue("billing");
      expect(await claim(1)).toEqual({ leases: [], heldBack: null, nextScheduleTime: null });
      expect((await claim(1, "emails")).nextScheduleTime).toBe(t0 + MINUTE);
    });

    it("never gives one job to two concurrent claimers", async () => {
      await store.submit(Array.from({ length: 60 }, (_, i) => newJob({ task: `t${i}` })));
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          claimLeases(store, { queue: "billing", workerId: `w${i}`, leaseDurationMs: MINUTE, maxJobs: 2 }),
        ),
      );
      const ids = results.flat().map((l) => l.job.id);
      expect(ids).toHaveLength(60);
      expect(new Set(ids).size).toBe(60);
    });

    it("returns a different token for every lease", async () => {
      await store.submit([newJob(), newJob()]);
      const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 2 });
      expect(leases[0].leaseToken).not.toBe(leases[1].leaseToken);
    });
  });
}
