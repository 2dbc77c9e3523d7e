/**
 * The worker SDK's spans (docs/writing-a-worker.md "Tracing"), through the
 * `tracer` option and an in-memory exporter: each attempt's CONSUMER span is
 * a child of the job's trace context, or with `link: true` the root of a
 * new trace linked to it; a failed attempt's span is an error; a job
 * without context gets a root span; a tracer that throws costs the span,
 * not the job.
 */
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createWorker, JobState, PermanentJobError, type WorkerTracingOptions } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { workerEventLog } from "../helpers/worker-events.js";

const PRODUCER = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
const traceContext = { traceparent: `00-${PRODUCER.traceId}-${PRODUCER.spanId}-01`, tracestate: "congo=t61rcWkgMzE" };

let t: TestServer;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("worker-test");

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

/** Submits one job to `queue` and runs it with a worker (handler `fail` or not); returns the attempt's span. */
async function attemptSpan(
  queue: string,
  tracing: WorkerTracingOptions,
  submit: Record<string, unknown>,
  fail = false,
): Promise<ReadableSpan> {
  const { job } = (await t.call("Submit", { queue, task: "t", ...submit })).body;
  let done!: () => void;
  const ran = new Promise<void>((r) => (done = r));
  const worker = createWorker({
    url: t.apiUrl,
    queue,
    workerId: "traced-worker",
    tracing,
    handler: () => {
      done();
      if (fail) throw new PermanentJobError("no such customer");
    },
    onEvent: () => {},
  });
  await ran;
  await worker.close();
  const spans = exporter.getFinishedSpans();
  expect(spans).toHaveLength(1);
  expect(spans[0].attributes["messaging.message.id"]).toBe(job.id);
  return spans[0];
}

describe("a worker's attempt spans", () => {
  it("opens a CONSUMER span per attempt, a child of the job's trace context, with the messaging attributes", async () => {
    const span = await attemptSpan("traced-child", { tracer }, { traceContext });
    expect(span.kind).toBe(SpanKind.CONSUMER);
    expect(span.name).toBe("process traced-child");
    expect(span.spanContext().traceId).toBe(PRODUCER.traceId);
    expect(span.parentSpanContext).toMatchObject({ traceId: PRODUCER.traceId, spanId: PRODUCER.spanId, isRemote: true });
    expect(span.spanContext().traceState?.get("congo")).toBe("t61rcWkgMzE");
    expect(span.attributes).toMatchObject({
      "messaging.system": "leasequeue",
      "messaging.destination.name": "traced-child",
      "messaging.operation.type": "process",
      "leasequeue.job.attempt": 1,
      "leasequeue.worker.id": "traced-worker",
      "leasequeue.attempt.outcome": "complete",
    });
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("with link: true starts a new trace linked to the job's context", async () => {
    const span = await attemptSpan("traced-link", { tracer, link: true }, { traceContext });
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.spanContext().traceId).not.toBe(PRODUCER.traceId);
    expect(span.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([[PRODUCER.traceId, PRODUCER.spanId]]);
  });

  it("marks a failed attempt's span as an error, with the error's text", async () => {
    const span = await attemptSpan("traced-fail", { tracer }, { traceContext }, true);
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: "no such customer" });
    expect(span.attributes).toMatchObject({ "leasequeue.attempt.outcome": "fail", "leasequeue.attempt.permanent": true });
  });

  it("starts a root span for a job without trace context", async () => {
    const span = await attemptSpan("traced-none", { tracer }, {});
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.links).toEqual([]);
  });

  it("runs and reports the attempt without a span when the tracer throws, and says so", async () => {
    const broken = {
      startSpan: () => {
        throw new Error("exporter queue full");
      },
      startActiveSpan: () => {
        throw new Error("exporter queue full");
      },
    } as unknown as WorkerTracingOptions["tracer"];
    const { job } = (await t.call("Submit", { queue: "traced-broken", task: "t", traceContext })).body;
    const log = workerEventLog();
    let ran = 0;
    const worker = createWorker({
      url: t.apiUrl,
      queue: "traced-broken",
      workerId: "traced-worker",
      tracing: { tracer: broken },
      handler: () => {
        ran++;
        return { ok: true };
      },
      onEvent: log.onEvent,
    });
    try {
      // The Complete, as the server answered it.
      const [done] = await log.waitFor("completed", 1, (e) => e.job.id === job.id);
      expect(done.job.state).toBe(JobState.COMPLETED);
    } finally {
      await worker.close();
    }
    expect(ran).toBe(1);
    expect(log.all("error").map((e) => e.error.message)).toEqual([`job ${job.id}: the attempt's span did not start: exporter queue full`]);
  }, 60_000);

  it("refuses a tracing option that is not one", () => {
    const base = { url: t.apiUrl, queue: "q", workerId: "w", handler: () => {} };
    expect(() => createWorker({ ...base, tracing: { link: "yes" as never } })).toThrow(TypeError);
    expect(() => createWorker({ ...base, tracing: { tracer: {} as never } })).toThrow(TypeError);
  });
});
