/**
 * Submit: a new job queued with its SUBMITTED event, delays and schedule
 * times against the clock, idempotency keys within a queue, and batches
 * created whole or not at all.
 */
import { describe, expect, it } from "vitest";
import type { NewJob } from "../../../src/domain/submission.js";
import { clock, HOUR, kinds, MINUTE, newJob, refusal, SECOND, store, submitOne } from "./helpers.js";

export function describeSubmit(): void {
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
}
