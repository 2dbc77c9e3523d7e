/**
 * One trace across the queue (docs/operations.md "Tracing"): a producer's
 * span in this process, the SERVER and PRODUCER spans of a real server
 * process exporting over OTLP to a local receiver (configured by the
 * standard OTEL_ variables alone), and the worker's CONSUMER span, also
 * from this process, share one trace id, each the child of the one before.
 * The receiver decodes what both processes export (protobuf, and JSON for
 * the server in the second case).
 */
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { context, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLeaseQueueClient, createWorker, type Job } from "../../src/worker/index.js";
import { okJson, serversInTempDirs, type SpawnedServer } from "../helpers/process.js";
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../helpers/otlp-receiver.js";

const sandbox = serversInTempDirs("tracing");
let receiver: OtlpReceiver;
let provider: BasicTracerProvider;
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // The application's own SDK: its spans (the producer's, the worker's) go to the same receiver.
  provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "shop" }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${receiver.url}/v1/traces` }))],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(contextManager.enable());
});

afterAll(async () => {
  await provider?.shutdown();
  trace.disable();
  context.disable();
  await receiver?.close();
});

afterEach(() => {
  receiver.spans.length = 0;
  receiver.contentTypes.length = 0;
});

function tracedServer(protocol: "http/protobuf" | "http/json"): Promise<SpawnedServer> {
  return sandbox.start(join(sandbox.dir(), "q.db"), [], {
    env: {
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_BSP_SCHEDULE_DELAY: "50",
    },
  });
}

/** Runs one job of `queue` with a worker in this process, and returns it as the worker got it. */
async function workOne(apiUrl: string, queue: string): Promise<Job> {
  let resolve!: (job: Job) => void;
  const worked = new Promise<Job>((r) => (resolve = r));
  const worker = createWorker({
    url: apiUrl,
    queue,
    workerId: "trace-worker",
    handler: (job) => {
      resolve(job);
      return { ok: true };
    },
    onEvent: () => {},
  });
  const job = await worked;
  await worker.close();
  return job;
}

function one(spans: ReceivedSpan[], match: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(match);
  expect(found, `${what} in ${JSON.stringify(spans.map((s) => [s.service, s.name, s.kind]))}`).toHaveLength(1);
  return found[0];
}

describe("tracing across the queue", () => {
  it("links the producer's span, the server's SERVER and PRODUCER spans and the worker's CONSUMER span into one trace", async () => {
    const server = await tracedServer("http/protobuf");
    const client = createLeaseQueueClient({ url: server.apiUrl });
    const tracer = trace.getTracer("shop");
    const checkout = tracer.startSpan("checkout");
    // The client sends the active span's context as traceparent on Submit.
    const { job } = await context.with(trace.setSpan(context.active(), checkout), () => client.submit({ queue: "traced", task: "email" }));
    checkout.end();
    const worked = await workOne(server.apiUrl, "traced");
    expect(worked.traceContext).toEqual(job!.traceContext);
    await server.stop();

    await receiver.waitFor((spans) => spans.some((s) => s.kind === SPAN_KIND.CONSUMER) && spans.some((s) => s.kind === SPAN_KIND.PRODUCER));
    const spans = receiver.spans;
    const producer = one(spans, (s) => s.name === "checkout", "the producer's span");
    const submit = one(spans, (s) => s.kind === SPAN_KIND.SERVER && s.attributes["rpc.method"] === "Submit", "Submit's SERVER span");
    const send = one(spans, (s) => s.kind === SPAN_KIND.PRODUCER, "the job's PRODUCER span");
    const process = one(spans, (s) => s.kind === SPAN_KIND.CONSUMER, "the attempt's CONSUMER span");

    expect(producer).toMatchObject({ service: "shop", parentSpanId: "" });
    for (const s of [submit, send, process]) expect(s.traceId).toBe(producer.traceId);
    expect(submit).toMatchObject({
      service: "leasequeue",
      name: "leasequeue.v1.LeaseQueueService/Submit",
      parentSpanId: producer.spanId,
      attributes: {
        "rpc.system": "grpc",
        "rpc.service": "leasequeue.v1.LeaseQueueService",
        "rpc.method": "Submit",
        "rpc.grpc.status_code": 0,
        "server.address": "127.0.0.1",
        "server.port": Number(new URL(server.apiUrl).port),
      },
    });
    expect(send).toMatchObject({
      service: "leasequeue",
      name: "send traced",
      parentSpanId: submit.spanId,
      attributes: {
        "messaging.system": "leasequeue",
        "messaging.destination.name": "traced",
        "messaging.message.id": job!.id,
        "messaging.operation.type": "send",
      },
    });
    // The job stores the PRODUCER span's context: its workers are that span's children.
    expect(job!.traceContext).toEqual({ traceparent: `00-${producer.traceId}-${send.spanId}-01` });
    expect(process).toMatchObject({
      service: "shop",
      name: "process traced",
      parentSpanId: send.spanId,
      attributes: {
        "messaging.system": "leasequeue",
        "messaging.destination.name": "traced",
        "messaging.message.id": job!.id,
        "messaging.operation.type": "process",
        "leasequeue.job.id": job!.id,
        "leasequeue.job.attempt": 1,
        "leasequeue.attempt.outcome": "complete",
      },
    });
  });

  it("exports OTLP/JSON when asked; a job's own trace_context is its PRODUCER span's parent; a schedule's run is a trace's root", async () => {
    const server = await tracedServer("http/json");
    const caller = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "shop=1" };
    const { job } = await okJson(server.apiUrl, "Submit", { queue: "explicit", task: "t", traceContext: caller });
    await okJson(server.apiUrl, "CreateSchedule", {
      schedule: { name: "every-second", interval: "1s", template: { queue: "scheduled", task: "t" } },
    });
    await receiver.waitFor((spans) =>
      spans.some((s) => s.kind === SPAN_KIND.PRODUCER && s.attributes["messaging.destination.name"] === "scheduled"),
    );
    const { jobs } = await okJson(server.apiUrl, "ListJobs", { queue: "scheduled" });
    await server.stop();

    expect(receiver.contentTypes.length).toBeGreaterThan(0);
    expect(receiver.contentTypes.every((t) => t.startsWith("application/json"))).toBe(true);
    const spans = receiver.spans;
    const send = one(
      spans,
      (s) => s.kind === SPAN_KIND.PRODUCER && s.attributes["messaging.destination.name"] === "explicit",
      "the PRODUCER span",
    );
    expect(send).toMatchObject({ traceId: "0af7651916cd43dd8448eb211c80319c", parentSpanId: "b7ad6b7169203331" });
    // Connect JSON over HTTP/1.1: the SERVER span says connect_rpc, and a successful call has no error code.
    const submit = one(spans, (s) => s.kind === SPAN_KIND.SERVER && s.attributes["rpc.method"] === "Submit", "Submit's SERVER span");
    expect(submit.attributes["rpc.system"]).toBe("connect_rpc");
    expect(submit.attributes).not.toHaveProperty("rpc.connect_rpc.error_code");
    expect(submit.parentSpanId).toBe("");
    expect(job.traceContext).toEqual({ traceparent: `00-0af7651916cd43dd8448eb211c80319c-${send.spanId}-01`, tracestate: "shop=1" });

    const runs = spans.filter((s) => s.kind === SPAN_KIND.PRODUCER && s.attributes["messaging.destination.name"] === "scheduled");
    const first = runs.find((s) => s.attributes["messaging.message.id"] === jobs.at(-1).id)!;
    expect(first).toMatchObject({ parentSpanId: "", name: "send scheduled" });
    expect(jobs.at(-1).traceContext).toEqual({ traceparent: `00-${first.traceId}-${first.spanId}-01` });
  });
});

describe("tracing at shutdown", () => {
  /** A server exporting to `endpoint` with a long exporter timeout; its stop must not wait for it. */
  async function stopWithCollectorAt(endpoint: string) {
    const server = await sandbox.start(join(sandbox.dir(), "q.db"), [], {
      env: { OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_TIMEOUT: "120000" },
    });
    // Spans to flush at shutdown: a call's SERVER span and a job's PRODUCER span, buffered for the next batch.
    await okJson(server.apiUrl, "Submit", { queue: "traced", task: "t" });
    const exit = await server.stop();
    expect(exit).toEqual({ code: 0, signal: null });
    const warned = server.lines.map((l) => JSON.parse(l)).find((l) => l.msg === "exporting the last spans failed; they are dropped");
    return warned;
  }

  it("gives a collector that never answers its share of the drain (1 s), then drops the spans and exits", { timeout: 60_000 }, async () => {
    const silent = createServer((socket) => socket.on("error", () => {}));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const warned = await stopWithCollectorAt(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`);
      expect(warned).toMatchObject({ level: "warn", error: "the collector did not take the last spans within 1000 ms" });
    } finally {
      silent.close();
    }
  });

  it("does the same when the collector's port refuses connections", { timeout: 60_000 }, async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const warned = await stopWithCollectorAt(`http://127.0.0.1:${port}`);
    expect(warned).toMatchObject({ level: "warn", error: "the collector did not take the last spans within 1000 ms" });
  });
});
