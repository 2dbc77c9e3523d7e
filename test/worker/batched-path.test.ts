/**
 * The SDK takes the batched path
 * (docs/api.md "The batched path: Acknowledge and Work"): over HTTP/2 one
 * Work stream carries leases down and acknowledgements up; over Connect
 * HTTP/1.1 StreamClaims brings leases and Acknowledge carries the
 * acknowledgements. Either way acknowledgements are batched and heartbeats
 * ride in the same messages, and leases held through a broken stream stay
 * alive and are acknowledged on the next one (or by Acknowledge meanwhile).
 *
 * What the server saw is read from its /metrics (RPCs by method), what the
 * worker sent from a client interceptor that counts Work messages.
 */
import { rmSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createLeaseQueueClient, createWorker, EventKind, JobState, type Worker } from "../../src/worker/index.js";
import { durationMs } from "@bufbuild/protobuf/wkt";
import type { AcknowledgeRequest, ClaimRequest, WorkRequest, WorkResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ManualClock } from "../../src/testing/index.js";
import { moveClockWithHeartbeats } from "../helpers/lease-clock.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(options: Parameters<typeof startTestServer>[1] = {}, flags: Record<string, string> = {}): Promise<TestServer> {
  const t = await startTestServer(flags, options);
  cleanups.push(() => t.close());
  return t;
}

/** Calls the server has answered, by method, from leasequeue_rpc_duration_seconds_count (streams count once, when opened). */
async function rpcCounts(t: TestServer): Promise<Record<string, number>> {
  const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^leasequeue_rpc_duration_seconds_count\{method="(\w+)",code="\w+"\} (\d+)$/gm)) {
    counts[m[1]] = (counts[m[1]] ?? 0) + Number(m[2]);
  }
  return counts;
}

/** What the worker wrote: Work messages with their acknowledgements by kind, and Acknowledge and Claim calls likewise. */
interface Traffic {
  workMessages: Array<Record<string, number>>;
  /** The same messages, one list per Work stream opened, in the order the streams were opened. */
  workStreams: Array<Array<Record<string, number>>>;
  acknowledgeCalls: Array<Record<string, number>>;
  /** Each Claim's acknowledgements by kind, the wait it asked for (ms), and how it ended: answered, failed (e.g. aborted), or not yet. */
  claimCalls: Array<{ acks: Record<string, number>; waitMs: number; ended?: "answered" | "failed" }>;
}

function kindsOf(acks: Array<{ outcome: { case: string | undefined } }>): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const a of acks) kinds[a.outcome.case ?? "none"] = (kinds[a.outcome.case ?? "none"] ?? 0) + 1;
  return kinds;
}

function recordTraffic(): { traffic: Traffic; interceptor: Interceptor } {
  const traffic: Traffic = { workMessages: [], workStreams: [], acknowledgeCalls: [], claimCalls: [] };
  const interceptor: Interceptor = (next) => async (req) => {
    if (req.method.name === "Acknowledge") traffic.acknowledgeCalls.push(kindsOf((req.message as AcknowledgeRequest).acks));
    if (req.method.name === "Claim") {
      const claim = req.message as ClaimRequest;
      const call: Traffic["claimCalls"][number] = {
        acks: kindsOf(claim.acks),
        waitMs: claim.wait === undefined ? 0 : durationMs(claim.wait),
      };
      traffic.claimCalls.push(call);
      try {
        const res = await next(req);
        call.ended = "answered";
        return res;
      } catch (err) {
        call.ended = "failed";
        throw err;
      }
    }
    if (req.method.name !== "Work" || !req.stream) return next(req);
    const messages = req.message as AsyncIterable<WorkRequest>;
    const stream: Array<Record<string, number>> = [];
    traffic.workStreams.push(stream);
    return next({
      ...req,
      message: (async function* () {
        for await (const m of messages) {
          if (m.start === undefined) {
            traffic.workMessages.push(kindsOf(m.acks));
            stream.push(kindsOf(m.acks));
          }
          yield m;
        }
      })(),
    });
  };
  return { traffic, interceptor };
}

const sum = (rows: Array<Record<string, number>>, kind: string) => rows.reduce((n, r) => n + (r[kind] ?? 0), 0);

