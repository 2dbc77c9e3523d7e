/**
 * Lease expiry: an expired lease recovered to RETRY (or dead-lettered when
 * its budget is spent), by a sweep or by the next claim on its queue.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, kinds, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeLeaseExpiry(): void {
  describe("lease expiry", () => {
    it("recovers an expired lease to RETRY, eligible at once, keeping the budget", async () => {
      const submitted = await submitOne();
      const lease = await claimOne("billing", 30 * SECOND, "crashed");
      clock.advance(30 * SECOND - 1);
      expect(await store.recoverExpiredLeases()).toBe(0);
      clock.advance(1);
      expect(await store.recoverExpiredLeases()).toBe(1);
      const job = (await store.getJob(submitted.id))!;
      expect(job).toMatchObject({ state: "retry", scheduleTime: clock.now(), attempts: 1, workerId: null, leaseExpireTime: null });
      const events = await store.listJobEvents(job.id);
      expect(events.at(-1)).toMatchObject({ kind: "lease_expired", fromState: "running", toState: "retry", workerId: "crashed" });
      expect((await refusal(store.complete(job.id, lease.leaseToken, null))).reason).toBe("LEASE_EXPIRED");
      expect((await claimOne()).job.attempts).toBe(2);
    });

    it("dead-letters an expired lease whose budget is spent, recording both events", async () => {
      await submitOne({ maxAttempts: 1 });
      const lease = await claimOne("billing", SECOND);
      clock.advance(SECOND);
      expect(await store.recoverExpiredLeases()).toBe(1);
      const job = (await store.getJob(lease.job.id))!;
      expect(job.state).toBe("dead");
      expect((await kinds(job.id)).slice(-2)).toEqual(["lease_expired:running>dead", "dead_lettered:running>dead"]);
    });

    it("is recovered by the next claim on the queue without a sweep", async () => {
      await submitOne();
      const first = await claimOne("billing", SECOND);
      clock.advance(SECOND);
      const second = await claimOne("billing", SECOND, "w2");
      expect(second.job.id).toBe(first.job.id);
      expect(await kinds(first.job.id)).toEqual([
        "submitted:->queued",
        "claimed:queued>running",
        "lease_expired:running>retry",
        "claimed:retry>running",
      ]);
    });
  });
}
