/**
 * Reads: jobs listed newest first by queue and state, counts per queue and
 * state, and stored events after a sequence.
 */
import { describe, expect, it } from "vitest";
import { claimOne, clock, HOUR, SECOND, store, submitOne } from "./helpers.js";

export function describeReads(): void {
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
      expect((await store.listJobs({ limit: 10, states: ["queued", "cancelled", "queued"] })).map((j) => j.task)).toEqual([
        "d",
        "c",
        "b",
        "a",
      ]);
      expect((await store.listJobs({ limit: 2, queue: "billing", beforeId: d.id })).map((j) => j.task)).toEqual(["c", "a"]);
      const page1 = await store.listJobs({ limit: 2 });
      const page2 = await store.listJobs({ limit: 2, beforeId: page1.at(-1)!.id });
      expect([...page1, ...page2].map((j) => j.id)).toEqual([d.id, c.id, b.id, a.id]);
    });

    it("pages through a queue whose jobs are in every state, newest first, each job once", async () => {
      // Each listing of several states (a queue's without states is all six)
      // merges one range per state; pages must still come out in one order.
      const ids: string[] = [];
      for (let i = 0; i < 24; i++) {
        const job = await submitOne({ task: `t${i}`, maxAttempts: 1 });
        ids.push(job.id);
        if (i % 4 === 1) await store.cancel(job.id, "");
        if (i % 4 === 2) {
          const lease = await claimOne();
          await store.complete(lease.job.id, lease.leaseToken, null);
        }
        if (i % 4 === 3) await claimOne();
      }
      await submitOne({ task: "other", queue: "emails" });
      const newestFirst = [...ids].reverse();
      const stateOf = new Map<string, string>();
      for (const id of ids) stateOf.set(id, (await store.getJob(id))!.state);
      expect(new Set(stateOf.values())).toEqual(new Set(["queued", "running", "completed", "cancelled"]));
      for (const [states, expected] of [
        [undefined, newestFirst],
        [["queued", "running", "completed", "cancelled"], newestFirst],
        [["running", "cancelled", "dead"], newestFirst.filter((id) => ["running", "cancelled"].includes(stateOf.get(id)!))],
      ] as const) {
        const seen: string[] = [];
        let beforeId: string | undefined;
        for (;;) {
          const page = await store.listJobs({ limit: 5, queue: "billing", states: states && [...states], beforeId });
          seen.push(...page.map((j) => j.id));
          if (page.length < 5) break;
          beforeId = page.at(-1)!.id;
        }
        expect(seen, JSON.stringify(states)).toEqual(expected);
      }
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
      expect(billing.counts).toEqual({ queued: 1, running: 0, retry: 0, completed: 1, dead: 0, cancelled: 0, waiting: 0 });
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
}