async function submit(t: TestServer, queue: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> {
  const res = await t.call("SubmitBatch", {
    jobs: Array.from({ length: n }, (_, i) => ({ queue, task: "t", payload: { i }, ...extra })),
    view: "JOB_VIEW_BASIC",
  });
  expect(res.status).toBe(200);
  return res.body.results.map((r: { job: { id: string } }) => r.job.id);
}

const JOBS = 200;

describe("the path the SDK takes", () => {
  it(
    "over gRPC: one Work stream carries every lease and every acknowledgement, in far fewer messages than jobs",
    { timeout: 60_000 },
    async () => {
      const t = await server();
      const { traffic, interceptor } = recordTraffic();
      const log = workerEventLog();
      const worker = createWorker({
        client: createLeaseQueueClient({ url: t.apiUrl, interceptors: [interceptor] }),
        queue: "grpc-path",
        workerId: "w-grpc",
        concurrency: 64,
        onEvent: log.onEvent,
        handler: (_job, { payload }) => ({ twice: (payload as { i: number }).i * 2 }),
      });
      cleanups.push(() => worker.close());
      await log.waitFor("connected");
      await submit(t, "grpc-path", JOBS);
      const completed = await log.waitFor("completed", JOBS);
      await worker.close();

      expect(new Set(completed.map((e) => e.job.id)).size).toBe(JOBS);
      expect(completed.every((e) => e.job.state === JobState.COMPLETED)).toBe(true);
      const calls = await rpcCounts(t);
      expect(calls).toMatchObject({ Work: 1 });
      for (const unary of ["Complete", "Fail", "Heartbeat", "Release", "Acknowledge", "StreamClaims", "Claim"])
        expect(calls[unary]).toBeUndefined();
      expect(sum(traffic.workMessages, "complete")).toBe(JOBS);
      console.log(`gRPC: ${JOBS} jobs completed in ${traffic.workMessages.length} Work messages`);
      expect(traffic.workMessages.length).toBeLessThan(JOBS / 2);
      expect(traffic.acknowledgeCalls).toEqual([]);
    },
  );

  it("over Connect HTTP/1.1: StreamClaims for leases and batched Acknowledge calls for the rest", { timeout: 60_000 }, async () => {
    const t = await server();
    const { traffic, interceptor } = recordTraffic();
    const log = workerEventLog();
    const worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl, transport: "connect", httpVersion: "1.1", interceptors: [interceptor] }),
      queue: "h1-path",
      workerId: "w-h1",
      concurrency: 64,
      onEvent: log.onEvent,
      handler: () => null,
    });
    cleanups.push(() => worker.close());
    await log.waitFor("connected");
    await submit(t, "h1-path", JOBS);
    await log.waitFor("completed", JOBS);
    await worker.close();

    const calls = await rpcCounts(t);
    expect(calls.StreamClaims).toBe(1);
    for (const unused of ["Work", "Complete", "Fail", "Heartbeat", "Release"]) expect(calls[unused]).toBeUndefined();
    expect(calls.Acknowledge).toBe(traffic.acknowledgeCalls.length);
    expect(sum(traffic.acknowledgeCalls, "complete")).toBe(JOBS);
    console.log(`Connect HTTP/1.1: ${JOBS} jobs completed with ${calls.Acknowledge} Acknowledge calls`);
    expect(calls.Acknowledge).toBeLessThan(JOBS / 2);
  });

  it("sends the heartbeats of leases held together in shared messages, and none as a Heartbeat call", { timeout: 60_000 }, async () => {
    const t = await server();
    const { traffic, interceptor } = recordTraffic();
    const log = workerEventLog();
    const release = gate();
    const HELD = 10;
    const worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl, interceptors: [interceptor] }),
      queue: "beats",
      workerId: "w-beats",
      concurrency: HELD,
      // Thirty heartbeats a lease: their timing does not decide whether the lease lives.
      leaseDuration: 10_000,
      heartbeatInterval: 100,
      onEvent: log.onEvent,
      handler: async () => {
        await release.promise;
        return null;
      },
    });
    cleanups.push(() => worker.close());
    await log.waitFor("connected");
    const ids = await submit(t, "beats", HELD);
    for (const id of ids) await log.waitFor("heartbeat", 3, (e) => e.job.id === id);
    release.open();
    await log.waitFor("completed", HELD);
    await worker.close();

    const beats = sum(traffic.workMessages, "heartbeat");
    const carriers = traffic.workMessages.filter((m) => (m.heartbeat ?? 0) > 0).length;
    console.log(`${beats} heartbeats of ${HELD} leases in ${carriers} Work messages`);
    expect(beats).toBeGreaterThanOrEqual(3 * HELD);
    expect(carriers).toBeLessThanOrEqual(beats / 2);
    const calls = await rpcCounts(t);
    expect(calls.Heartbeat).toBeUndefined();
    expect(calls.Complete).toBeUndefined();
    // The server applied every one (the metric counts them); its timeline stores a lease's
    // first heartbeat and then at most one a minute (the heartbeat policy, docs/api.md "Heartbeat events").
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    const applied = Number(/^leasequeue_transitions_total\{queue="beats",kind="heartbeat"\} (\d+)$/m.exec(metrics)?.[1]);
    expect(applied).toBeGreaterThanOrEqual(3 * HELD);
    const { events } = await t.client.listJobEvents({ jobId: ids[0] });
    expect(events.filter((e) => e.kind === EventKind.HEARTBEAT)).toHaveLength(1);
  });
});

