/**
 * Trace context (docs/api.md "Trace context"): a job keeps the W3C context
 * it was submitted with through every transition and read, and a schedule's
 * run carries a new trace's root only when the server asks for one.
 */
import { describe, expect, it } from "vitest";
import { TRACEPARENT } from "../../../src/domain/trace-context.js";
import { claimLeases } from "../../helpers/store.js";
import { claimOne, clock, MINUTE, newJob, newSchedule, SECOND, store, submitOne } from "./helpers.js";

const CONTEXT = {
  traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
  tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
};

export function describeTraceContext(): void {
  describe("trace context", () => {
    it("keeps the context a job was submitted with, through a lease, a retry and completion, on every read", async () => {
      const submitted = await submitOne({ traceContext: CONTEXT });
      expect(submitted.traceContext).toEqual(CONTEXT);
      const lease = await claimOne();
      expect(lease.job.traceContext).toEqual(CONTEXT);
      const failed = await store.fail(submitted.id, lease.leaseToken, { error: "boom", permanent: false, retryDelayMs: 0 });
      expect(failed).toMatchObject({ state: "retry", traceContext: CONTEXT });
      clock.advance(SECOND);
      const again = await claimOne();
      const beat = await store.heartbeat(submitted.id, again.leaseToken, MINUTE);
      expect(beat.traceContext).toEqual(CONTEXT);
      expect((await store.complete(submitted.id, again.leaseToken, null)).traceContext).toEqual(CONTEXT);
      expect((await store.getJob(submitted.id))!.traceContext).toEqual(CONTEXT);
      expect((await store.listJobs({ limit: 10 }))[0].traceContext).toEqual(CONTEXT);
    });

    it("keeps a traceparent without tracestate, and a job without context has none", async () => {
      const [alone, none] = await store.submit([
        newJob({ traceContext: { traceparent: CONTEXT.traceparent, tracestate: "" } }),
        newJob({ traceContext: null }),
      ]);
      expect(alone.job.traceContext).toEqual({ traceparent: CONTEXT.traceparent, tracestate: "" });
      expect(none.job.traceContext).toBeNull();
      const leases = await claimLeases(store, { queue: "billing", workerId: "worker-1", leaseDurationMs: MINUTE, maxJobs: 2 });
      expect(new Map(leases.map((l) => [l.job.id, l.job.traceContext]))).toEqual(
        new Map([
          [alone.job.id, { traceparent: CONTEXT.traceparent, tracestate: "" }],
          [none.job.id, null],
        ]),
      );
    });

    it("answers a repeated idempotency key with the first job's context, whatever context the repeat carries", async () => {
      const [first] = await store.submit([newJob({ idempotencyKey: "traced-1", traceContext: CONTEXT })]);
      const other = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "" };
      const [repeat] = await store.submit([newJob({ idempotencyKey: "traced-1", traceContext: other })]);
      expect(repeat).toEqual({ job: first.job, deduplicated: true });
      const [untraced] = await store.submit([newJob({ idempotencyKey: "traced-1", traceContext: null })]);
      expect(untraced.job.traceContext).toEqual(CONTEXT);
    });

    it("starts each schedule run's job on a new trace when asked, and on none otherwise", async () => {
      const created = await store.createSchedule(newSchedule({ name: "traced", recurrence: { intervalMs: MINUTE } }));
      clock.set(created.nextRunTime!);
      const [untraced] = await store.fireDueSchedules(10);
      expect(untraced.job.traceContext).toBeNull();
      clock.advance(MINUTE);
      const [first] = await store.fireDueSchedules(10, true);
      clock.advance(MINUTE);
      const [second] = await store.fireDueSchedules(10, true);
      const ids = [first, second].map((run) => {
        expect(run.submitted).toBe(true);
        expect(run.job.traceContext!.tracestate).toBe("");
        const m = TRACEPARENT.exec(run.job.traceContext!.traceparent)!;
        expect(m[1]).toBe("00");
        expect(m[4]).toBe("01");
        return m[2];
      });
      expect(new Set(ids).size).toBe(2);
      expect((await store.getJob(second.job.id))!.traceContext).toEqual(second.job.traceContext);
    });
  });
}
