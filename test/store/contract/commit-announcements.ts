/**
 * Commit announcements (store.ts): the events of each commit announced once
 * it is durable, nothing for a refusal, and operations that share a commit
 * kept independent.
 */
import { describe, expect, it } from "vitest";
import type { JobEvent } from "../../../src/domain/job.js";
import type { CommittedChange } from "../../../src/store/store.js";
import { newJob, refusal, store, submitOne } from "./helpers.js";

export function describeCommitAnnouncements(): void {
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
}
