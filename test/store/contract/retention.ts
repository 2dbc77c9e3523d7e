/**
 * Retention: finished jobs pruned with their events before a cutoff, their
 * idempotency keys freed, dead jobs kept unless asked, and replays bounded
 * past every pruned event.
 */
import { describe, expect, it } from "vitest";
import type { NewJob } from "../../../src/domain/submission.js";
import type { PrunedJobs } from "../../../src/store/store.js";
import { claimLeases } from "../../helpers/store.js";
import { clock, HOUR, MINUTE, newJob, SECOND, store, submitOne } from "./helpers.js";

export function describeRetention(): void {
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
}