describe('the unary path (transport "unary")', () => {
  /** A unary worker on a Connect HTTP/1.1 client that records its traffic. */
  function unaryWorker(t: TestServer, options: Partial<Parameters<typeof createWorker>[0]> & { queue: string }) {
    const { traffic, interceptor } = recordTraffic();
    const log = workerEventLog();
    const worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl, transport: "connect", httpVersion: "1.1", interceptors: [interceptor] }),
      transport: "unary",
      workerId: "w-unary",
      onEvent: log.onEvent,
      handler: () => null,
      ...options,
    });
    cleanups.push(() => worker.close());
    return { worker, traffic, log };
  }

  it("carries the acknowledgements on the next Claim: no stream, no Complete, fewer calls than jobs", { timeout: 60_000 }, async () => {
    const t = await server();
    const { worker, traffic, log } = unaryWorker(t, { queue: "unary-path", concurrency: 16 });
    await log.waitFor("connected");
    await submit(t, "unary-path", JOBS);
    const completed = await log.waitFor("completed", JOBS);
    await worker.close();

    expect(new Set(completed.map((e) => e.job.id)).size).toBe(JOBS);
    const calls = await rpcCounts(t);
    for (const unused of ["Work", "StreamClaims", "Complete", "Fail", "Heartbeat", "Release"]) expect(calls[unused]).toBeUndefined();
    const onClaims = traffic.claimCalls.reduce((n, c) => n + (c.acks.complete ?? 0), 0);
    const byAcknowledge = sum(traffic.acknowledgeCalls, "complete");
    expect(onClaims + byAcknowledge).toBe(JOBS);
    console.log(`unary: ${JOBS} jobs in ${calls.Claim} Claims (${onClaims} completes) and ${calls.Acknowledge ?? 0} Acknowledge calls`);
    // The queue had work throughout: completions rode the Claims that fetched the next jobs.
    expect(onClaims).toBeGreaterThan(JOBS / 2);
    expect(calls.Claim + (calls.Acknowledge ?? 0)).toBeLessThan(JOBS);
    // A Claim carrying acknowledgements never waits: their results come back at once.
    expect(traffic.claimCalls.filter((c) => Object.keys(c.acks).length > 0 && c.waitMs > 0)).toEqual([]);
  });

  it("does not hold an acknowledgement back while a Claim long-polls: it goes by Acknowledge at once", { timeout: 60_000 }, async () => {
    const t = await server();
    const { worker, traffic, log } = unaryWorker(t, { queue: "unary-idle", concurrency: 2 });
    await log.waitFor("connected");
    const [id] = await submit(t, "unary-idle", 1);
    await log.waitFor("lease", 1, (e) => e.job.id === id);
    // A second slot stays free, so a long-poll (CLAIM_WAIT_MS) is pending when the job completes:
    // the completion is answered while that Claim still waits, not once it has come back.
    const [done] = await log.waitFor("completed", 1, (e) => e.job.id === id);
    const pendingWhenDone = traffic.claimCalls.filter((c) => c.waitMs > 0 && c.ended === undefined);
    expect(pendingWhenDone).toHaveLength(1);
    expect((await t.client.getJob({ jobId: done.job.id })).job?.state).toBe(JobState.COMPLETED);
    expect(sum(traffic.acknowledgeCalls, "complete")).toBe(1);
    await worker.close();
  });

  it("heartbeats leases while every slot is busy, by Acknowledge, and none as a Heartbeat call", { timeout: 60_000 }, async () => {
    // The server's clock moves half a lease with each round of heartbeats it applies (test/helpers/lease-clock.ts).
    const clock = new ManualClock(Date.now());
    const t = await server({ clock, sweepIntervalMs: 100 });
    const release = gate();
    const HELD = 4;
    const LEASE_MS = 6000;
    const { worker, traffic, log } = unaryWorker(t, {
      queue: "unary-beats",
      concurrency: HELD,
      leaseDuration: LEASE_MS,
      heartbeatInterval: 200,
      handler: async () => {
        await release.promise;
        return null;
      },
    });
    await log.waitFor("connected");
    const ids = await submit(t, "unary-beats", HELD + 1);
    const held = (await log.waitFor("lease", HELD)).map((e) => e.job.id);
    const rounds = moveClockWithHeartbeats(clock, t.server.store, held, LEASE_MS / 2);
    for (const id of held) await log.waitFor("heartbeat", 10, (e) => e.job.id === id);
    // Kept alive past a lease and a half on the server's clock, by heartbeats only Acknowledge carried.
    await rounds.reached(3);
    rounds.stop();
    release.open();
    await log.waitFor("completed", HELD + 1);
    await worker.close();

    expect(log.all("lease-lost")).toEqual([]);
    expect(sum(traffic.acknowledgeCalls, "heartbeat")).toBeGreaterThanOrEqual(10 * HELD);
    const calls = await rpcCounts(t);
    expect(calls.Heartbeat).toBeUndefined();
    expect(calls.Complete).toBeUndefined();
    for (const id of ids) expect((await t.client.getJob({ jobId: id })).job).toMatchObject({ state: JobState.COMPLETED, deliveries: 1 });
  });

  it("ends a pending long-poll at close() without waiting for it", { timeout: 60_000 }, async () => {
    const t = await server();
    const { worker, traffic, log } = unaryWorker(t, { queue: "unary-close" });
    await log.waitFor("connected");
    // The long-poll is on its way (the first Claim answers at once).
    const longPoll = await until("a long-poll Claim sent", () => traffic.claimCalls.find((c) => c.waitMs > 0));
    await worker.close();
    // Cut off by close(), not answered at the end of its wait (CLAIM_WAIT_MS, with nothing to claim).
    expect(longPoll.ended).toBe("failed");
    expect(log.all("closed")).toHaveLength(1);
  });
});

