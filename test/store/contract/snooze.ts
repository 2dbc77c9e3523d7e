/**
 * Snooze: a running job back to QUEUED after a delay of 0 to 30 days, its
 * attempt refunded and its lease ended.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, DAY, kinds, MINUTE, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeSnooze(): void {
  describe("snooze", () => {
    it("puts a running job back to QUEUED after the delay, attempt refunded, with a SNOOZED event", async () => {
      const submitted = await submitOne();
      const lease = await claimOne("billing", MINUTE, "busy-worker");
      clock.advance(SECOND);
      const job = await store.snooze(lease.job.id, lease.leaseToken, 30 * SECOND);
      expect(job).toMatchObject({
        state: "queued",
        attempts: 0,
        deliveries: 1,
        scheduleTime: clock.now() + 30 * SECOND,
        workerId: null,
        leaseExpireTime: null,
        finishTime: null,
      });
      expect((await store.listJobEvents(submitted.id)).at(-1)).toMatchObject({
        kind: "snoozed",
        fromState: "running",
        toState: "queued",
        workerId: "busy-worker",
        attempt: 0,
        eventTime: clock.now(),
      });
      expect(await store.claimOutcome({ queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 })).toEqual({
        leases: [],
        heldBack: null,
        nextScheduleTime: clock.now() + 30 * SECOND,
      });
      clock.advance(30 * SECOND);
      expect((await claimOne()).job).toMatchObject({ attempts: 1, deliveries: 2 });
    });

    it("never spends the budget, however often a job is snoozed", async () => {
      const submitted = await submitOne({ maxAttempts: 1 });
      for (let i = 0; i < 3; i++) {
        const lease = await claimOne();
        expect((await store.snooze(lease.job.id, lease.leaseToken, 0)).attempts).toBe(0);
      }
      const lease = await claimOne();
      expect(lease.job).toMatchObject({ state: "running", attempts: 1, deliveries: 4 });
      expect((await store.complete(submitted.id, lease.leaseToken, null)).state).toBe("completed");
    });

    it("queues a retried job again with its earlier attempts", async () => {
      await submitOne({ retryBaseDelayMs: 0 });
      let lease = await claimOne();
      await store.fail(lease.job.id, lease.leaseToken, { error: "flaky", permanent: false });
      lease = await claimOne();
      expect(await store.snooze(lease.job.id, lease.leaseToken, SECOND)).toMatchObject({
        state: "queued",
        attempts: 1,
        lastError: "flaky",
      });
    });

    it("needs the current token of an active lease, and ends that lease", async () => {
      const submitted = await submitOne();
      const lease = await claimOne("billing", SECOND);
      expect((await refusal(store.snooze(lease.job.id, "wrong", 0))).reason).toBe("LEASE_REJECTED");
      clock.advance(SECOND);
      expect((await refusal(store.snooze(lease.job.id, lease.leaseToken, 0))).reason).toBe("LEASE_EXPIRED");
      await store.recoverExpiredLeases();
      const next = await claimOne();
      await store.snooze(next.job.id, next.leaseToken, 0);
      // The snoozed lease is over: its token no longer acknowledges anything.
      expect((await refusal(store.snooze(submitted.id, next.leaseToken, 0))).reason).toBe("LEASE_REJECTED");
      expect((await refusal(store.complete(submitted.id, next.leaseToken, null))).reason).toBe("LEASE_REJECTED");
      expect((await refusal(store.snooze("01a230ac-40d4-7659-bdf9-5453cc692072", "x", 0))).reason).toBe("JOB_NOT_FOUND");
      expect(await kinds(submitted.id)).toEqual([
        "submitted:->queued",
        "claimed:queued>running",
        "lease_expired:running>retry",
        "claimed:retry>running",
        "snoozed:running>queued",
      ]);
    });

    it("takes a delay from 0 (eligible at once) to 30 days, as a submit's delay, and refuses more without a change", async () => {
      const submitted = await submitOne();
      let lease = await claimOne();
      expect((await store.snooze(lease.job.id, lease.leaseToken, 0)).scheduleTime).toBe(clock.now());
      lease = await claimOne();
      await expect(store.snooze(lease.job.id, lease.leaseToken, 30 * DAY + 1)).rejects.toThrow();
      await expect(store.snooze(lease.job.id, lease.leaseToken, -1)).rejects.toThrow();
      expect(await store.getJob(submitted.id)).toMatchObject({ state: "running", attempts: 1 });
      expect((await store.snooze(lease.job.id, lease.leaseToken, 30 * DAY)).scheduleTime).toBe(clock.now() + 30 * DAY);
      expect((await kinds(submitted.id)).filter((k) => k.startsWith("snoozed"))).toHaveLength(2);
    });

    it("counts the job as queued again", async () => {
      await submitOne();
      const lease = await claimOne();
      await store.snooze(lease.job.id, lease.leaseToken, MINUTE);
      const [billing] = await store.queueCounts();
      expect(billing.counts).toMatchObject({ queued: 1, running: 0, retry: 0 });
    });
  });
}
