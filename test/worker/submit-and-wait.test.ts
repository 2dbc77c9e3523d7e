/**
 * submitAndWait (docs/api.md "Workflows") with the SDK's own clients, gRPC
 * and Connect JSON over HTTP/1.1: a producer that submits before any worker
 * runs is answered by the job's end, with the handler's result; a job that
 * does not end in time comes back as it is, `finished: false`; a wait past
 * 15 minutes is refused before anything is sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLeaseQueueClient, createWorker, JobState, jsonToValue, submitAndWait, valueToJson } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { WORKER_TRANSPORTS } from "../helpers/worker-transports.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

describe.each(WORKER_TRANSPORTS)("submitAndWait over %s", (name, options) => {
  const queue = `saw-${name.replace(/[^A-Za-z0-9]/g, "")}`;

  it("answers with the job's end and the handler's result, the worker started after the submit", async () => {
    const client = createLeaseQueueClient({ url: t.apiUrl, ...options });
    const waited = submitAndWait(client, { queue, task: "add", payload: jsonToValue({ a: 40, b: 2 }) }, { waitMs: 600_000 });
    const worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl }),
      queue,
      workerId: "w-saw",
      handler: (job) => {
        const { a, b } = valueToJson(job.payload) as { a: number; b: number };
        return { sum: a + b };
      },
    });
    try {
      const { job, finished } = await waited;
      expect(finished).toBe(true);
      expect(job.state).toBe(JobState.COMPLETED);
      expect(valueToJson(job.result)).toEqual({ sum: 42 });
    } finally {
      await worker.close();
    }
  });

  it("answers with the job as it is, finished false, when it does not end in time", async () => {
    const client = createLeaseQueueClient({ url: t.apiUrl, ...options });
    const { job, finished } = await submitAndWait(client, { queue: `${queue}-idle`, task: "t" }, { waitMs: 0 });
    expect(finished).toBe(false);
    expect(job.state).toBe(JobState.QUEUED);
  });
});

it("refuses a wait past 15 minutes, or not a number, before submitting", async () => {
  const client = createLeaseQueueClient({ url: t.apiUrl });
  for (const waitMs of [15 * 60 * 1000 + 1, -1, Number.NaN]) {
    await expect(submitAndWait(client, { queue: "saw-refused", task: "t" }, { waitMs })).rejects.toThrow(RangeError);
  }
  const stats = await client.getStats({});
  expect(stats.queues.find((q) => q.queue === "saw-refused")).toBeUndefined();
});
