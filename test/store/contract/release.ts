/**
 * Release: an unstarted lease given back with its attempt refunded, never
 * spending the last attempt, only with the current token.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, MINUTE, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeRelease(): void {
  describe("release", () => {
    it("gives an unstarted first lease back: QUEUED, attempt refunded, eligible at once", async () => {
      const submitted = await submitOne({ schedule: { delayMs: SECOND } });
      clock.advance(SECOND);
      const lease = await claimOne("billing", MINUTE, "leaving");
      clock.advance(SECOND);
      const job = await store.release(lease.job.id, lease.leaseToken);
      expect(job).toMatchObject({
        state: "queued",
        attempts: 0,
        deliveries: 1,
        scheduleTime: clock.now(),
        workerId: null,
        leaseExpireTime: null,
      });
      const events = await store.listJobEvents(submitted.id);
      expect(events.at(-1)).toMatchObject({ kind: "released", fromState: "running", toState: "queued", workerId: "leaving", attempt: 0 });
      expect((await claimOne()).job).toMatchObject({ attempts: 1, deliveries: 2 });
    });

    it("gives a retry back as RETRY with its earlier attempts", async () => {
      await submitOne({ retryBaseDelayMs: 0 });
      let lease = await claimOne();
      await store.fail(lease.job.id, lease.leaseToken, { error: "e", permanent: false });
      lease = await claimOne();
      const job = await store.release(lease.job.id, lease.leaseToken);
      expect(job).toMatchObject({ state: "retry", attempts: 1 });
    });

    it("never spends the last attempt", async () => {
      await submitOne({ maxAttempts: 1 });
      const lease = await claimOne();
      expect((await store.release(lease.job.id, lease.leaseToken)).state).toBe("queued");
      const again = await claimOne();
      expect(again.job.attempts).toBe(1);
    });

    it("needs the current token of an active lease", async () => {
      await submitOne();
      const lease = await claimOne("billing", SECOND);
      expect((await refusal(store.release(lease.job.id, "wrong"))).reason).toBe("LEASE_REJECTED");
      clock.advance(SECOND);
      expect((await refusal(store.release(lease.job.id, lease.leaseToken))).reason).toBe("LEASE_EXPIRED");
    });
  });
}
