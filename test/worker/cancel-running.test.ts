/**
 * A job cancelled while its handler runs (docs/api.md "Cancelling a running
 * job"), in the worker SDK over both streams: the Work stream (gRPC) and
 * StreamClaims plus Acknowledge (Connect JSON over HTTP/1.1). The handler's
 * signal is aborted with a JobCancelledError, a "cancelled" event is
 * reported, nothing is acknowledged for the job whatever the handler
 * returns, and the slot serves the next job.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLeaseQueueClient, createWorker, JobCancelledError, jsonToValue, JobState, type Worker } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { WORKER_TRANSPORTS } from "../helpers/worker-transports.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

describe.each(WORKER_TRANSPORTS)("over %s", (name, options) => {
  const queue = `cancel-${name.replace(/[^A-Za-z0-9]/g, "")}`;
  let worker: Worker | undefined;
  afterAll(async () => {
    await worker?.close();
  });

  it("aborts the handler with a JobCancelledError, reports it, acknowledges nothing, and runs the next job", async () => {
    const log = workerEventLog();
    const aborted = gate<unknown>();
    const client = createLeaseQueueClient({ url: t.apiUrl, ...options });
    worker = createWorker({
      client,
      queue,
      workerId: "w-cancel",
      concurrency: 1,
      onEvent: log.onEvent,
      async handler(job, ctx) {
        if (job.task === "next") return "next ran";
        // Runs until the job is cancelled, then returns a result the SDK must not send.
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        aborted.open(ctx.signal.reason);
        return "must not be sent";
      },
    });
    const { job } = await client.submit({ queue, task: "hold", payload: jsonToValue(null) });
    await log.waitFor("lease", 1, (e) => e.job.id === job!.id);
    await client.cancel({ jobId: job!.id, reason: "stop", includeRunning: true });
    const reason = await aborted.promise;
    expect(reason).toBeInstanceOf(JobCancelledError);
    expect((reason as JobCancelledError).jobId).toBe(job!.id);
    await log.waitFor("cancelled", 1, (e) => e.job.id === job!.id);
    // The single slot serves the next job.
    const { job: next } = await client.submit({ queue, task: "next" });
    await log.waitFor("completed", 1, (e) => e.job.id === next!.id);
    const outcomes = log.events.filter(
      (e) => "job" in e && e.job?.id === job!.id && ["completed", "failed", "lease-lost", "snoozed", "released", "error"].includes(e.type),
    );
    expect(outcomes).toEqual([]);
    expect((await client.getJob({ jobId: job!.id })).job?.state).toBe(JobState.CANCELLED);
  });
});
