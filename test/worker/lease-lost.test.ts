/**
 * A lost lease aborts the handler's signal with a LeaseLostError, and the
 * worker then neither completes nor fails the job: whoever holds the lease
 * now owns the outcome.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/domain/clock.js";
import {
  createLeaseQueueClient,
  createWorker,
  JobState,
  LeaseLostError,
  valueToJson,
  type JobContext,
  type Worker,
} from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

const servers: TestServer[] = [];
const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
  for (const s of servers.splice(0)) await s.close();
});

async function server(options: Parameters<typeof startTestServer>[1] = {}) {
  const t = await startTestServer({}, options);
  servers.push(t);
  return t;
}

/** A handler that reports its context, then waits for its signal and reports the reason. */
function abortWatchingHandler() {
  const started = gate<JobContext>();
  const abortedWith = gate<unknown>();
  return {
    started: started.promise,
    abortedWith: abortedWith.promise,
    async handler(_job: unknown, ctx: JobContext) {
      started.open(ctx);
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      abortedWith.open(ctx.signal.reason);
      return { finishedBy: "the worker that lost its lease" };
    },
  };
}

describe("a lost lease", () => {
  it("aborts the handler when a heartbeat is refused because the job was finished elsewhere", async () => {
    const t = await server();
    const log = workerEventLog();
    const h = abortWatchingHandler();
    const worker = createWorker({
      url: t.apiUrl,
      queue: "taken",
      workerId: "w-taken",
      leaseDuration: 5000,
      heartbeatInterval: 100,
      handler: h.handler,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    const { body } = await t.call("Submit", { queue: "taken", task: "t" });
    const ctx = await h.started;
    // Someone else finishes the job with the token (an operator, a duplicate process).
    await t.client.complete({ jobId: body.job.id, leaseToken: ctx.leaseToken, result: undefined });

    const reason = await h.abortedWith;
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(reason).toMatchObject({ jobId: body.job.id, reason: "LEASE_REJECTED" });
    expect(String((reason as Error).message)).toMatch(/refused the heartbeat/);
    const [lost] = await log.waitFor("lease-lost");
    expect(lost!.job.id).toBe(body.job.id);

    // The handler's return value was dropped: no Complete, no Fail from this worker.
    await worker.close();
    expect(log.all("completed")).toEqual([]);
    expect(log.all("failed")).toEqual([]);
    const job = (await t.client.getJob({ jobId: body.job.id })).job!;
    expect(job.state).toBe(JobState.COMPLETED);
    expect(valueToJson(job.result)).toBeNull();
  });

  it("aborts the handler with LEASE_EXPIRED when the server says the lease ran out", async () => {
    const clock = new ManualClock(Date.now());
    // No background sweep during the test, so the job stays RUNNING with an expired lease.
    const t = await server({ clock, sweepIntervalMs: 3_600_000 });
    const h = abortWatchingHandler();
    const worker = createWorker({ url: t.apiUrl, queue: "expired", workerId: "w-exp", leaseDuration: 60_000, handler: h.handler });
    workers.push(worker);
    const { body } = await t.call("Submit", { queue: "expired", task: "t" });
    const ctx = await h.started;
    clock.advance(61_000); // the event loop was blocked, the laptop slept...

    const refused = await ctx.heartbeat().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(LeaseLostError);
    expect(refused).toMatchObject({ jobId: body.job.id, reason: "LEASE_EXPIRED" });
    expect(await h.abortedWith).toBe(refused);
    expect(ctx.signal.aborted).toBe(true);
  });

  it("aborts the handler when no heartbeat gets through before the lease runs out", async () => {
    const t = await server({ sweepIntervalMs: 100 });
    const log = workerEventLog();
    const h = abortWatchingHandler();
    // A network partition for Heartbeat calls only: the stream still works.
    const client = createLeaseQueueClient({
      url: t.apiUrl,
      interceptors: [
        (next) => async (req) => {
          if (req.method.name === "Heartbeat") throw new ConnectError("partitioned", Code.Unavailable);
          return next(req);
        },
      ],
    });
    const worker = createWorker({ client, queue: "cut", workerId: "w-cut", leaseDuration: 1000, handler: h.handler, onEvent: log.onEvent });
    workers.push(worker);
    const { body } = await t.call("Submit", { queue: "cut", task: "t", maxAttempts: 3 });
    await h.started;

    const reason = await h.abortedWith;
    expect(reason).toMatchObject({ name: "LeaseLostError", jobId: body.job.id, reason: "EXPIRED_LOCALLY" });
    expect(log.all("error").length).toBeGreaterThanOrEqual(1); // the failed heartbeats were reported
    expect(log.all("completed")).toEqual([]);
    // The server recovers the job on its own and the worker, still connected, gets it again.
    const leases = await log.waitFor("lease", 2);
    expect(leases[1]!.job).toMatchObject({ id: body.job.id, deliveries: 2 });
  });
});
