/**
 * The store contract: every Store implementation (SQLite and PostgreSQL) runs
 * this suite unchanged. It covers every transition and refusal of the state
 * machine of docs/api.md "Job states", with a manual clock and no sleeps, and
 * the announcement guarantees of store.ts, also across two store instances on
 * one database, and schedules (run times across daylight-saving changes,
 * missed runs after downtime, each run once with two instances, reopen).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/domain/clock.js";
import { QueueError } from "../../src/domain/errors.js";
import type { JobEvent } from "../../src/domain/job.js";
import type { QueueConfig, QueueConfigField } from "../../src/domain/queue-limits.js";
import type { ScheduleSpec } from "../../src/domain/schedule.js";
import type { NewJob } from "../../src/domain/submission.js";
import { HEARTBEAT_EVENT_INTERVAL_MS, PROGRESS_EVENT_INTERVAL_MS } from "../../src/domain/state-machine.js";
import { purgeQueue, redriveAll } from "../../src/store/bulk-transitions.js";
import type { BulkBatchSpec, CommittedChange, PrunedJobs, Store } from "../../src/store/store.js";
import { claimLeases } from "../helpers/store.js";

export interface StoreHarness {
  store: Store;
  /**
   * Opens another store instance on the same database, with the same clock
   * (as a second server would); dispose closes it too.
   */
  openInstance(): Promise<Store>;
  /** Releases everything the stores used (files, schemas). */
  dispose(): Promise<void>;
}

export type StoreFactory = (clock: ManualClock) => Promise<StoreHarness>;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export function newJob(overrides: Partial<NewJob> = {}): NewJob {
  return {
    queue: "billing",
    task: "invoice.generate",
    payloadJson: '{"invoiceId":"inv_481"}',
    priority: 0,
    maxAttempts: 3,
    retryBaseDelayMs: 15 * SECOND,
    schedule: null,
    idempotencyKey: null,
    ...overrides,
  };
}

/** A schedule as CreateSchedule would pass it after validation: nightly at 03:00 UTC into "reports". */
export function newSchedule(overrides: Partial<ScheduleSpec> = {}): ScheduleSpec {
  return {
    name: "nightly",
    recurrence: { cron: "0 3 * * *" },
    timezone: "UTC",
    template: {
      queue: "reports",
      task: "report.build",
      payloadJson: '{"kind":"daily"}',
      priority: 0,
      maxAttempts: 3,
      retryBaseDelayMs: 15 * SECOND,
      delayMs: null,
    },
    paused: false,
    ...overrides,
  };
}

/**
 * Everything one store instance announces, with ways to wait (on the
 * announcements themselves, never on a timer) until it has announced a
 * sequence or something else.
 */
export function recordAnnouncements(store: Store) {
  const changes: CommittedChange[] = [];
  const waiters = new Set<() => boolean>();
  const off = store.onCommitted((change) => {
    changes.push(change);
    for (const settled of [...waiters]) if (settled()) waiters.delete(settled);
  });
  const until = (done: () => boolean) =>
    new Promise<void>((resolve) => {
      const settled = () => (done() ? (resolve(), true) : false);
      if (!settled()) waiters.add(settled);
    });
  const events = () => changes.flatMap((c) => c.events.map((e) => ({ ...e, external: c.external })));
  return {
    changes,
    events,
    sequences: () => events().map((e) => e.sequence),
    /** Resolves once an event with this sequence or a larger one was announced. */
    through: (sequence: number) => until(() => events().some((e) => e.sequence >= sequence)),
    until,
    off,
  };
}

async function refusal(promise: Promise<unknown>): Promise<QueueError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(QueueError);
    return err as QueueError;
  }
  throw new Error("expected the store to refuse");
}

