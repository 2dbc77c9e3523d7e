/**
 * Redrive and Cancel: a dead job queued again with a fresh budget, a pending
 * one cancelled with its reason, and the refusals of both.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, kinds, MINUTE, refusal, store, submitOne } from "./helpers.js";

export function describeRedriveAndCancel(): void {
  describe("redrive and cancel", () => {
    it("redrives a dead job to QUEUED with a fresh budget, keeping deliveries", async () => {
      await submitOne({ maxAttempts: 1 });
      const lease = await claimOne();
      await store.fail(lease.job.id, lease.leaseToken, { error: "boom", permanent: false });
      clock.advance(MINUTE);
      const job = await store.redrive(lease.job.id);
      expect(job).toMatchObject({ state: "queued", attempts: 0, deliveries: 1, scheduleTime: clock.now(), finishTime: null });
      expect((await kinds(job.id)).at(-1)).toBe("redriven:dead>queued");
      expect((await claimOne()).job.deliveries).toBe(2);
    });

    it("refuses to redrive a job that is not dead with NOT_DEAD", async () => {
      const job = await submitOne();
      expect((await refusal(store.redrive(job.id))).reason).toBe("NOT_DEAD");
    });

    it("cancels queued and retrying jobs with the reason", async () => {
      const queued = await submitOne();
      const cancelled = await store.cancel(queued.id, "customer deleted");
      expect(cancelled).toMatchObject({ state: "cancelled", finishTime: clock.now() });
      const events = await store.listJobEvents(queued.id);
      expect(events.at(-1)).toMatchObject({ kind: "cancelled", fromState: "queued", toState: "cancelled", message: "customer deleted" });

      await submitOne({ task: "second" });
      const lease = await claimOne();
      await store.fail(lease.job.id, lease.leaseToken, { error: "e", permanent: false });
      expect((await store.cancel(lease.job.id, "")).state).toBe("cancelled");
    });

    it("refuses to cancel a running or finished job with NOT_CANCELLABLE", async () => {
      await submitOne();
      const lease = await claimOne();
      expect((await refusal(store.cancel(lease.job.id, "x"))).reason).toBe("NOT_CANCELLABLE");
      await store.complete(lease.job.id, lease.leaseToken, null);
      expect((await refusal(store.cancel(lease.job.id, "x"))).reason).toBe("NOT_CANCELLABLE");
    });

    it("cancels a running job with includeRunning, revoking its lease: its token is LEASE_REJECTED on every path", async () => {
      await submitOne();
      const lease = await claimOne();
      const cancelled = await store.cancel(lease.job.id, "stop it", true);
      expect(cancelled).toMatchObject({ state: "cancelled", finishTime: clock.now(), workerId: null, leaseExpireTime: null });
      const events = await store.listJobEvents(lease.job.id);
      expect(events.at(-1)).toMatchObject({ kind: "cancelled", fromState: "running", toState: "cancelled", message: "stop it" });
      expect(events.at(-1)?.workerId).toBe(lease.job.workerId);
      for (const late of [
        store.complete(lease.job.id, lease.leaseToken, "1"),
        store.fail(lease.job.id, lease.leaseToken, { error: "late", permanent: false }),
        store.heartbeat(lease.job.id, lease.leaseToken),
        store.release(lease.job.id, lease.leaseToken),
      ]) {
        const refused = await refusal(late);
        expect(refused.reason).toBe("LEASE_REJECTED");
        expect(refused.message).toContain("was cancelled while running");
      }
      expect((await store.getJob(lease.job.id))?.state).toBe("cancelled");
      expect((await refusal(store.cancel(lease.job.id, "again", true))).reason).toBe("NOT_CANCELLABLE");
    });

    it("refuses unknown ids with JOB_NOT_FOUND", async () => {
      const id = "01890000-0000-7000-8000-000000000000";
      expect((await refusal(store.redrive(id))).reason).toBe("JOB_NOT_FOUND");
      expect((await refusal(store.cancel(id, ""))).reason).toBe("JOB_NOT_FOUND");
      expect((await refusal(store.heartbeat(id, "t"))).reason).toBe("JOB_NOT_FOUND");
      expect(await store.getJob(id)).toBeUndefined();
      expect(await store.listJobEvents(id)).toEqual([]);
    });
  });
}
