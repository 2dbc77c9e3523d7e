/**
 * Heartbeat: a lease extended by the given or the claim's duration, and
 * refused for a wrong token, after expiry or on a job that is not running.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, kinds, MINUTE, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeHeartbeat(): void {
  describe("heartbeat", () => {
    it("extends the lease by the given duration", async () => {
      await submitOne();
      const lease = await claimOne();
      clock.advance(50 * SECOND);
      const job = await store.heartbeat(lease.job.id, lease.leaseToken, 2 * MINUTE);
      expect(job.leaseExpireTime).toBe(clock.now() + 2 * MINUTE);
      expect(await kinds(job.id)).toContain("heartbeat:running>running");
    });

    it("extends by the claim's duration when none is given", async () => {
      await submitOne();
      const lease = await claimOne("billing", 20 * SECOND);
      clock.advance(10 * SECOND);
      const job = await store.heartbeat(lease.job.id, lease.leaseToken);
      expect(job.leaseExpireTime).toBe(clock.now() + 20 * SECOND);
    });

    it("refuses a wrong token with LEASE_REJECTED", async () => {
      await submitOne();
      const lease = await claimOne();
      const err = await refusal(store.heartbeat(lease.job.id, "not-the-token"));
      expect(err.reason).toBe("LEASE_REJECTED");
    });

    it("refuses the right token after expiry with LEASE_EXPIRED, even before recovery", async () => {
      await submitOne();
      const lease = await claimOne("billing", 10 * SECOND);
      clock.advance(10 * SECOND);
      const err = await refusal(store.heartbeat(lease.job.id, lease.leaseToken));
      expect(err.reason).toBe("LEASE_EXPIRED");
    });

    it("refuses a job that is not running", async () => {
      const job = await submitOne();
      expect((await refusal(store.heartbeat(job.id, "x"))).reason).toBe("LEASE_REJECTED");
    });
  });
}