/**
 * The servers' clock is a manual one that moves half a lease each time every
 * held lease has had a heartbeat applied (test/helpers/lease-clock.ts), and
 * they sweep every 100 ms: the handlers are held until it has moved a lease
 * and a half after the break, so a lease whose heartbeats were not applied
 * would show as LEASE_EXPIRED. The worker's own deadline is real time; a 6 s
 * lease leaves the break 5.6 s, which it takes on any machine.
 */
describe("held leases through a broken Work stream", () => {
  const LEASE_MS = 6000;
  const HEARTBEAT_MS = 400;
  /** Rounds of half a lease: a lease and a half. */
  const ROUNDS = 3;

  /** Holds on until the server's clock has moved ROUNDS half leases with the heartbeats of `ids` that `store` applies from now on. */
  async function extendedPastALease(t: TestServer, clock: ManualClock, ids: string[]): Promise<void> {
    const rounds = moveClockWithHeartbeats(clock, t.server.store, ids, LEASE_MS / 2);
    await rounds.reached(ROUNDS);
    rounds.stop();
  }

  async function expectCompletedOnce(t: TestServer, ids: string[]): Promise<void> {
    for (const id of ids) {
      const { job } = await t.client.getJob({ jobId: id });
      expect(job).toMatchObject({ state: JobState.COMPLETED, attempts: 1, deliveries: 1 });
      const kinds = (await t.client.listJobEvents({ jobId: id })).events.map((e) => e.kind);
      expect(kinds).not.toContain(EventKind.LEASE_EXPIRED);
      expect(kinds.at(-1)).toBe(EventKind.COMPLETED);
    }
  }

  it("keeps them alive across a server restart and acknowledges them on the new stream", { timeout: 60_000 }, async () => {
    const clock = new ManualClock(Date.now());
    const first = await startTestServer({}, { clock, sweepIntervalMs: 100 });
    cleanups.push(() => rmSync(first.dir, { recursive: true, force: true }));
    const { traffic, interceptor } = recordTraffic();
    const log = workerEventLog();
    const release = gate();
    const worker: Worker = createWorker({
      client: createLeaseQueueClient({ url: first.apiUrl, interceptors: [interceptor] }),
      queue: "restart",
      workerId: "w-restart",
      concurrency: 3,
      leaseDuration: LEASE_MS,
      heartbeatInterval: HEARTBEAT_MS,
      reconnectBackoff: { initialMs: 50, maxMs: 200 },
      onEvent: log.onEvent,
      handler: async () => {
        await release.promise;
        return { survived: true };
      },
    });
    cleanups.push(() => worker.close());
    await log.waitFor("connected");
    const ids = await submit(first, "restart", 3, { maxAttempts: 1 });
    await log.waitFor("lease", 3);

    // The server ends the stream (shutdown: unavailable) under three running handlers.
    await first.server.close();
    const acknowledgesBefore = traffic.acknowledgeCalls.length;
    const [disconnected] = await log.waitFor("disconnected");
    expect(disconnected.error.code).toBe(Code.Unavailable);
    const second = await server({ clock, sweepIntervalMs: 100 }, { port: new URL(first.apiUrl).port, db: first.config.databasePath });
    // Each lease extended past a full lease duration by the new server.
    await extendedPastALease(second, clock, ids);
    await log.waitFor("connected", 2);
    release.open();
    for (const id of ids) await log.waitFor("completed", 1, (e) => e.job.id === id);
    await worker.close();

    expect(log.all("lease-lost")).toEqual([]);
    await expectCompletedOnce(second, ids);
    // Every stream after the first was opened after the restart (attempts the new
    // server refused carry nothing). While no stream is open the worker sends its
    // heartbeats by Acknowledge (the next case), which can carry some of the rounds
    // after the restart: those count too. Each round was a heartbeat of each lease.
    const onNewStream = traffic.workStreams.slice(1).flat();
    const byAcknowledge = traffic.acknowledgeCalls.slice(acknowledgesBefore);
    expect(sum(onNewStream, "heartbeat") + sum(byAcknowledge, "heartbeat")).toBeGreaterThanOrEqual(3 * ROUNDS);
    expect(sum(onNewStream, "complete")).toBe(3);
    const calls = await rpcCounts(second);
    expect(calls.Work).toBeGreaterThanOrEqual(1);
    expect(calls.Heartbeat).toBeUndefined();
    expect(calls.Complete).toBeUndefined();
  });

  it("heartbeats and acknowledges them with Acknowledge while no Work stream can be opened", { timeout: 60_000 }, async () => {
    const clock = new ManualClock(Date.now());
    const t = await server({ clock, sweepIntervalMs: 100 });
    const { traffic, interceptor } = recordTraffic();
    let refuseWork = false;
    let breakStream: ((err: Error) => void) | undefined;
    /** Lets the test break the open Work stream and refuse new ones. */
    const outage: Interceptor = (next) => async (req) => {
      if (req.method.name !== "Work") return next(req);
      if (refuseWork) throw new ConnectError("no route to the Work stream (simulated)", Code.Unavailable);
      const res = await next(req);
      if (!res.stream) return res;
      const broken = new Promise<never>((_, reject) => (breakStream = reject));
      const it = res.message[Symbol.asyncIterator]();
      return {
        ...res,
        message: (async function* () {
          for (;;) {
            const r = await Promise.race([it.next(), broken]);
            if (r.done === true) return;
            yield r.value;
          }
        })(),
      };
    };
    const log = workerEventLog();
    const release = gate();
    const worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl, interceptors: [outage, interceptor] }),
      queue: "outage",
      workerId: "w-outage",
      concurrency: 3,
      leaseDuration: LEASE_MS,
      heartbeatInterval: HEARTBEAT_MS,
      reconnectBackoff: { initialMs: 200, maxMs: 400 },
      onEvent: log.onEvent,
      handler: async () => {
        await release.promise;
        return null;
      },
    });
    cleanups.push(() => worker.close());
    await log.waitFor("connected");
    const ids = await submit(t, "outage", 3, { maxAttempts: 1 });
    await log.waitFor("lease", 3);

    refuseWork = true;
    const before = log.events.length;
    breakStream!(new ConnectError("stream cut (simulated)", Code.Unavailable));
    await log.waitFor("disconnected", 1, (e) => log.events.indexOf(e) >= before);
    await extendedPastALease(t, clock, ids);
    release.open();
    for (const id of ids) await log.waitFor("completed", 1, (e) => e.job.id === id);
    expect(log.all("connected")).toHaveLength(1); // all of it without a stream
    await worker.close();

    expect(log.all("lease-lost")).toEqual([]);
    await expectCompletedOnce(t, ids);
    expect(sum(traffic.acknowledgeCalls, "heartbeat")).toBeGreaterThanOrEqual(3 * ROUNDS);
    expect(sum(traffic.acknowledgeCalls, "complete")).toBe(3);
    const calls = await rpcCounts(t);
    expect(calls.Heartbeat).toBeUndefined();
    expect(calls.Complete).toBeUndefined();
  });

  it("reports Completes whose answers were lost after they committed as completed, not as lost leases", { timeout: 60_000 }, async () => {
    const t = await server();
    let answersLost = 0;
    /** The first response carrying results never arrives: the stream breaks after the server committed them. */
    const loseFirstAnswers: Interceptor = (next) => async (req) => {
      const res = await next(req);
      if (!res.stream || req.method.name !== "Work" || answersLost > 0) return res;
      const messages = res.message as AsyncIterable<WorkResponse>;
      return {
        ...res,
        message: (async function* () {
          for await (const m of messages) {
            if (m.results.length > 0 && answersLost++ === 0)
              throw new ConnectError("connection reset after the commit (simulated)", Code.Unavailable);
            yield m;
          }
        })(),
      };
    };
    const log = workerEventLog();
    const release = gate();
    const worker = createWorker({
      client: createLeaseQueueClient({ url: t.apiUrl, interceptors: [loseFirstAnswers] }),
      queue: "lost-answers",
      workerId: "w-lost-answers",
      concurrency: 3,
      reconnectBackoff: { initialMs: 50, maxMs: 100 },
      onEvent: log.onEvent,
      handler: async (job) => {
        await release.promise;
        return { id: job.id };
      },
    });
    cleanups.push(() => worker.close());
    await log.waitFor("connected");
    const ids = await submit(t, "lost-answers", 3);
    await log.waitFor("lease", 3);
    release.open();
    for (const id of ids) await log.waitFor("completed", 1, (e) => e.job.id === id);
    await worker.close();

    expect(answersLost).toBeGreaterThanOrEqual(1);
    expect(log.all("lease-lost")).toEqual([]);
    // The Completes that were sent again were refused (already committed), then confirmed from the stored job.
    for (const e of log.all("completed")) expect(e.job).toMatchObject({ state: JobState.COMPLETED, deliveries: 1 });
    for (const id of ids) {
      const { job } = await t.client.getJob({ jobId: id });
      expect(job).toMatchObject({ state: JobState.COMPLETED, attempts: 1, deliveries: 1 });
    }
    expect(log.all("error").filter((e) => e.job !== undefined && ids.includes(e.job.id)).length).toBeGreaterThanOrEqual(1);
  });
});
