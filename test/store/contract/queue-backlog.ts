/**
 * Store.queueBacklog, the autoscaler's count of one queue (docs/operations.md
 * "Autoscaling workers"): QUEUED and RETRY jobs whose time has come, the
 * running ones, when the next waiting job becomes eligible, and whether the
 * queue is paused.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, HOUR, MINUTE, SECOND, store, submitOne } from "./helpers.js";

export function describeQueueBacklog(): void {
  describe("queue backlog", () => {
    it("is empty for a queue nobody used", async () => {
      expect(await store.queueBacklog("billing")).toEqual({ eligible: 0, running: 0, nextEligibleTime: null, paused: false });
    });

    it("counts queued and retry jobs whose time has come, and running ones, of its queue only", async () => {
      await submitOne();
      await claimOne(); // running
      await submitOne();
      const backingOff = await claimOne();
      await store.fail(backingOff.job.id, backingOff.leaseToken, { error: "boom", permanent: false, retryDelayMs: 10 * MINUTE });
      await submitOne();
      const dueAgain = await claimOne();
      await store.fail(dueAgain.job.id, dueAgain.leaseToken, { error: "boom", permanent: false, retryDelayMs: 0 });
      await submitOne(); // queued, eligible now
      await submitOne({ schedule: { delayMs: HOUR } });
      await submitOne({ queue: "emails" });
      expect(await store.queueBacklog("billing")).toEqual({
        eligible: 2,
        running: 1,
        nextEligibleTime: clock.now() + 10 * MINUTE,
        paused: false,
      });
      expect(await store.queueBacklog("emails")).toEqual({ eligible: 1, running: 0, nextEligibleTime: null, paused: false });
    });

    it("counts a waiting job once its time comes, without any commit", async () => {
      await submitOne({ schedule: { delayMs: 30 * SECOND } });
      expect(await store.queueBacklog("billing")).toMatchObject({ eligible: 0, nextEligibleTime: clock.now() + 30 * SECOND });
      clock.advance(30 * SECOND);
      expect(await store.queueBacklog("billing")).toMatchObject({ eligible: 1, nextEligibleTime: null });
    });

    it("tells a paused queue, with its jobs still counted", async () => {
      await submitOne();
      await store.pauseQueue("billing");
      expect(await store.queueBacklog("billing")).toEqual({ eligible: 1, running: 0, nextEligibleTime: null, paused: true });
      await store.pauseQueue("emails");
      expect(await store.queueBacklog("emails")).toEqual({ eligible: 0, running: 0, nextEligibleTime: null, paused: true });
      await store.resumeQueue("billing");
      expect((await store.queueBacklog("billing")).paused).toBe(false);
    });

    it("no longer counts jobs that finished", async () => {
      await submitOne();
      const cancelled = await submitOne();
      const lease = await claimOne();
      await store.cancel(cancelled.id, "not needed");
      await store.complete(lease.job.id, lease.leaseToken, null);
      expect(await store.queueBacklog("billing")).toEqual({ eligible: 0, running: 0, nextEligibleTime: null, paused: false });
    });
  });
}
