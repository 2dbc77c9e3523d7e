/**
 * A lost lease aborts the handler's signal with a LeaseLostError, and the
 * worker then neither completes nor fails the job: whoever holds the lease
 * now owns the outcome.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { StatusSchema } from "../../gen/ts/google/rpc/status_pb.js";
import type { AcknowledgeRequest, WorkRequest, WorkResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
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

/**
 * Answers every heartbeat `unavailable`, as a network that loses their
 * answers would: on the Work stream, the result of each AckHeartbeat (known
 * by its position: results come in the order acknowledgements were sent)
 * is replaced; an Acknowledge call carrying a heartbeat fails.
 */
const loseHeartbeatAnswers: Interceptor = (next) => async (req) => {
  if (req.method.name === "Acknowledge" && (req.message as AcknowledgeRequest).acks.some((a) => a.outcome.case === "heartbeat")) {
    throw new ConnectError("partitioned", Code.Unavailable);
  }
  if (req.method.name !== "Work" || !req.stream) return next(req);
  const sentKinds: Array<string | undefined> = [];
  const requests = req.message as AsyncIterable<WorkRequest>;
  const res = await next({
    ...req,
    message: (async function* () {
      for await (const m of requests) {
        for (const a of m.acks) sentKinds.push(a.outcome.case);
        yield m;
      }
    })(),
  });
  if (!res.stream) return res;
  const responses = res.message as AsyncIterable<WorkResponse>;
  return {
    ...res,
    message: (async function* () {
      for await (const m of responses) {
        for (const r of m.results) {
          if (sentKinds.shift() === "heartbeat") r.status = create(StatusSchema, { code: Code.Unavailable, message: "partitioned" });
        }
        yield m;
      }
    })(),
  };
};

/** A handler that reports its context, then waits for its signal and reports the reason. */
function abortWatchingHandler() {
  const started = gate<JobContext>();
  const abortedWith = gate<unknown>();
  return {
    started: started.promise,
    abortedWith: abortedWith.promise,
    handler: async (_job: unknown, ctx: JobContext) => {
      started.open(ctx);
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      abortedWith.open(ctx.signal.reason);
      return { finishedBy: "the worker that lost its lease" };
    },
  };
}

describe("a lost lease", () => {
  it("aborts the handler when a heartbeat is refused because the job was finished elsewhere", { timeout: 60_000 }, async () => {
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
    expect(lost.job.id).toBe(body.job.id);

    // The handler's return value was dropped: no Complete, no Fail from this worker.
    await worker.close();
    expect(log.all("completed")).toEqual([]);
    expect(log.all("failed")).toEqual([]);
    const job = (await t.client.getJob({ jobId: body.job.id })).job!;
    expect(job.state).toBe(JobState.COMPLETED);
    expect(valueToJson(job.result)).toBeNull();
  });

  it("aborts the handler with LEASE_EXPIRED when the server says the lease ran out", { timeout: 60_000 }, async () => {
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

  it("aborts the handler when no heartbeat gets through before the lease runs out", { timeout: 60_000 }, async () => {
    const t = await server({ sweepIntervalMs: 100 });
    const log = workerEventLog();
    const h = abortWatchingHandler();
    // Every heartbeat's answer is lost (the server extends the lease, the
    // worker never hears it), while leases and the stream itself still work:
    // the worker must give up on its own clock.
    const client = createLeaseQueueClient({ url: t.apiUrl, interceptors: [loseHeartbeatAnswers] });
    const worker = createWorker({
      client,
      queue: "cut",
      workerId: "w-cut",
      leaseDuration: 1000,
      shutdownTimeout: 200,
      handler: h.handler,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    const { body } = await t.call("Submit", { queue: "cut", task: "t", maxAttempts: 3 });
    await h.started;

    const reason = await h.abortedWith;
    expect(reason).toMatchObject({ name: "LeaseLostError", jobId: body.job.id, reason: "EXPIRED_LOCALLY" });
    expect(log.all("error").length).toBeGreaterThanOrEqual(1); // the failed heartbeats were reported
    expect(log.all("completed")).toEqual([]);
    // The server recovers the job on its own and the worker, still connected, gets it again.
    const leases = await log.waitFor("lease", 2);
    expect(leases[1].job).toMatchObject({ id: body.job.id, deliveries: 2 });
  });
});
