/**
 * The same worker and producer code over each transport the SDK offers:
 * gRPC (HTTP/2) and Connect over HTTP/2 (the Work stream), Connect over
 * HTTP/1.1 (StreamClaims plus Acknowledge), and unary calls only (Claim
 * carrying acknowledgements), on a client of each protocol or from a URL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createLeaseQueueClient,
  createWorker,
  jsonToValue,
  valueToJson,
  type LeaseQueueClientOptions,
  type WorkerOptions,
} from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { workerEventLog } from "../helpers/worker-events.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

/** The client's options, and the worker's `transport` ("unary": Claim carrying acknowledgements). */
const transports: Array<[string, Omit<LeaseQueueClientOptions, "url">, WorkerOptions["transport"]?]> = [
  ["gRPC", { transport: "grpc" }],
  ["Connect over HTTP/2", { transport: "connect" }],
  ["Connect over HTTP/2 (JSON)", { transport: "connect", useBinaryFormat: false }],
  ["Connect over HTTP/1.1 (JSON)", { transport: "connect", httpVersion: "1.1", useBinaryFormat: false }],
  ["unary calls on gRPC", { transport: "grpc" }, "unary"],
  ["unary calls on Connect over HTTP/1.1 (JSON)", { transport: "connect", httpVersion: "1.1", useBinaryFormat: false }, "unary"],
];

describe.each(transports)("over %s", (name, options, workerTransport) => {
  it("submits, streams claims, heartbeats and completes", async () => {
    const queue = `q-${name.replace(/[^A-Za-z0-9]/g, "")}`;
    const client = createLeaseQueueClient({ url: t.apiUrl, ...options });
    const log = workerEventLog();
    const worker = createWorker({
      client,
      transport: workerTransport,
      queue,
      workerId: "w-transport",
      concurrency: 2,
      // Heartbeats every 50 ms, and ctx.heartbeat() in each handler; a lease far longer than a slow machine's round trip.
      leaseDuration: 30_000,
      heartbeatInterval: 50,
      onEvent: log.onEvent,
      async handler(job, ctx) {
        await ctx.heartbeat();
        return { sum: (ctx.payload as { n: number }).n + 1, task: job.task };
      },
    });
    try {
      const submitted = await Promise.all([1, 2, 3].map((n) => client.submit({ queue, task: "add", payload: jsonToValue({ n }) })));
      const done = await log.waitFor("completed", 3);
      const results = new Map(done.map((e) => [e.job.id, valueToJson(e.job.result)]));
      expect(submitted.map((s) => results.get(s.job!.id))).toEqual([
        { sum: 2, task: "add" },
        { sum: 3, task: "add" },
        { sum: 4, task: "add" },
      ]);
      expect(log.all("heartbeat").length).toBeGreaterThanOrEqual(3);
    } finally {
      await worker.close();
    }
  });
});

describe('transport "unary" from a URL', () => {
  it("works a queue over plain Connect POSTs, with no stream", async () => {
    const queue = "q-unary-url";
    const log = workerEventLog();
    const worker = createWorker({
      url: t.apiUrl,
      transport: "unary",
      queue,
      workerId: "w-unary-url",
      onEvent: log.onEvent,
      handler: () => "ok",
    });
    try {
      const { job } = await t.client.submit({ queue, task: "t" });
      const [done] = await log.waitFor("completed", 1, (e) => e.job.id === job!.id);
      expect(valueToJson(done.job.result)).toBe("ok");
    } finally {
      await worker.close();
    }
  });
});
