/**
 * The producer side in plain JSON (docs/writing-a-worker.md "A client for
 * producers and operators"): createLeaseQueueClient's Submit and SubmitBatch
 * take payloads as plain JSON, as a handler returns its result, and still a
 * Value message or its init shape as the generated client does;
 * submitAndWait answers the result as plain JSON. Over gRPC and Connect JSON.
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import {
  createLeaseQueueClient,
  createWorker,
  jsonToValue,
  submitAndWait,
  valueToJson,
  type LeaseQueueClient,
} from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { WORKER_TRANSPORTS } from "../helpers/worker-transports.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

describe.each(WORKER_TRANSPORTS)("payloads as plain JSON over %s", (name, options) => {
  const queue = `json-${name.replace(/[^A-Za-z0-9]/g, "")}`;

  it("submits plain JSON payloads, one and in a batch, and the same payload given as a Value or its init shape", async () => {
    const client = createLeaseQueueClient({ url: t.apiUrl, ...options });
    const payloads = [{ invoiceId: 42, lines: [1, 2.5, null], note: "é" }, "text", 7, true, null, [{ kind: "not a Value" }]];
    for (const payload of payloads) {
      const { job } = await client.submit({ queue, task: "t", payload });
      expect(valueToJson(job!.payload)).toEqual(payload);
    }
    const batch = await client.submitBatch({ jobs: payloads.map((payload) => ({ queue, task: "t", payload })) });
    expect(batch.results.map((r) => valueToJson(r.job!.payload))).toEqual(payloads);
    const asValue = await client.submit({ queue, task: "t", payload: jsonToValue({ a: 1 }) });
    expect(valueToJson(asValue.job!.payload)).toEqual({ a: 1 });
    const asInit = await client.submit({ queue, task: "t", payload: { kind: { case: "numberValue", value: 3 } } });
    expect(valueToJson(asInit.job!.payload)).toBe(3);
  });
});

it("submitAndWait takes a plain JSON payload and answers the handler's result as plain JSON", async () => {
  const client = createLeaseQueueClient({ url: t.apiUrl });
  const waited = submitAndWait(client, { queue: "json-wait", task: "add", payload: { a: 40, b: 2 } }, { waitMs: 600_000 });
  const worker = createWorker({
    client: createLeaseQueueClient({ url: t.apiUrl }),
    queue: "json-wait",
    workerId: "w-json",
    handler: (_job, ctx) => {
      const { a, b } = ctx.payload as { a: number; b: number };
      return { sum: a + b };
    },
  });
  try {
    expect((await waited).result).toEqual({ sum: 42 });
  } finally {
    await worker.close();
  }
});

it("keeps the generated client usable where a LeaseQueueClient is asked for", async () => {
  const generated: LeaseQueueClient = createClient(
    LeaseQueueService,
    createConnectTransport({ baseUrl: t.apiUrl, httpVersion: "1.1", useBinaryFormat: false }),
  );
  const { result } = await submitAndWait(generated, { queue: "json-generated", task: "t", payload: { x: 1 } }, { waitMs: 0 });
  expect(result).toBeNull();
  const made: LeaseQueueClient = createLeaseQueueClient({ url: t.apiUrl });
  expect((await made.getStats({})).queues.some((q) => q.queue === "json-generated")).toBe(true);
});
