/**
 * Complete and Fail: a result kept once per lease and never overwritten by
 * a late worker; retries after capped exponential backoff or retry_delay,
 * and dead-lettering when permanent or out of attempts.
 */
import { describe, expect, it } from "vitest";
import { claimLeases } from "../../helpers/store.js";
import { claimOne, clock, HOUR, kinds, MINUTE, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeCompleteAndFail(): void {
  describe("complete", () => {
    it("finishes the job with its result", async () => {
      await submitOne();
      const lease = await claimOne();
      clock.advance(SECOND);
      const job = await store.complete(lease.job.id, lease.leaseToken, '{"pages":3}');
      expect(job).toMatchObject({
        state: "completed",
        resultJson: '{"pages":3}',
        finishTime: clock.now(),
        leaseExpireTime: null,
        workerId: null,
        attempts: 1,
      });
      const events = await store.listJobEvents(job.id);
      expect(events.at(-1)).toMatchObject({ kind: "completed", fromState: "running", toState: "completed", workerId: "worker-1" });
    });

    it("accepts no second acknowledgement of the same lease", async () => {
      await submitOne();
      const lease = await claimOne();
      await store.complete(lease.job.id, lease.leaseToken, null);
      expect((await refusal(store.complete(lease.job.id, lease.leaseToken, null))).reason).toBe("LEASE_REJECTED");
      expect((await refusal(store.fail(lease.job.id, lease.leaseToken, { error: "x", permanent: false }))).reason).toBe("LEASE_REJECTED");
    });

    it("never lets a late worker overwrite the result of a newer lease", async () => {
      await submitOne();
      const first = await claimOne("billing", 10 * SECOND, "slow");
      clock.advance(10 * SECOND);
      const second = await claimOne("billing", MINUTE, "fast");
      expect(second.job.id).toBe(first.job.id);
      expect(second.job.deliveries).toBe(2);
      // The job was leased again, so the first token is no longer the current one.
      expect((await refusal(store.complete(first.job.id, first.leaseToken, '"stale"'))).reason).toBe("LEASE_REJECTED");
      const done = await store.complete(second.job.id, second.leaseToken, '"fresh"');
      expect(done.resultJson).toBe('"fresh"');
      expect((await refusal(store.complete(first.job.id, first.leaseToken, '"stale"'))).reason).toBe("LEASE_REJECTED");
    });

    it("refuses an unknown job id with JOB_NOT_FOUND", async () => {
      const err = await refusal(store.complete("01890000-0000-7000-8000-000000000000", "t", null));
      expect(err.reason).toBe("JOB_NOT_FOUND");
    });
  });

  describe("fail", () => {
    it("schedules a retry after exponential backoff while budget is left", async () => {
      await submitOne({ retryBaseDelayMs: 10 * SECOND, maxAttempts: 4 });
      let lease = await claimOne();
      let job = await store.fail(lease.job.id, lease.leaseToken, { error: "smtp timeout", permanent: false });
      expect(job).toMatchObject({ state: "retry", scheduleTime: clock.now() + 10 * SECOND, lastError: "smtp timeout" });
      expect(job.workerId).toBeNull();
      clock.advance(10 * SECOND - 1);
      expect(await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 })).toEqual([]);
      clock.advance(1);
      lease = await claimOne();
      expect(lease.job.attempts).toBe(2);
      job = await store.fail(lease.job.id, lease.leaseToken, { error: "again", permanent: false });
      expect(job.scheduleTime).toBe(clock.now() + 20 * SECOND);
      clock.advance(20 * SECOND);
      lease = await claimOne();
      job = await store.fail(lease.job.id, lease.leaseToken, { error: "again", permanent: false });
      expect(job.scheduleTime).toBe(clock.now() + 40 * SECOND);
      const events = await store.listJobEvents(job.id);
      expect(events.at(-1)).toMatchObject({ kind: "failed", fromState: "running", toState: "retry", message: "again", attempt: 3 });
    });

    it("caps the backoff at one hour", async () => {
      await submitOne({ retryBaseDelayMs: HOUR, maxAttempts: 5 });
      let lease = await claimOne();
      await store.fail(lease.job.id, lease.leaseToken, { error: "e", permanent: false });
      clock.advance(HOUR);
      lease = await claimOne();
      const job = await store.fail(lease.job.id, lease.leaseToken, { error: "e", permanent: false });
      expect(job.scheduleTime).toBe(clock.now() + HOUR);
    });

    it("uses retry_delay instead of the backoff when given", async () => {
      await submitOne();
      const lease = await claimOne();
      const job = await store.fail(lease.job.id, lease.leaseToken, { error: "rate limited", permanent: false, retryDelayMs: 0 });
      expect(job).toMatchObject({ state: "retry", scheduleTime: clock.now() });
    });

    it("dead-letters at once when permanent, with one DEAD_LETTERED event", async () => {
      await submitOne();
      const lease = await claimOne();
      const job = await store.fail(lease.job.id, lease.leaseToken, { error: "bad invoice", permanent: true });
      expect(job).toMatchObject({ state: "dead", finishTime: clock.now(), lastError: "bad invoice", attempts: 1 });
      expect(await kinds(job.id)).toEqual(["submitted:->queued", "claimed:queued>running", "dead_lettered:running>dead"]);
    });

    it("dead-letters when the attempt budget is spent", async () => {
      await submitOne({ maxAttempts: 2, retryBaseDelayMs: 0 });
      let lease = await claimOne();
      await store.fail(lease.job.id, lease.leaseToken, { error: "one", permanent: false });
      lease = await claimOne();
      const job = await store.fail(lease.job.id, lease.leaseToken, { error: "two", permanent: false });
      expect(job).toMatchObject({ state: "dead", attempts: 2 });
      expect((await kinds(job.id)).at(-1)).toBe("dead_lettered:running>dead");
    });
  });
}