export function describeStoreContract(name: string, factory: StoreFactory): void {
  describe(`Store contract: ${name}`, () => {
    let clock: ManualClock;
    let harness: StoreHarness;
    let store: Store;

    beforeEach(async () => {
      clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
      harness = await factory(clock);
      store = harness.store;
    });
    afterEach(async () => {
      await harness.dispose();
    });

    async function submitOne(overrides: Partial<NewJob> = {}) {
      const [outcome] = await store.submit([newJob(overrides)]);
      return outcome.job;
    }

    async function claimOne(queue = "billing", leaseDurationMs = MINUTE, workerId = "worker-1") {
      const leases = await claimLeases(store, { queue, workerId, leaseDurationMs, maxJobs: 1 });
      expect(leases).toHaveLength(1);
      return leases[0];
    }

    async function kinds(jobId: string) {
      return (await store.listJobEvents(jobId)).map((e) => `${e.kind}:${e.fromState ?? "-"}>${e.toState}`);
    }

    describe("submit", () => {
      it("creates a queued job eligible now, with a SUBMITTED event", async () => {
        const job = await submitOne();
        expect(job).toMatchObject({
          queue: "billing",
          task: "invoice.generate",
          payloadJson: '{"invoiceId":"inv_481"}',
          state: "queued",
          attempts: 0,
          deliveries: 0,
          maxAttempts: 3,
          scheduleTime: clock.now(),
          createTime: clock.now(),
          finishTime: null,
          workerId: null,
          leaseExpireTime: null,
        });
        expect(job.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
        expect(job).not.toHaveProperty("leaseTokenHash");
        expect(job).not.toHaveProperty("idempotencyKey");
        expect(await kinds(job.id)).toEqual(["submitted:->queued"]);
        expect(await store.getJob(job.id)).toEqual(job);
      });

      it("resolves delay and schedule_time against the clock", async () => {
        const delayed = await submitOne({ schedule: { delayMs: 5 * MINUTE } });
        const at = await submitOne({ schedule: { at: clock.now() + HOUR } });
        expect(delayed.scheduleTime).toBe(clock.now() + 5 * MINUTE);
        expect(at.scheduleTime).toBe(clock.now() + HOUR);
      });

      it("returns the original job for a repeated key and the same request", async () => {
        const [first] = await store.submit([newJob({ idempotencyKey: "inv_481-v1" })]);
        clock.advance(SECOND);
        const [again] = await store.submit([newJob({ idempotencyKey: "inv_481-v1", payloadJson: '{ "invoiceId" : "inv_481" }' })]);
        expect(first.deduplicated).toBe(false);
        expect(again.deduplicated).toBe(true);
        expect(again.job).toEqual(first.job);
        expect(await kinds(first.job.id)).toEqual(["submitted:->queued"]);
      });

      it("treats payload objects with reordered keys as the same request", async () => {
        await store.submit([newJob({ idempotencyKey: "k", payloadJson: '{"a":1,"b":[1,{"c":2,"d":3}]}' })]);
        const [again] = await store.submit([newJob({ idempotencyKey: "k", payloadJson: '{"b":[1,{"d":3,"c":2}],"a":1}' })]);
        expect(again.deduplicated).toBe(true);
      });

      it("refuses a different request under the same key with IDEMPOTENCY_MISMATCH", async () => {
        await store.submit([newJob({ idempotencyKey: "inv_481-v1" })]);
        for (const changed of [
          { payloadJson: '{"invoiceId":"inv_482"}' },
          { priority: 5 },
          { maxAttempts: 4 },
          { task: "invoice.void" },
          { retryBaseDelayMs: 1000 },
          { schedule: { delayMs: 1000 } },
        ] satisfies Partial<NewJob>[]) {
          const err = await refusal(store.submit([newJob({ idempotencyKey: "inv_481-v1", ...changed })]));
          expect(err.reason).toBe("IDEMPOTENCY_MISMATCH");
        }
      });

      it("scopes idempotency keys to a queue", async () => {
        const [a] = await store.submit([newJob({ idempotencyKey: "same" })]);
        const [b] = await store.submit([newJob({ idempotencyKey: "same", queue: "emails" })]);
        expect(b.deduplicated).toBe(false);
        expect(b.job.id).not.toBe(a.job.id);
      });

      it("creates a batch in request order, deduplicating repeats inside it", async () => {
        const outcomes = await store.submit([
          newJob({ task: "a" }),
          newJob({ task: "b", idempotencyKey: "k1" }),
          newJob({ task: "b", idempotencyKey: "k1" }),
        ]);
        expect(outcomes.map((o) => [o.job.task, o.deduplicated])).toEqual([
          ["a", false],
          ["b", false],
          ["b", true],
        ]);
        expect(outcomes[2].job.id).toBe(outcomes[1].job.id);
      });

      it("creates nothing of a batch when one job is refused", async () => {
        await store.submit([newJob({ idempotencyKey: "taken" })]);
        const before = await store.listJobs({ limit: 100 });
        const err = await refusal(store.submit([newJob({ task: "first" }), newJob({ idempotencyKey: "taken", priority: 9 })]));
        expect(err.reason).toBe("IDEMPOTENCY_MISMATCH");
        expect(await store.listJobs({ limit: 100 })).toEqual(before);
        const counts = await store.queueCounts();
        expect(counts.find((c) => c.queue === "billing")?.counts.queued).toBe(1);
      });
    });

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
        const claim = (maxJobs: number, queue = "billing") =>
          store.claimOutcome({ queue, workerId: "w", leaseDurationMs: MINUTE, maxJobs });
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

      it("refuses unknown ids with JOB_NOT_FOUND", async () => {
        const id = "01890000-0000-7000-8000-000000000000";
        expect((await refusal(store.redrive(id))).reason).toBe("JOB_NOT_FOUND");
        expect((await refusal(store.cancel(id, ""))).reason).toBe("JOB_NOT_FOUND");
        expect((await refusal(store.heartbeat(id, "t"))).reason).toBe("JOB_NOT_FOUND");
        expect(await store.getJob(id)).toBeUndefined();
        expect(await store.listJobEvents(id)).toEqual([]);
      });
    });

    // docs/api.md "Queue controls": PauseQueue, ResumeQueue, RedriveAll, PurgeQueue.
    describe("queue controls", () => {
      const claimAll = (queue = "billing", workerId = "w") =>
        claimLeases(store, { queue, workerId, leaseDurationMs: MINUTE, maxJobs: 100 });

      /** `n` dead jobs of `task` in `queue` (submitted, claimed, failed permanently), oldest first. */
      async function deadJobs(n: number, queue = "billing", task = "invoice.generate"): Promise<string[]> {
        const outcomes = await store.submit(Array.from({ length: n }, () => newJob({ queue, task, maxAttempts: 1 })));
        const leases = await claimAll(queue);
        expect(leases).toHaveLength(n);
        await Promise.all(leases.map((l) => store.fail(l.job.id, l.leaseToken, { error: "boom", permanent: true })));
        return outcomes.map((o) => o.job.id);
      }

      /** The store with every bulkTransition call recorded (and `after` run after each). */
      function recordingBatches(after?: (spec: BulkBatchSpec) => Promise<void>) {
        const batches: Array<{ spec: BulkBatchSpec; moved: number }> = [];
        const recording = new Proxy(store, {
          get(target, prop, receiver) {
            if (prop !== "bulkTransition") {
              const value = Reflect.get(target, prop, receiver);
              return typeof value === "function" ? value.bind(target) : value;
            }
            return async (spec: BulkBatchSpec) => {
              const outcome = await target.bulkTransition(spec);
              batches.push({ spec, moved: outcome.moved });
              await after?.(spec);
              return outcome;
            };
          },
        });
        return { store: recording, batches };
      }

      async function states(ids: string[]) {
        return Promise.all(ids.map(async (id) => (await store.getJob(id))!.state));
      }

      it("hands out no lease of a paused queue, keeps accepting submits, and leases again once resumed", async () => {
        expect(await store.pauseQueue("billing")).toBe(true);
        expect(await store.pauseQueue("billing")).toBe(false);
        const job = await submitOne();
        await submitOne({ queue: "emails" });
        expect(await claimAll()).toEqual([]);
        expect(await claimAll("emails")).toHaveLength(1);
        expect((await store.getJob(job.id))!.state).toBe("queued");
        expect(await store.resumeQueue("billing")).toBe(true);
        expect(await store.resumeQueue("billing")).toBe(false);
        expect((await claimOne()).job.id).toBe(job.id);
      });

      it("lets leases already out finish, and recovers expired ones into RETRY without leasing them", async () => {
        await store.submit([newJob({ task: "a" }), newJob({ task: "b" })]);
        const [a, b] = await claimAll();
        await store.pauseQueue("billing");
        expect((await store.heartbeat(a.job.id, a.leaseToken)).state).toBe("running");
        expect((await store.complete(a.job.id, a.leaseToken, null)).state).toBe("completed");
        clock.advance(2 * MINUTE);
        expect(await claimAll()).toEqual([]);
        expect(await store.recoverExpiredLeases()).toBe(0); // the claim recovered it already
        expect((await store.getJob(b.job.id))!.state).toBe("retry");
        expect(await claimAll()).toEqual([]);
        await store.resumeQueue("billing");
        expect((await claimOne()).job).toMatchObject({ id: b.job.id, attempts: 2 });
      });

      it("lists a paused queue even without jobs, marks paused queues, and orders the list by queue", async () => {
        await submitOne({ queue: "emails" });
        await store.pauseQueue("zeta");
        await store.pauseQueue("alpha");
        await store.pauseQueue("emails");
        const counts = await store.queueCounts();
        expect(counts.map((q) => [q.queue, q.paused])).toEqual([
          ["alpha", true],
          ["emails", true],
          ["zeta", true],
        ]);
        expect(counts[0]).toEqual({
          queue: "alpha",
          counts: { queued: 0, running: 0, retry: 0, completed: 0, dead: 0, cancelled: 0 },
          oldestPendingSince: null,
          paused: true,
          config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND },
        });
        await store.resumeQueue("alpha");
        await store.resumeQueue("emails");
        expect((await store.queueCounts()).map((q) => [q.queue, q.paused])).toEqual([
          ["emails", false],
          ["zeta", true],
        ]);
      });

      it("announces a pause and a resume with their commit, not as job events, and nothing for no change", async () => {
        const job = await submitOne();
        const before = await store.eventBounds();
        const seen: CommittedChange[] = [];
        const off = store.onCommitted((c) => seen.push(c));
        await store.pauseQueue("billing");
        await store.pauseQueue("billing");
        await store.resumeQueue("billing");
        await store.resumeQueue("never-paused");
        off();
        expect(seen).toEqual([
          { events: [], unrecorded: [], queueControls: [{ queue: "billing", paused: true }], external: false },
          { events: [], unrecorded: [], queueControls: [{ queue: "billing", paused: false }], external: false },
        ]);
        expect(await store.eventBounds()).toEqual(before);
        expect(await kinds(job.id)).toEqual(["submitted:->queued"]);
      });

      it("redrives every dead job of a queue in batches, reporting the exact count", async () => {
        const ids = await deadJobs(7);
        const [otherQueue] = await deadJobs(1, "emails");
        await submitOne({ task: "still-queued" });
        clock.advance(MINUTE);
        const { store: recorded, batches } = recordingBatches();
        expect(await redriveAll(recorded, { queue: "billing", limit: 0 }, { batchJobs: 3 })).toBe(7);
        expect(batches.map((b) => b.moved)).toEqual([3, 3, 1]);
        expect(await states(ids)).toEqual(Array(7).fill("queued"));
        expect((await store.getJob(ids[0]))!).toMatchObject({ attempts: 0, scheduleTime: clock.now(), finishTime: null });
        expect((await kinds(ids[6])).at(-1)).toBe("redriven:dead>queued");
        expect((await store.getJob(otherQueue))!.state).toBe("dead");
        const billing = (await store.queueCounts()).find((q) => q.queue === "billing")!;
        expect(billing.counts).toMatchObject({ queued: 8, dead: 0 });
        expect(await redriveAll(store, { queue: "billing", limit: 0 })).toBe(0);
      });

      it("redrives only the given task, and at most `limit` jobs, oldest first", async () => {
        const a = await deadJobs(4, "billing", "a");
        const b = await deadJobs(3, "billing", "b");
        const c = await deadJobs(2, "billing", "a");
        const { store: recorded, batches } = recordingBatches();
        // Batches of 2 over 9 dead jobs, of which 6 are task a: every batch examines at most 2.
        expect(await redriveAll(recorded, { queue: "billing", task: "a", limit: 5 }, { batchJobs: 2 })).toBe(5);
        expect(batches.every((x) => x.spec.scan === 2 && x.moved <= 2)).toBe(true);
        expect(await states([...a, ...c])).toEqual(["queued", "queued", "queued", "queued", "queued", "dead"]);
        expect(await states(b)).toEqual(["dead", "dead", "dead"]);
        expect(await redriveAll(store, { queue: "billing", task: "a", limit: 100 })).toBe(1);
        expect(await redriveAll(store, { queue: "billing", task: "b", limit: 0 })).toBe(3);
        expect(await redriveAll(store, { queue: "billing", task: "nothing", limit: 0 })).toBe(0);
      });

      it("visits each job once and ends although jobs keep dying and arriving while it runs", async () => {
        const ids = await deadJobs(6);
        // After each batch a worker kills the jobs it just redrove again, and a new job dies.
        const { store: recorded } = recordingBatches(async () => {
          const leases = await claimAll();
          await Promise.all(leases.map((l) => store.fail(l.job.id, l.leaseToken, { error: "again", permanent: true })));
          await deadJobs(1);
        });
        expect(await redriveAll(recorded, { queue: "billing", limit: 0 }, { batchJobs: 2 })).toBe(6);
        for (const id of ids) {
          expect((await kinds(id)).filter((k) => k.startsWith("redriven"))).toHaveLength(1);
        }
      });

      it('purges every queued and retrying job as cancelled with reason "purged", in batches, and nothing else', async () => {
        const dead = await deadJobs(1);
        const retrying = await store.submit(Array.from({ length: 3 }, () => newJob({ task: "r" })));
        for (const l of await claimAll()) await store.fail(l.job.id, l.leaseToken, { error: "later", permanent: false });
        await submitOne({ task: "running" });
        const [running] = await claimAll();
        const queued = await store.submit(Array.from({ length: 5 }, () => newJob({ task: "q" })));
        await submitOne({ queue: "emails" });
        clock.advance(SECOND);
        const { store: recorded, batches } = recordingBatches();
        expect(await purgeQueue(recorded, "billing", { batchJobs: 2 })).toBe(8);
        expect(batches.map((b) => [b.spec.state, b.moved])).toEqual([
          ["queued", 2],
          ["queued", 2],
          ["queued", 1],
          ["retry", 2],
          ["retry", 1],
        ]);
        const pending = [...retrying, ...queued].map((o) => o.job.id);
        expect(await states(pending)).toEqual(Array(8).fill("cancelled"));
        const events = await store.listJobEvents(pending[0]);
        expect(events.at(-1)).toMatchObject({ kind: "cancelled", fromState: "retry", toState: "cancelled", message: "purged" });
        expect((await store.getJob(pending[0]))!.finishTime).toBe(clock.now());
        expect(await states([running.job.id, ...dead])).toEqual(["running", "dead"]);
        const counts = await store.queueCounts();
        expect(counts.find((q) => q.queue === "billing")!.counts).toMatchObject({ queued: 0, retry: 0, running: 1, dead: 1, cancelled: 8 });
        expect(counts.find((q) => q.queue === "emails")!.counts.queued).toBe(1);
        expect(await purgeQueue(store, "billing")).toBe(0);
      });

      it("stops between batches when its signal aborts, keeping the batches committed", async () => {
        const ids = await deadJobs(5);
        const abort = new AbortController();
        const { store: recorded } = recordingBatches(() => Promise.resolve(abort.abort(new Error("shutting down"))));
        await expect(redriveAll(recorded, { queue: "billing", limit: 0 }, { batchJobs: 2, signal: abort.signal })).rejects.toThrow(
          "shutting down",
        );
        expect(await states(ids)).toEqual(["queued", "queued", "dead", "dead", "dead"]);
      });

      it("purges a paused queue, and a queue without jobs reports 0", async () => {
        await store.pauseQueue("billing");
        await store.submit([newJob(), newJob()]);
        expect(await purgeQueue(store, "billing")).toBe(2);
        expect(await purgeQueue(store, "nothing-here")).toBe(0);
        expect(await redriveAll(store, { queue: "nothing-here", limit: 0 })).toBe(0);
      });
    });

    describe("queue limits", () => {
      const ALL_FIELDS: QueueConfigField[] = ["maxRunning", "rateLimit", "ratePeriodMs"];
      const limit = (s: Store, queue: string, config: Partial<QueueConfig>) =>
        s.updateQueueConfig(queue, {
          config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND, ...config },
          fields: Object.keys(config) as QueueConfigField[],
        });
      const claimUpTo = (s: Store, maxJobs: number, workerId = "w") =>
        s.claimOutcome({ queue: "billing", workerId, leaseDurationMs: HOUR, maxJobs });
      const submitMany = (n: number, queue = "billing") =>
        store.submit(Array.from({ length: n }, (_, i) => newJob({ queue, task: `t${i}` })));
      const running = async (queue = "billing") => (await store.queueCounts()).find((q) => q.queue === queue)?.counts.running ?? 0;

      it("never has more than max_running RUNNING under 32 concurrent claimers, and hands out a place again when a lease finishes", async () => {
        await submitMany(60);
        await limit(store, "billing", { maxRunning: 5 });
        const outcomes = await Promise.all(Array.from({ length: 32 }, (_, i) => claimUpTo(store, 1 + (i % 4), `w${i}`)));
        const leases = outcomes.flatMap((o) => o.leases);
        expect(leases).toHaveLength(5);
        expect(new Set(leases.map((l) => l.job.id)).size).toBe(5);
        expect(await running()).toBe(5);
        // Every claimer that came away short was told that max_running held it back.
        for (const o of outcomes) if (o.leases.length < 1) expect(o.heldBack).toEqual({ limit: "max_running" });

        await store.complete(leases[0].job.id, leases[0].leaseToken, null);
        await store.fail(leases[1].job.id, leases[1].leaseToken, { error: "later", permanent: false });
        await store.release(leases[2].job.id, leases[2].leaseToken);
        const again = await Promise.all(Array.from({ length: 32 }, (_, i) => claimUpTo(store, 2, `v${i}`)));
        expect(again.flatMap((o) => o.leases)).toHaveLength(3);
        expect(await running()).toBe(5);
      });

      it("counts an expired lease's place free once the claim recovers it", async () => {
        await submitMany(3);
        await limit(store, "billing", { maxRunning: 1 });
        const [first] = (await store.claimOutcome({ queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 3 })).leases;
        expect((await claimUpTo(store, 3)).leases).toEqual([]);
        clock.advance(MINUTE);
        const next = await claimUpTo(store, 3);
        expect(next.leases).toHaveLength(1);
        expect(next.leases[0].job.id).not.toBe(first.job.id);
        expect(next.heldBack).toEqual({ limit: "max_running" });
      });

      it("hands out at most rate_limit leases in any window of rate_period, and exactly as many as the window frees", async () => {
        await submitMany(40);
        await limit(store, "billing", { rateLimit: 3, ratePeriodMs: 10 * SECOND });
        const start = clock.now();
        const first = await claimUpTo(store, 5);
        expect(first.leases).toHaveLength(3);
        expect(first.heldBack).toEqual({ limit: "rate_limit", until: start + 10 * SECOND });
        clock.advance(10 * SECOND - 1);
        expect(await claimUpTo(store, 5)).toEqual({
          leases: [],
          heldBack: { limit: "rate_limit", until: start + 10 * SECOND },
          nextScheduleTime: null,
        });
        clock.advance(1);
        expect((await claimUpTo(store, 5)).leases).toHaveLength(3);

        // Claims at uneven steps, of uneven sizes, many at once: no window ever holds more than 3.
        const leaseTimes: number[] = Array(3).fill(start).concat(Array(3).fill(clock.now()));
        const steps = [700, 2300, 0, 4100, 1, 2899, 5000, 999, 1, 6000, 3333, 0, 4000];
        for (const [i, step] of steps.entries()) {
          clock.advance(step);
          const outcomes = await Promise.all(Array.from({ length: 1 + (i % 3) * 4 }, (_, k) => claimUpTo(store, 1 + ((i + k) % 3))));
          for (const o of outcomes) for (const _ of o.leases) leaseTimes.push(clock.now());
        }
        const busiest = Math.max(...leaseTimes.map((t) => leaseTimes.filter((u) => u >= t && u < t + 10 * SECOND).length));
        expect(busiest).toBe(3);
        expect(leaseTimes.length).toBeGreaterThan(9);
      });

      it("counts every lease handed out in the window, also those released since", async () => {
        await submitMany(4);
        await limit(store, "billing", { rateLimit: 2, ratePeriodMs: MINUTE });
        const { leases } = await claimUpTo(store, 2);
        for (const l of leases) await store.release(l.job.id, l.leaseToken);
        expect((await claimUpTo(store, 2)).leases).toEqual([]);
      });

      it("applies the tighter of the two limits, and says which one held jobs back", async () => {
        await submitMany(10);
        await limit(store, "billing", { maxRunning: 4, rateLimit: 3, ratePeriodMs: MINUTE });
        const first = await claimUpTo(store, 10);
        expect(first.leases).toHaveLength(3);
        expect(first.heldBack).toEqual({ limit: "rate_limit", until: clock.now() + MINUTE });
        clock.advance(MINUTE);
        const second = await claimUpTo(store, 10);
        expect(second.leases).toHaveLength(1);
        expect(second.heldBack).toEqual({ limit: "max_running" });
      });

      it("reports no hold when nothing eligible was left behind", async () => {
        await submitMany(2);
        await limit(store, "billing", { maxRunning: 2, rateLimit: 2, ratePeriodMs: MINUTE });
        expect(await claimUpTo(store, 5)).toMatchObject({ heldBack: null });
        expect(await claimUpTo(store, 5)).toEqual({ leases: [], heldBack: null, nextScheduleTime: null });
      });

      it("keeps a paused queue paused whatever its limits allow", async () => {
        await submitMany(2);
        await limit(store, "billing", { maxRunning: 10 });
        await store.pauseQueue("billing");
        expect(await claimUpTo(store, 2)).toEqual({ leases: [], heldBack: null, nextScheduleTime: null });
      });

      it("changes only the fields named, answers the result, and removes the queue's row once no field is set", async () => {
        expect(await limit(store, "billing", { maxRunning: 7, rateLimit: 50, ratePeriodMs: 30 * SECOND })).toEqual({
          maxRunning: 7,
          rateLimit: 50,
          ratePeriodMs: 30 * SECOND,
        });
        expect(await limit(store, "billing", { maxRunning: 2 })).toEqual({ maxRunning: 2, rateLimit: 50, ratePeriodMs: 30 * SECOND });
        expect(
          await store.updateQueueConfig("billing", { config: { maxRunning: 9, rateLimit: 9, ratePeriodMs: 9 * SECOND }, fields: [] }),
        ).toEqual({ maxRunning: 2, rateLimit: 50, ratePeriodMs: 30 * SECOND });
        await limit(store, "emails", { ratePeriodMs: 5 * SECOND });
        let counts = await store.queueCounts();
        expect(counts.map((q) => [q.queue, q.config])).toEqual([
          ["billing", { maxRunning: 2, rateLimit: 50, ratePeriodMs: 30 * SECOND }],
          ["emails", { maxRunning: 0, rateLimit: 0, ratePeriodMs: 5 * SECOND }],
        ]);
        expect(counts[0].counts.queued).toBe(0);
        await store.updateQueueConfig("billing", { config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND }, fields: ALL_FIELDS });
        await limit(store, "emails", { ratePeriodMs: SECOND });
        counts = await store.queueCounts();
        expect(counts).toEqual([]);
      });

      it("forgets the rate window when the rate limit is removed: a new limit starts from an empty window", async () => {
        await submitMany(6);
        await limit(store, "billing", { rateLimit: 2, ratePeriodMs: HOUR });
        expect((await claimUpTo(store, 6)).leases).toHaveLength(2);
        await limit(store, "billing", { rateLimit: 0 });
        expect((await claimUpTo(store, 1)).leases).toHaveLength(1);
        await limit(store, "billing", { rateLimit: 2 });
        expect((await claimUpTo(store, 6)).leases).toHaveLength(2);
      });

      it("lets no new lease out after max_running is lowered below the leases out, until enough of them finish", async () => {
        await submitMany(6);
        await limit(store, "billing", { maxRunning: 4 });
        const { leases } = await claimUpTo(store, 6);
        expect(leases).toHaveLength(4);
        await limit(store, "billing", { maxRunning: 2 });
        await store.complete(leases[0].job.id, leases[0].leaseToken, null);
        expect((await claimUpTo(store, 6)).leases).toEqual([]);
        await store.complete(leases[1].job.id, leases[1].leaseToken, null);
        await store.complete(leases[2].job.id, leases[2].leaseToken, null);
        expect((await claimUpTo(store, 6)).leases).toHaveLength(1);
      });

      it("announces a change of limits with its commit, with the queue's paused state, and nothing for no change", async () => {
        await store.pauseQueue("emails");
        const seen: CommittedChange[] = [];
        const off = store.onCommitted((c) => seen.push(c));
        await limit(store, "billing", { maxRunning: 3 });
        await limit(store, "billing", { maxRunning: 3 });
        await limit(store, "emails", { rateLimit: 10 });
        await limit(store, "billing", { maxRunning: 0 });
        off();
        expect(seen.map((c) => c.queueControls)).toEqual([
          [{ queue: "billing", paused: false, config: { maxRunning: 3, rateLimit: 0, ratePeriodMs: SECOND } }],
          [{ queue: "emails", paused: true, config: { maxRunning: 0, rateLimit: 10, ratePeriodMs: SECOND } }],
          [{ queue: "billing", paused: false, config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND } }],
        ]);
        expect(seen.every((c) => c.events.length === 0)).toBe(true);
      });

      it("keeps its limits and its rate window when the database is opened again", async () => {
        await submitMany(10);
        await limit(store, "billing", { maxRunning: 3, rateLimit: 2, ratePeriodMs: MINUTE });
        expect((await claimUpTo(store, 10)).leases).toHaveLength(2);
        await store.close();
        const reopened = await harness.openInstance();
        expect((await reopened.queueCounts()).find((q) => q.queue === "billing")!.config).toEqual({
          maxRunning: 3,
          rateLimit: 2,
          ratePeriodMs: MINUTE,
        });
        expect((await claimUpTo(reopened, 10)).leases).toEqual([]);
        clock.advance(MINUTE);
        expect((await claimUpTo(reopened, 10)).leases).toHaveLength(1);
      });
    });

    describe("reads", () => {
      it("lists jobs newest first, filtered by queue and states, page by page", async () => {
        const a = await submitOne({ task: "a" });
        const b = await submitOne({ task: "b", queue: "emails" });
        const c = await submitOne({ task: "c" });
        const d = await submitOne({ task: "d" });
        await store.cancel(c.id, "");
        expect((await store.listJobs({ limit: 10 })).map((j) => j.task)).toEqual(["d", "c", "b", "a"]);
        expect((await store.listJobs({ limit: 10, queue: "billing" })).map((j) => j.task)).toEqual(["d", "c", "a"]);
        expect((await store.listJobs({ limit: 10, states: ["cancelled"] })).map((j) => j.id)).toEqual([c.id]);
        expect((await store.listJobs({ limit: 10, queue: "billing", states: ["queued", "cancelled"] })).map((j) => j.task)).toEqual([
          "d",
          "c",
          "a",
        ]);
        const page1 = await store.listJobs({ limit: 2 });
        const page2 = await store.listJobs({ limit: 2, beforeId: page1.at(-1)!.id });
        expect([...page1, ...page2].map((j) => j.id)).toEqual([d.id, c.id, b.id, a.id]);
      });

      it("counts jobs per queue and state, and the oldest pending job", async () => {
        const t0 = clock.now();
        await submitOne();
        clock.advance(SECOND);
        await submitOne();
        await submitOne({ queue: "emails", schedule: { delayMs: HOUR } });
        const lease = await claimOne();
        await store.complete(lease.job.id, lease.leaseToken, null);
        clock.advance(SECOND);
        const counts = await store.queueCounts();
        const billing = counts.find((c) => c.queue === "billing")!;
        expect(billing.counts).toEqual({ queued: 1, running: 0, retry: 0, completed: 1, dead: 0, cancelled: 0 });
        expect(billing.oldestPendingSince).toBe(t0 + SECOND);
        const emails = counts.find((c) => c.queue === "emails")!;
        expect(emails.counts.queued).toBe(1);
        expect(emails.oldestPendingSince).toBeNull();
      });

      it("lists stored events after a sequence, filtered by queue and job", async () => {
        const a = await submitOne();
        const b = await submitOne({ queue: "emails" });
        await store.cancel(a.id, "");
        const all = await store.listEvents({ afterSequence: 0, limit: 100 });
        expect(all.map((e) => [e.jobId, e.kind])).toEqual([
          [a.id, "submitted"],
          [b.id, "submitted"],
          [a.id, "cancelled"],
        ]);
        for (let i = 1; i < all.length; i++) expect(all[i].sequence).toBeGreaterThan(all[i - 1].sequence);
        expect(await store.listEvents({ afterSequence: all[0].sequence, limit: 1 })).toEqual([all[1]]);
        expect((await store.listEvents({ afterSequence: 0, limit: 100, queue: "emails" })).map((e) => e.jobId)).toEqual([b.id]);
        expect((await store.listEvents({ afterSequence: 0, limit: 100, jobId: a.id })).length).toBe(2);
        expect(await store.eventBounds()).toEqual({ oldest: all[0].sequence, latest: all[2].sequence });
      });
    });

    describe("schedules", () => {
      const at = (iso: string) => Date.parse(iso);
      const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? ms : new Date(ms).toISOString());
      const fire = (on: Store = store) => on.fireDueSchedules(100);
      const named = async (name: string, on: Store = store) => (await on.listSchedules()).find((s) => s.name === name);
      const reportJobs = async () => (await store.listJobs({ limit: 100, queue: "reports" })).reverse();

      /** Moves the clock to the schedule's next run and fires; answers the run times submitted. */
      async function runNext(name: string, times: number): Promise<string[]> {
        const runs: string[] = [];
        for (let i = 0; i < times; i++) {
          const next = (await named(name))!.nextRunTime!;
          clock.set(next);
          const fired = await fire();
          expect(fired.map((f) => f.schedule)).toEqual([name]);
          runs.push(iso(fired[0].runTime)!);
        }
        return runs;
      }

      it("creates a schedule with its next run, lists it, and deletes it; its jobs stay", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        const created = await store.createSchedule(newSchedule());
        expect(created).toMatchObject({
          name: "nightly",
          recurrence: { cron: "0 3 * * *" },
          paused: false,
          nextRunTime: at("2026-01-02T03:00:00Z"),
          lastRunTime: null,
          createTime: clock.now(),
        });
        await store.createSchedule(newSchedule({ name: "every-5m", recurrence: { intervalMs: 5 * MINUTE } }));
        expect((await store.listSchedules()).map((s) => [s.name, iso(s.nextRunTime)])).toEqual([
          ["every-5m", "2026-01-01T10:05:00.000Z"],
          ["nightly", "2026-01-02T03:00:00.000Z"],
        ]);
        expect(await store.listSchedules()).toContainEqual(created);
        expect(await store.nextScheduleRunTime()).toBe(at("2026-01-01T10:05:00Z"));
        clock.set(at("2026-01-01T10:05:00Z"));
        const [run] = await fire();
        await store.deleteSchedule("every-5m");
        expect((await store.listSchedules()).map((s) => s.name)).toEqual(["nightly"]);
        expect((await store.getJob(run.job.id))!.state).toBe("queued");
        const refused = await refusal(store.deleteSchedule("every-5m"));
        expect(refused.reason).toBe("SCHEDULE_NOT_FOUND");
        expect(refused.message).toBe('schedule "every-5m" does not exist');
      });

      it("submits nothing before the next run, then the template once per run, with the run's key and a SCHEDULED event first", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule());
        clock.set(at("2026-01-02T02:59:59.999Z"));
        expect(await fire()).toEqual([]);
        const seen = recordAnnouncements(store);
        clock.set(at("2026-01-02T03:00:00.250Z"));
        const [run] = await fire();
        expect(run).toMatchObject({ schedule: "nightly", runTime: at("2026-01-02T03:00:00Z"), submitted: true });
        expect(run.job).toMatchObject({
          queue: "reports",
          task: "report.build",
          payloadJson: '{"kind":"daily"}',
          state: "queued",
          scheduleTime: at("2026-01-02T03:00:00Z"),
          createTime: clock.now(),
        });
        expect(await fire()).toEqual([]);
        expect((await reportJobs()).map((j) => j.id)).toEqual([run.job.id]);
        const events = await store.listJobEvents(run.job.id);
        expect(events.map((e) => [e.kind, e.fromState, e.toState, e.message])).toEqual([
          ["scheduled", null, "queued", "schedule nightly, run 2026-01-02T03:00:00.000Z"],
          ["submitted", null, "queued", null],
        ]);
        await seen.through(events[1].sequence);
        expect(seen.events().map((e) => e.kind)).toEqual(["scheduled", "submitted"]);
        seen.off();
        // The run's key is the one docs/api.md "Schedules" names: submitting it again finds the run's job.
        const [again] = await store.submit([
          { ...newJob(), queue: "reports", task: "report.build", payloadJson: '{"kind":"daily"}', maxAttempts: 3 },
        ]);
        expect(again.deduplicated).toBe(false);
        const [replay] = await store.submit([
          {
            queue: "reports",
            task: "report.build",
            payloadJson: '{"kind":"daily"}',
            priority: 0,
            maxAttempts: 3,
            retryBaseDelayMs: 15 * SECOND,
            schedule: { at: at("2026-01-02T03:00:00Z") },
            idempotencyKey: "schedule:nightly:2026-01-02T03:00:00.000Z",
          },
        ]);
        expect(replay).toEqual({ job: run.job, deduplicated: true });
        expect(await named("nightly")).toMatchObject({ lastRunTime: at("2026-01-02T03:00:00Z"), nextRunTime: at("2026-01-03T03:00:00Z") });
        expect((await store.queueCounts()).find((q) => q.queue === "reports")!.counts.queued).toBe(2);
      });

      it("counts a template's delay from the run time", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule({ template: { ...newSchedule().template, delayMs: 10 * MINUTE } }));
        clock.set(at("2026-01-02T03:00:01Z"));
        const [run] = await fire();
        expect(run.job.scheduleTime).toBe(at("2026-01-02T03:10:00Z"));
      });

      it("runs at the wall-clock times of its time zone across both daylight-saving changes", async () => {
        // America/New_York, 2026: 8 March 02:00 -> 03:00, 1 November 02:00 -> 01:00.
        clock.set(at("2026-03-06T12:00:00Z"));
        await store.createSchedule(newSchedule({ name: "at-0230", recurrence: { cron: "30 2 * * *" }, timezone: "America/New_York" }));
        expect(await runNext("at-0230", 3)).toEqual([
          "2026-03-07T07:30:00.000Z", // 02:30 EST
          "2026-03-08T07:00:00.000Z", // 02:30 is skipped by the clock change: 03:00 EDT, once
          "2026-03-09T06:30:00.000Z", // 02:30 EDT
        ]);
        clock.set(at("2026-10-31T12:00:00Z"));
        await store.createSchedule(newSchedule({ name: "at-0130", recurrence: { cron: "30 1 * * *" }, timezone: "America/New_York" }));
        await store.createSchedule(newSchedule({ name: "at-0230", paused: true }));
        expect(await runNext("at-0130", 2)).toEqual([
          "2026-11-01T05:30:00.000Z", // 01:30 EDT; 01:30 EST an hour later is not run again
          "2026-11-02T06:30:00.000Z", // 01:30 EST
        ]);
        await store.deleteSchedule("at-0130");
        clock.set(at("2026-11-01T04:45:00Z"));
        await store.createSchedule(
          newSchedule({ name: "half-hourly", recurrence: { cron: "*/30 * * * *" }, timezone: "America/New_York" }),
        );
        expect(await runNext("half-hourly", 4)).toEqual([
          "2026-11-01T05:00:00.000Z", // 01:00 EDT
          "2026-11-01T05:30:00.000Z", // 01:30 EDT
          "2026-11-01T06:00:00.000Z", // 01:00 EST: the repeated hour runs again
          "2026-11-01T06:30:00.000Z", // 01:30 EST
        ]);
        // One job per run, eligible at its run time.
        expect((await reportJobs()).map((j) => iso(j.scheduleTime))).toEqual([
          "2026-03-07T07:30:00.000Z",
          "2026-03-08T07:00:00.000Z",
          "2026-03-09T06:30:00.000Z",
          "2026-11-01T05:30:00.000Z",
          "2026-11-02T06:30:00.000Z",
          "2026-11-01T05:00:00.000Z",
          "2026-11-01T05:30:00.000Z",
          "2026-11-01T06:00:00.000Z",
          "2026-11-01T06:30:00.000Z",
        ]);
      });

      it("submits only the latest missed run after downtime, and goes on from there", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
        await store.createSchedule(newSchedule({ name: "nightly" }));
        // Down from 10:00 on the 1st to 12:30 on the 4th: 74 hourly runs and 3 nightly ones missed.
        clock.set(at("2026-01-04T12:30:00Z"));
        const fired = await fire();
        expect(fired.map((f) => [f.schedule, iso(f.runTime)])).toEqual([
          ["hourly", "2026-01-04T12:00:00.000Z"],
          ["nightly", "2026-01-04T03:00:00.000Z"],
        ]);
        expect(await reportJobs()).toHaveLength(2);
        expect((await store.listSchedules()).map((s) => [s.name, iso(s.lastRunTime), iso(s.nextRunTime)])).toEqual([
          ["hourly", "2026-01-04T12:00:00.000Z", "2026-01-04T13:00:00.000Z"],
          ["nightly", "2026-01-04T03:00:00.000Z", "2026-01-05T03:00:00.000Z"],
        ]);
        expect(await fire()).toEqual([]);
        clock.set(at("2026-01-04T13:00:00Z"));
        expect((await fire()).map((f) => iso(f.runTime))).toEqual(["2026-01-04T13:00:00.000Z"]);
      });

      it("counts an interval from the whole second it was created in", async () => {
        clock.set(at("2026-01-01T10:00:00.750Z"));
        const created = await store.createSchedule(newSchedule({ name: "every-5s", recurrence: { intervalMs: 5 * SECOND } }));
        expect(iso(created.nextRunTime)).toBe("2026-01-01T10:00:05.000Z");
      });

      it("fires at most `limit` schedules per call, earliest due first", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        for (const minutes of [3, 1, 2])
          await store.createSchedule(newSchedule({ name: `m${minutes}`, recurrence: { intervalMs: minutes * MINUTE } }));
        clock.set(at("2026-01-01T10:03:00Z"));
        expect((await store.fireDueSchedules(2)).map((f) => f.schedule)).toEqual(["m1", "m2"]);
        expect((await store.fireDueSchedules(2)).map((f) => f.schedule)).toEqual(["m3"]);
      });

      it("does not run while paused; resumed, it runs from its next time after the resume, without the missed runs", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
        const paused = await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR }, paused: true }));
        expect(paused).toMatchObject({ paused: true, nextRunTime: null });
        expect(await store.nextScheduleRunTime()).toBeNull();
        clock.set(at("2026-01-01T15:30:00Z"));
        expect(await fire()).toEqual([]);
        const resumed = await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
        expect(iso(resumed.nextRunTime)).toBe("2026-01-01T16:30:00.000Z");
        expect(await fire()).toEqual([]);
        expect(await reportJobs()).toEqual([]);
      });

      it("keeps the next run of a running schedule replaced with the same timing, and takes the new template for it", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
        clock.set(at("2026-01-01T10:40:00Z"));
        const template = { ...newSchedule().template, task: "report.build.v2", priority: 5 };
        const replaced = await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR }, template }));
        expect(replaced).toMatchObject({
          nextRunTime: at("2026-01-01T11:00:00Z"),
          createTime: at("2026-01-01T10:00:00Z"),
          updateTime: clock.now(),
        });
        // Another timing starts afresh.
        const retimed = await store.createSchedule(newSchedule({ name: "other", recurrence: { intervalMs: HOUR } }));
        clock.set(at("2026-01-01T10:50:00Z"));
        expect(
          iso((await store.createSchedule({ ...newSchedule({ name: "other" }), recurrence: { intervalMs: 2 * HOUR } })).nextRunTime),
        ).toBe("2026-01-01T12:50:00.000Z");
        expect(iso(retimed.nextRunTime)).toBe("2026-01-01T11:40:00.000Z");
        clock.set(at("2026-01-01T11:00:00Z"));
        const [run] = await fire();
        expect(run.job).toMatchObject({ task: "report.build.v2", priority: 5 });
      });

      it("does not submit a run whose key already names a job, and still moves the schedule on", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule());
        // As if another server had submitted this run already (with another template even).
        const [first] = await store.submit([
          newJob({ queue: "reports", task: "other", idempotencyKey: "schedule:nightly:2026-01-02T03:00:00.000Z" }),
        ]);
        clock.set(at("2026-01-02T03:00:00Z"));
        const [run] = await fire();
        expect(run).toEqual({ schedule: "nightly", runTime: at("2026-01-02T03:00:00Z"), job: first.job, submitted: false });
        expect((await reportJobs()).map((j) => j.id)).toEqual([first.job.id]);
        expect(await kinds(first.job.id)).toEqual(["submitted:->queued"]);
        expect(await named("nightly")).toMatchObject({ lastRunTime: at("2026-01-02T03:00:00Z"), nextRunTime: at("2026-01-03T03:00:00Z") });
      });

      it("submits each run once when two store instances on one database fire the same schedules", async () => {
        const other = await harness.openInstance();
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule({ name: "every-minute", recurrence: { cron: "* * * * *" } }));
        await other.createSchedule(newSchedule({ name: "every-90s", recurrence: { intervalMs: 90 * SECOND } }));
        const submitted: string[] = [];
        for (let minute = 1; minute <= 5; minute++) {
          clock.set(at("2026-01-01T10:00:00Z") + minute * MINUTE);
          const fired = (await Promise.all([fire(store), fire(other), fire(store), fire(other)])).flat();
          for (const f of fired) if (f.submitted) submitted.push(`${f.schedule} ${iso(f.runTime)}`);
        }
        expect(submitted.sort()).toEqual([
          "every-90s 2026-01-01T10:01:30.000Z",
          "every-90s 2026-01-01T10:03:00.000Z",
          "every-90s 2026-01-01T10:04:30.000Z",
          "every-minute 2026-01-01T10:01:00.000Z",
          "every-minute 2026-01-01T10:02:00.000Z",
          "every-minute 2026-01-01T10:03:00.000Z",
          "every-minute 2026-01-01T10:04:00.000Z",
          "every-minute 2026-01-01T10:05:00.000Z",
        ]);
        const jobs = await reportJobs();
        expect(jobs).toHaveLength(8);
        const scheduled = (await store.listEvents({ afterSequence: 0, limit: 1000, queue: "reports" })).filter(
          (e) => e.kind === "scheduled",
        );
        expect(scheduled).toHaveLength(8);
      });

      it("keeps schedules in the database: an instance opened later lists and fires them", async () => {
        clock.set(at("2026-01-01T10:00:00Z"));
        await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR }, timezone: "Europe/Berlin" }));
        await store.createSchedule(newSchedule({ name: "nightly", paused: true }));
        clock.set(at("2026-01-01T11:00:00Z"));
        await fire();
        const before = await store.listSchedules();
        const reopened = await harness.openInstance();
        expect(await reopened.listSchedules()).toEqual(before);
        expect(await reopened.nextScheduleRunTime()).toBe(at("2026-01-01T12:00:00Z"));
        clock.set(at("2026-01-01T12:00:00Z"));
        expect((await reopened.fireDueSchedules(10)).map((f) => [f.schedule, iso(f.runTime), f.submitted])).toEqual([
          ["hourly", "2026-01-01T12:00:00.000Z", true],
        ]);
      });
    });

    describe("commit announcements", () => {
      it("announces the events of each commit after it is durable, and nothing for a refusal", async () => {
        const seen: CommittedChange[] = [];
        const off = store.onCommitted((c) => seen.push(c));
        const job = await submitOne();
        expect(seen.flatMap((c) => c.events).map((e: JobEvent) => e.kind)).toEqual(["submitted"]);
        await refusal(store.redrive(job.id));
        expect(seen).toHaveLength(1);
        off();
        await store.cancel(job.id, "");
        expect(seen).toHaveLength(1);
      });

      it("keeps concurrent operations independent when they share a commit", async () => {
        const job = await submitOne();
        const results = await Promise.allSettled([
          store.submit([newJob({ task: "x" })]),
          store.redrive(job.id),
          store.cancel(job.id, "r"),
          store.submit([newJob({ task: "y" })]),
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
        expect((await store.getJob(job.id))!.state).toBe("cancelled");
        expect((await store.listJobs({ limit: 10 })).length).toBe(3);
      });
    });

    // Acknowledge and Work issue one store call per acknowledgement in the
    // same turn; the store must keep them independent and in order.
    describe("batched acknowledgements", () => {
      async function claimMany(n: number, leaseDurationMs = MINUTE) {
        await store.submit(Array.from({ length: n }, (_, i) => newJob({ task: `t${i}` })));
        const leases = await claimLeases(store, { queue: "billing", workerId: "worker-1", leaseDurationMs, maxJobs: n });
        expect(leases).toHaveLength(n);
        return leases;
      }

      it("applies mixed outcomes issued together, each on its own", async () => {
        const [a, b, c, d] = await claimMany(4);
        const results = await Promise.allSettled([
          store.complete(a.job.id, a.leaseToken, '{"ok":true}'),
          store.fail(b.job.id, b.leaseToken, { error: "boom", permanent: false }),
          store.heartbeat(c.job.id, c.leaseToken, 2 * MINUTE),
          store.release(d.job.id, d.leaseToken),
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
        expect((await store.getJob(a.job.id))!.state).toBe("completed");
        expect((await store.getJob(b.job.id))!.state).toBe("retry");
        expect((await store.getJob(c.job.id))!.leaseExpireTime).toBe(clock.now() + 2 * MINUTE);
        expect((await store.getJob(d.job.id))!.state).toBe("queued");
      });

      it("refuses stale and expired tokens without affecting good ones next to them", async () => {
        const [short] = await claimMany(1, SECOND);
        const [good, stale] = await (async () => {
          await store.submit([newJob({ queue: "other" }), newJob({ queue: "other" })]);
          return claimLeases(store, { queue: "other", workerId: "worker-2", leaseDurationMs: MINUTE, maxJobs: 2 });
        })();
        clock.advance(2 * SECOND);
        const results = await Promise.allSettled([
          store.complete(short.job.id, short.leaseToken, null),
          store.complete(good.job.id, good.leaseToken, null),
          store.complete(stale.job.id, "not-the-token", null),
          store.complete("01900000-0000-7000-8000-000000000000", "x", null),
        ]);
        const reasons = results.map((r) => (r.status === "rejected" ? (r.reason as QueueError).reason : "ok"));
        expect(reasons).toEqual(["LEASE_EXPIRED", "ok", "LEASE_REJECTED", "JOB_NOT_FOUND"]);
        expect((await store.getJob(good.job.id))!.state).toBe("completed");
        expect((await store.getJob(stale.job.id))!.state).toBe("running");
      });

      it("applies two acknowledgements of one job in the order they were issued", async () => {
        const [lease] = await claimMany(1);
        const results = await Promise.allSettled([
          store.heartbeat(lease.job.id, lease.leaseToken),
          store.complete(lease.job.id, lease.leaseToken, "1"),
          store.complete(lease.job.id, lease.leaseToken, "2"),
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
        expect((await store.getJob(lease.job.id))!.resultJson).toBe("1");
        expect(await kinds(lease.job.id)).toEqual([
          "submitted:->queued",
          "claimed:queued>running",
          "heartbeat:running>running",
          "completed:running>completed",
        ]);
      });

      it("commits nothing and announces nothing when every acknowledgement is refused", async () => {
        const leases = await claimMany(3);
        const seen: CommittedChange[] = [];
        const off = store.onCommitted((c) => seen.push(c));
        const results = await Promise.allSettled(leases.map((l) => store.complete(l.job.id, "wrong", null)));
        off();
        expect(results.every((r) => r.status === "rejected")).toBe(true);
        expect(seen).toHaveLength(0);
        for (const l of leases) expect((await store.getJob(l.job.id))!.state).toBe("running");
      });

      it("applies a thousand acknowledgements issued together", async () => {
        const leases = await claimMany(100);
        const calls = Array.from({ length: 1000 }, (_, i) => {
          const l = leases[i % 100];
          return i < 900 ? store.heartbeat(l.job.id, l.leaseToken) : store.complete(l.job.id, l.leaseToken, null);
        });
        const results = await Promise.allSettled(calls);
        expect(results.every((r) => r.status === "fulfilled")).toBe(true);
        expect((await store.queueCounts()).find((q) => q.queue === "billing")!.counts).toMatchObject({ running: 0, completed: 100 });
      });
    });

    describe("retention", () => {
      async function completeOne(overrides: Partial<NewJob> = {}) {
        const job = await submitOne(overrides);
        const lease = await claimLeases(store, { queue: job.queue, workerId: "worker-1", leaseDurationMs: MINUTE, maxJobs: 1 });
        return store.complete(lease[0].job.id, lease[0].leaseToken, null);
      }

      async function deadOne() {
        const job = await submitOne({ maxAttempts: 1 });
        const [lease] = await claimLeases(store, { queue: job.queue, workerId: "worker-1", leaseDurationMs: MINUTE, maxJobs: 1 });
        return store.fail(lease.job.id, lease.leaseToken, { error: "boom", permanent: true });
      }

      const sorted = (pruned: PrunedJobs[]) => [...pruned].sort((a, b) => a.queue.localeCompare(b.queue) || a.state.localeCompare(b.state));

      it("deletes completed and cancelled jobs finished before the cutoff with their events, keeping younger ones", async () => {
        const done = await completeOne();
        const cancelled = await store.cancel((await submitOne({ queue: "emails" })).id, "no longer needed");
        clock.advance(HOUR);
        const recent = await completeOne();
        const waiting = await submitOne();
        const cutoff = clock.now() - 30 * MINUTE;

        const outcome = await store.pruneJobs({ finishedBefore: { completed: cutoff, cancelled: cutoff }, limit: 100 });
        expect(sorted(outcome.pruned)).toEqual([
          { queue: "billing", state: "completed", jobs: 1 },
          { queue: "emails", state: "cancelled", jobs: 1 },
        ]);
        expect(outcome.events).toBe(3 + 2); // submitted, claimed, completed; submitted, cancelled
        expect(outcome.exhausted).toBe(true);
        for (const gone of [done, cancelled]) {
          expect(await store.getJob(gone.id)).toBeUndefined();
          expect(await store.listJobEvents(gone.id)).toEqual([]);
        }
        const remaining = await store.listEvents({ afterSequence: 0, limit: 100 });
        expect(new Set(remaining.map((e) => e.jobId))).toEqual(new Set([recent.id, waiting.id]));
        expect((await store.getJob(recent.id))!.state).toBe("completed");
        expect((await store.listJobs({ limit: 10 })).map((j) => j.id)).toEqual([waiting.id, recent.id]);
        const counts = await store.queueCounts();
        expect(counts.find((c) => c.queue === "billing")!.counts).toMatchObject({ completed: 1, queued: 1 });
        expect(counts.find((c) => c.queue === "emails")?.counts.cancelled ?? 0).toBe(0);
      });

      it("keeps a job finished exactly at the cutoff", async () => {
        const job = await completeOne();
        const outcome = await store.pruneJobs({ finishedBefore: { completed: job.finishTime! }, limit: 100 });
        expect(outcome.pruned).toEqual([]);
        expect(await store.getJob(job.id)).toBeDefined();
      });

      it("frees the idempotency key of a pruned job: the same key then creates a new job", async () => {
        const first = await completeOne({ idempotencyKey: "invoice-481" });
        const [again] = await store.submit([newJob({ idempotencyKey: "invoice-481" })]);
        expect(again).toMatchObject({ deduplicated: true, job: { id: first.id } });
        clock.advance(HOUR);
        await store.pruneJobs({ finishedBefore: { completed: clock.now() }, limit: 100 });

        // A different request is no mismatch any more: the key names nothing.
        const [fresh] = await store.submit([newJob({ idempotencyKey: "invoice-481", priority: 7 })]);
        expect(fresh.deduplicated).toBe(false);
        expect(fresh.job.id).not.toBe(first.id);
        expect(fresh.job).toMatchObject({ state: "queued", priority: 7 });
        const [replay] = await store.submit([newJob({ idempotencyKey: "invoice-481", priority: 7 })]);
        expect(replay).toMatchObject({ deduplicated: true, job: { id: fresh.job.id } });
      });

      it("keeps dead jobs unless a dead cutoff is given", async () => {
        const dead = await deadOne();
        clock.advance(HOUR);
        const keepDead = await store.pruneJobs({ finishedBefore: { completed: clock.now(), cancelled: clock.now() }, limit: 100 });
        expect(keepDead.pruned).toEqual([]);
        expect((await store.getJob(dead.id))!.state).toBe("dead");

        const outcome = await store.pruneJobs({ finishedBefore: { dead: clock.now() }, limit: 100 });
        expect(outcome.pruned).toEqual([{ queue: "billing", state: "dead", jobs: 1 }]);
        expect(await store.getJob(dead.id)).toBeUndefined();
        expect(await store.listJobEvents(dead.id)).toEqual([]);
        expect((await store.queueCounts()).find((c) => c.queue === "billing")?.counts.dead ?? 0).toBe(0);
      });

      it("never prunes a redriven job by the time it died", async () => {
        const dead = await deadOne();
        clock.advance(HOUR);
        await store.redrive(dead.id);
        const outcome = await store.pruneJobs({ finishedBefore: { dead: clock.now(), completed: clock.now() }, limit: 100 });
        expect(outcome.pruned).toEqual([]);
        expect((await store.getJob(dead.id))!.state).toBe("queued");
      });

      it("deletes at most `limit` jobs per call, oldest finished first, until exhausted", async () => {
        const finished = [];
        for (let i = 0; i < 5; i++) {
          finished.push(await completeOne({ task: `t${i}` }));
          clock.advance(SECOND);
        }
        const due = { completed: clock.now() };
        const first = await store.pruneJobs({ finishedBefore: due, limit: 2 });
        expect(first).toMatchObject({ pruned: [{ queue: "billing", state: "completed", jobs: 2 }], exhausted: false });
        expect(await store.getJob(finished[0].id)).toBeUndefined();
        expect(await store.getJob(finished[1].id)).toBeUndefined();
        expect(await store.getJob(finished[2].id)).toBeDefined();
        expect((await store.pruneJobs({ finishedBefore: due, limit: 2 })).exhausted).toBe(false);
        const last = await store.pruneJobs({ finishedBefore: due, limit: 2 });
        expect(last).toMatchObject({ pruned: [{ jobs: 1 }], exhausted: true });
        expect(await store.pruneJobs({ finishedBefore: due, limit: 2 })).toEqual({ pruned: [], events: 0, exhausted: true });
        expect((await store.queueCounts()).find((c) => c.queue === "billing")?.counts.completed ?? 0).toBe(0);
      });

      it("moves the oldest replayable sequence past every pruned event, even when a live job's events are older", async () => {
        const alive = await submitOne({ queue: "emails", task: "still-waiting" });
        const done = await completeOne();
        const doneEvents = await store.listJobEvents(done.id);
        clock.advance(HOUR);
        await store.pruneJobs({ finishedBefore: { completed: clock.now() }, limit: 100 });

        // The live job's SUBMITTED event is older than the pruned ones and is kept...
        const kept = await store.listJobEvents(alive.id);
        expect(kept.map((e) => e.kind)).toEqual(["submitted"]);
        expect(kept[0].sequence).toBeLessThan(doneEvents[0].sequence);
        // ...but the history before the last pruned event has a hole, so a replay cannot start there.
        const bounds = await store.eventBounds();
        expect(bounds).toEqual({ oldest: doneEvents.at(-1)!.sequence + 1, latest: doneEvents.at(-1)!.sequence });

        // Sequences are never reused: the next event comes after every pruned one.
        const next = await submitOne();
        const [submitted] = await store.listJobEvents(next.id);
        expect(submitted.sequence).toBeGreaterThan(doneEvents.at(-1)!.sequence);
        expect(await store.eventBounds()).toEqual({ oldest: bounds.oldest, latest: submitted.sequence });
        expect((await store.listEvents({ afterSequence: bounds.oldest - 1, limit: 10 })).map((e) => e.jobId)).toEqual([next.id]);
      });

      it("never leaves events of a job behind when it finishes while a prune runs", async () => {
        await submitOne();
        const [lease] = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
        // A cutoff in the future makes the job due the moment it completes.
        const [completed, outcome] = await Promise.all([
          store.complete(lease.job.id, lease.leaseToken, null),
          store.pruneJobs({ finishedBefore: { completed: clock.now() + HOUR }, limit: 100 }),
        ]);
        const job = await store.getJob(completed.id);
        const events = await store.listJobEvents(completed.id);
        if (job === undefined) {
          expect(events).toEqual([]);
          expect(outcome.pruned).toEqual([{ queue: "billing", state: "completed", jobs: 1 }]);
        } else {
          expect(events.map((e) => e.kind)).toEqual(["submitted", "claimed", "completed"]);
        }
        // Either way a later pass removes it completely.
        await store.pruneJobs({ finishedBefore: { completed: clock.now() + HOUR }, limit: 100 });
        expect(await store.getJob(completed.id)).toBeUndefined();
        expect(await store.listJobEvents(completed.id)).toEqual([]);
        expect(await store.listEvents({ afterSequence: 0, limit: 10 })).toEqual([]);
      });
    });

    describe("heartbeat events", () => {
      it("stores a lease's first heartbeat, then at most one a minute, while every heartbeat extends the lease", async () => {
        const job = await submitOne();
        const lease = await claimOne("billing", 30 * SECOND);
        const announced: CommittedChange[] = [];
        const off = store.onCommitted((c) => announced.push(c));
        // A heartbeat every 10 s for 130 s: stored at 10 s, 70 s and 130 s.
        for (let i = 1; i <= 13; i++) {
          clock.advance(10 * SECOND);
          const beat = await store.heartbeat(job.id, lease.leaseToken);
          expect(beat.leaseExpireTime).toBe(clock.now() + 30 * SECOND);
        }
        off();
        const events = await store.listJobEvents(job.id);
        const beats = events.filter((e) => e.kind === "heartbeat");
        expect(beats.map((e) => e.eventTime - lease.job.updateTime)).toEqual([10 * SECOND, 70 * SECOND, 130 * SECOND]);
        expect(HEARTBEAT_EVENT_INTERVAL_MS).toBe(MINUTE);
        // The others were announced as unrecorded (for counting), with no sequence.
        expect(announced.flatMap((c) => c.events).map((e) => e.sequence)).toEqual(beats.map((e) => e.sequence));
        const unrecorded = announced.flatMap((c) => c.unrecorded);
        expect(unrecorded).toHaveLength(10);
        expect(unrecorded.every((e) => e.kind === "heartbeat" && e.jobId === job.id && !("sequence" in e))).toBe(true);
      });

      it("stores the first heartbeat of every new lease", async () => {
        const job = await submitOne();
        const first = await claimOne("billing", 20 * SECOND);
        clock.advance(SECOND);
        await store.heartbeat(job.id, first.leaseToken);
        clock.advance(20 * SECOND);
        const second = await claimOne("billing", 20 * SECOND, "worker-2");
        clock.advance(SECOND);
        await store.heartbeat(job.id, second.leaseToken);
        expect(await kinds(job.id)).toEqual([
          "submitted:->queued",
          "claimed:queued>running",
          "heartbeat:running>running",
          "lease_expired:running>retry",
          "claimed:retry>running",
          "heartbeat:running>running",
        ]);
      });

      it("keeps every state transition however many heartbeats are coalesced", async () => {
        const job = await submitOne({ maxAttempts: 3, retryBaseDelayMs: 0 });
        let lease = await claimOne("billing", MINUTE);
        for (let i = 0; i < 20; i++) {
          clock.advance(SECOND);
          await store.heartbeat(job.id, lease.leaseToken);
        }
        await store.fail(job.id, lease.leaseToken, { error: "flaky", permanent: false });
        lease = await claimOne("billing", MINUTE);
        // Twenty heartbeats and the completion issued together (one commit, applied in order).
        const calls = [
          ...Array.from({ length: 20 }, () => store.heartbeat(job.id, lease.leaseToken)),
          store.complete(job.id, lease.leaseToken, '"done"'),
        ];
        const results = await Promise.allSettled(calls);
        expect(results.every((r) => r.status === "fulfilled")).toBe(true);
        expect((await store.getJob(job.id))!.state).toBe("completed");
        const timeline = await kinds(job.id);
        expect(timeline.filter((k) => !k.startsWith("heartbeat"))).toEqual([
          "submitted:->queued",
          "claimed:queued>running",
          "failed:running>retry",
          "claimed:retry>running",
          "completed:running>completed",
        ]);
        expect(timeline.filter((k) => k.startsWith("heartbeat"))).toHaveLength(2);
      });
    });

    describe("progress", () => {
      it("stores the latest progress on the job, shown by getJob and listJobs, kept by heartbeats without one", async () => {
        const submitted = await submitOne();
        expect(submitted.progressJson).toBeNull();
        const lease = await claimOne();
        clock.advance(SECOND);
        const beat = await store.heartbeat(submitted.id, lease.leaseToken, undefined, '{"done":3,"of":10}');
        expect(beat.progressJson).toBe('{"done":3,"of":10}');
        clock.advance(SECOND);
        await store.heartbeat(submitted.id, lease.leaseToken);
        expect((await store.getJob(submitted.id))!.progressJson).toBe('{"done":3,"of":10}');
        await store.heartbeat(submitted.id, lease.leaseToken, undefined, "null");
        expect((await store.getJob(submitted.id))!.progressJson).toBe("null");
        await store.heartbeat(submitted.id, lease.leaseToken, 2 * MINUTE, '"rendering"');
        const completed = await store.complete(submitted.id, lease.leaseToken, '"ok"');
        expect(completed).toMatchObject({ state: "completed", progressJson: '"rendering"' });
        expect((await store.listJobs({ limit: 10 }))[0].progressJson).toBe('"rendering"');
      });

      it("keeps no progress from a refused heartbeat", async () => {
        const submitted = await submitOne();
        const lease = await claimOne("billing", SECOND);
        expect((await refusal(store.heartbeat(submitted.id, "wrong", undefined, "1"))).reason).toBe("LEASE_REJECTED");
        clock.advance(SECOND);
        expect((await refusal(store.heartbeat(submitted.id, lease.leaseToken, undefined, "2"))).reason).toBe("LEASE_EXPIRED");
        expect((await store.getJob(submitted.id))!.progressJson).toBeNull();
        expect((await kinds(submitted.id)).some((k) => k.startsWith("progress"))).toBe(false);
      });

      it("stores a PROGRESS event at most once a second per job, announcing the rest as unrecorded", async () => {
        const submitted = await submitOne();
        const lease = await claimOne("billing", MINUTE);
        const announced = recordAnnouncements(store);
        // Progress every 250 ms for 2.5 s: stored at 250 ms, 1250 ms and 2250 ms.
        for (let i = 1; i <= 10; i++) {
          clock.advance(250);
          const beat = await store.heartbeat(submitted.id, lease.leaseToken, undefined, JSON.stringify({ step: i }));
          expect(beat.progressJson).toBe(JSON.stringify({ step: i }));
        }
        announced.off();
        expect(PROGRESS_EVENT_INTERVAL_MS).toBe(SECOND);
        const progress = (await store.listJobEvents(submitted.id)).filter((e) => e.kind === "progress");
        expect(progress.map((e) => [e.eventTime - lease.job.updateTime, e.message])).toEqual([
          [250, '{"step":1}'],
          [1250, '{"step":5}'],
          [2250, '{"step":9}'],
        ]);
        expect(progress.every((e) => e.fromState === "running" && e.toState === "running" && e.workerId === "worker-1")).toBe(true);
        expect(
          announced
            .events()
            .filter((e) => e.kind === "progress")
            .map((e) => e.sequence),
        ).toEqual(progress.map((e) => e.sequence));
        const unrecorded = announced.changes.flatMap((c) => c.unrecorded).filter((e) => e.kind === "progress");
        expect(unrecorded.map((e) => e.message)).toEqual([2, 3, 4, 6, 7, 8, 10].map((step) => JSON.stringify({ step })));
        // However many were left unrecorded, the job shows the latest.
        expect((await store.getJob(submitted.id))!.progressJson).toBe('{"step":10}');
      });

      it("holds the policy per job across leases, and a new lease sees the progress reported before", async () => {
        const submitted = await submitOne();
        let lease = await claimOne();
        await store.heartbeat(submitted.id, lease.leaseToken, undefined, '"half"');
        await store.snooze(submitted.id, lease.leaseToken, 0);
        clock.advance(500);
        lease = await claimOne();
        expect(lease.job.progressJson).toBe('"half"');
        await store.heartbeat(submitted.id, lease.leaseToken, undefined, '"more"');
        clock.advance(500);
        await store.heartbeat(submitted.id, lease.leaseToken, undefined, '"most"');
        expect((await kinds(submitted.id)).filter((k) => !k.startsWith("heartbeat"))).toEqual([
          "submitted:->queued",
          "claimed:queued>running",
          "progress:running>running",
          "snoozed:running>queued",
          "claimed:queued>running",
          "progress:running>running",
        ]);
        expect((await store.listJobEvents(submitted.id)).filter((e) => e.kind === "progress").map((e) => e.message)).toEqual([
          '"half"',
          '"most"',
        ]);
      });
    });

    describe("several instances on one database", () => {
      let other: Store;
      beforeEach(async () => {
        other = await harness.openInstance();
      });

      const stored = async () => (await store.listEvents({ afterSequence: 0, limit: 10_000 })).map((e) => e.sequence);
      const strictlyIncreasing = (xs: number[]) => xs.every((x, i) => i === 0 || x > xs[i - 1]);

      it("announces on each instance every event committed through either, once, in sequence order", async () => {
        const here = recordAnnouncements(store);
        const there = recordAnnouncements(other);
        const mine = await store.submit([newJob({ task: "a1" }), newJob({ task: "a2" })]);
        const theirs = await other.submit([newJob({ task: "b1" })]);
        // Concurrent writers on both instances.
        await Promise.all([
          ...Array.from({ length: 5 }, (_, i) => store.submit([newJob({ task: `a-${i}` })])),
          ...Array.from({ length: 5 }, (_, i) => other.submit([newJob({ task: `b-${i}`, queue: "emails" })])),
          claimLeases(store, { queue: "billing", workerId: "wa", leaseDurationMs: MINUTE, maxJobs: 3 }),
          claimLeases(other, { queue: "emails", workerId: "wb", leaseDurationMs: MINUTE, maxJobs: 2 }),
        ]);
        const { latest } = await store.eventBounds();
        await Promise.all([here.through(latest), there.through(latest)]);
        const all = await stored();
        expect(all.at(-1)).toBe(latest);
        for (const seen of [here, there]) {
          expect(strictlyIncreasing(seen.sequences())).toBe(true);
          expect(seen.sequences()).toEqual(all);
        }
        // Each instance marks what came through the other one.
        const origin = (seen: typeof here, jobId: string) => seen.events().find((e) => e.jobId === jobId)!.external;
        expect(origin(here, mine[0].job.id)).toBe(false);
        expect(origin(here, theirs[0].job.id)).toBe(true);
        expect(origin(there, mine[0].job.id)).toBe(true);
        expect(origin(there, theirs[0].job.id)).toBe(false);
        here.off();
        there.off();
      });

      it("announces another instance's commit before its own next one", async () => {
        const here = recordAnnouncements(store);
        const [theirs] = await other.submit([newJob({ task: "first, elsewhere" })]);
        const [mine] = await store.submit([newJob({ task: "then here" })]);
        const [ownEvent] = await store.listJobEvents(mine.job.id);
        await here.through(ownEvent.sequence);
        expect(here.events().map((e) => [e.jobId, e.external])).toEqual([
          [theirs.job.id, true],
          [mine.job.id, false],
        ]);
        here.off();
      });

      it("tells the instance that handed out a lease when it is completed through another", async () => {
        const job = await submitOne();
        const lease = await claimOne();
        const here = recordAnnouncements(store);
        await other.complete(job.id, lease.leaseToken, '"done elsewhere"');
        await here.until(() => here.events().some((e) => e.kind === "completed"));
        expect(here.events()).toMatchObject([{ jobId: job.id, kind: "completed", toState: "completed", external: true }]);
        here.off();
      });

      it("announces only what is committed: a listener finds each event stored on its own instance", async () => {
        const checks: Array<Promise<boolean>> = [];
        const off = store.onCommitted(({ events }) => {
          for (const e of events) checks.push(store.listJobEvents(e.jobId).then((list) => list.some((x) => x.sequence === e.sequence)));
        });
        const here = recordAnnouncements(store);
        const job = (await other.submit([newJob()]))[0].job;
        const lease = (await claimLeases(other, { queue: "billing", workerId: "wb", leaseDurationMs: MINUTE, maxJobs: 1 }))[0];
        await store.fail(job.id, lease.leaseToken, { error: "flaky", permanent: false });
        await here.through((await store.eventBounds()).latest);
        expect(here.events().map((e) => [e.kind, e.external])).toEqual([
          ["submitted", true],
          ["claimed", true],
          ["failed", false],
        ]);
        expect(await Promise.all(checks)).toEqual([true, true, true]);
        off();
        here.off();
      });

      it("announces queue controls made through another instance", async () => {
        const here = recordAnnouncements(store);
        const controls = () => here.changes.flatMap((c) => c.queueControls.map((q) => ({ ...q, external: c.external })));
        await other.pauseQueue("billing");
        await here.until(() => controls().length === 1);
        await other.resumeQueue("billing");
        await here.until(() => controls().length === 2);
        expect(controls()).toEqual([
          { queue: "billing", paused: true, external: true },
          { queue: "billing", paused: false, external: true },
        ]);
        // Its own pause is its own, not reported again as another's.
        await store.pauseQueue("emails");
        await other.submit([newJob({ task: "sentinel" })]);
        await here.until(() => here.events().length === 1);
        expect(controls()).toEqual([
          { queue: "billing", paused: true, external: true },
          { queue: "billing", paused: false, external: true },
          { queue: "emails", paused: true, external: false },
        ]);
        here.off();
      });

      it("keeps a queue's limits across instances: 32 claimers on two instances share max_running and one rate window", async () => {
        await store.submit(Array.from({ length: 60 }, (_, i) => newJob({ task: `t${i}` })));
        const config = { maxRunning: 6, rateLimit: 4, ratePeriodMs: MINUTE };
        await other.updateQueueConfig("billing", { config, fields: ["maxRunning", "rateLimit", "ratePeriodMs"] });
        const claimBoth = () =>
          Promise.all(
            Array.from({ length: 32 }, (_, i) =>
              claimLeases(i % 2 === 0 ? store : other, { queue: "billing", workerId: `w${i}`, leaseDurationMs: HOUR, maxJobs: 2 }),
            ),
          );
        expect((await claimBoth()).flat()).toHaveLength(4);
        clock.advance(MINUTE);
        expect((await claimBoth()).flat()).toHaveLength(2);
        expect((await store.queueCounts())[0]).toMatchObject({ counts: { running: 6 }, config });
      });

      it("announces limits changed through another instance", async () => {
        const here = recordAnnouncements(store);
        const controls = () => here.changes.flatMap((c) => c.queueControls.map((q) => ({ ...q, external: c.external })));
        await other.pauseQueue("emails");
        await other.updateQueueConfig("billing", { config: { maxRunning: 2, rateLimit: 0, ratePeriodMs: SECOND }, fields: ["maxRunning"] });
        await other.updateQueueConfig("emails", { config: { maxRunning: 0, rateLimit: 9, ratePeriodMs: SECOND }, fields: ["rateLimit"] });
        await here.until(() => controls().length === 3);
        expect(controls()).toEqual(
          expect.arrayContaining([
            { queue: "emails", paused: true, external: true },
            { queue: "billing", paused: false, config: { maxRunning: 2, rateLimit: 0, ratePeriodMs: SECOND }, external: true },
            { queue: "emails", paused: true, config: { maxRunning: 0, rateLimit: 9, ratePeriodMs: SECOND }, external: true },
          ]),
        );
        // Its own change is its own, not reported again as another's.
        await store.updateQueueConfig("billing", { config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND }, fields: ["maxRunning"] });
        await other.submit([newJob({ task: "sentinel" })]);
        await here.until(() => here.events().length === 1);
        expect(controls()).toHaveLength(4);
        expect(controls()[3]).toEqual({
          queue: "billing",
          paused: false,
          config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND },
          external: false,
        });
        here.off();
      });

      it("creates one job for one idempotency key submitted through both instances at once", async () => {
        // On PostgreSQL the two transactions race on the key's unique index:
        // the loser's batch is replayed, finds the winner's job and answers it.
        const calls = Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? store : other).submit([newJob({ idempotencyKey: "raced-key" }), newJob({ task: `bystander-${i}` })]),
        );
        const outcomes = await Promise.all(calls);
        const ids = new Set(outcomes.map(([keyed]) => keyed.job.id));
        expect(ids.size).toBe(1);
        expect(outcomes.filter(([keyed]) => !keyed.deduplicated)).toHaveLength(1);
        expect(outcomes.every(([, bystander]) => !bystander.deduplicated)).toBe(true);
        const jobs = await store.listJobs({ queue: "billing", limit: 100 });
        expect(jobs).toHaveLength(11);
      });

      it("announces schedules created, replaced or deleted through another instance", async () => {
        const here = recordAnnouncements(store);
        const told = () => here.changes.filter((c) => c.schedulesChanged === true);
        await other.createSchedule(newSchedule({ name: "elsewhere" }));
        await here.until(() => told().length >= 1);
        expect(told().every((c) => c.external)).toBe(true);
        const seen = told().length;
        await other.deleteSchedule("elsewhere");
        await here.until(() => told().length > seen);
        // Its own changes are announced too, as its own.
        const there = recordAnnouncements(other);
        await other.createSchedule(newSchedule({ name: "own" }));
        expect(there.changes.filter((c) => c.schedulesChanged === true && !c.external)).toHaveLength(1);
        here.off();
        there.off();
      });

      it("leases a job once across instances", async () => {
        await store.submit(Array.from({ length: 20 }, (_, i) => newJob({ task: `t${i}` })));
        const claims = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            claimLeases(i % 2 === 0 ? store : other, { queue: "billing", workerId: `w${i}`, leaseDurationMs: MINUTE, maxJobs: 3 }),
          ),
        );
        const ids = claims.flat().map((l) => l.job.id);
        expect(ids).toHaveLength(20);
        expect(new Set(ids).size).toBe(20);
      });
    });

    it("reports itself writable", async () => {
      await expect(store.checkWritable()).resolves.toBeUndefined();
    });
  });
}
