/**
 * Queue controls (docs/api.md "Queue controls": PauseQueue, ResumeQueue,
 * RedriveAll, PurgeQueue): a paused queue hands out no lease, and
 * RedriveAll and PurgeQueue move a queue's jobs in batches with exact
 * counts.
 */
import { describe, expect, it } from "vitest";
import { purgeQueue, redriveAll } from "../../../src/store/writing/bulk-transitions.js";
import type { BulkBatchSpec, CommittedChange } from "../../../src/store/store.js";
import { claimLeases, NO_GROUP_RULES } from "../../helpers/store.js";
import { claimOne, clock, kinds, MINUTE, newJob, SECOND, store, submitOne } from "./helpers.js";

export function describeQueueControls(): void {
  describe("queue controls", () => {
    const claimAll = (queue = "billing", workerId = "w") => claimLeases(store, { queue, workerId, leaseDurationMs: MINUTE, maxJobs: 100 });

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
        counts: { queued: 0, running: 0, retry: 0, completed: 0, dead: 0, cancelled: 0, waiting: 0 },
        oldestPendingSince: null,
        paused: true,
        config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND, ...NO_GROUP_RULES },
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
}
