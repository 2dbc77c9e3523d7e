/**
 * A Work stream that breaks under running handlers costs the worker
 * nothing: the leases it holds are heartbeated through the break and the
 * reconnect, and completed normally afterwards. None expires, none is
 * claimed twice, none is dead-lettered.
 *
 * Two ways a stream breaks: the client side gives up on it (as when a
 * message cannot be decoded; simulated by an interceptor that throws after
 * the last lease), and the connection under it is cut (a TCP proxy that
 * destroys every socket; heartbeats in flight fail too and are retried).
 * The server's clock is a manual one that moves half a lease each time
 * every held lease has had a heartbeat applied (test/helpers/lease-clock.ts),
 * its sweeper runs every 100 ms, and the handlers are held until the clock
 * has moved a lease and a half after the break: a lease whose heartbeats were
 * not applied would show as LEASE_EXPIRED. The worker's own deadline is real
 * time; a 6 s lease gives the break and the reconnect 5.5 s, which they take
 * on any machine.
 */
import { createServer, connect, type Server, type Socket } from "node:net";
import { afterEach, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createLeaseQueueClient, createWorker, EventKind, JobState, type Worker } from "../../src/worker/index.js";
import type { WorkResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { moveClockWithHeartbeats } from "../helpers/lease-clock.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog, type WorkerEventLog } from "../helpers/worker-events.js";

const LEASE_MS = 6000;
const HEARTBEAT_MS = 500;
const JOBS = 3;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A TCP proxy in front of the API port. `block()` stops forwarding (calls
 * hang as on a dead network), `cut()` destroys every open connection, and
 * `unblock()` lets new connections through again.
 */
async function cuttableProxy(target: URL) {
  const sockets = new Set<Socket>();
  let blocked = false;
  const blockedWriters = new Set<() => void>();
  const server: Server = createServer((downstream) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [downstream, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => undefined);
    }
    downstream.on("data", (d) => {
      if (!blocked) return void upstream.write(d);
      for (const w of [...blockedWriters]) w();
    });
    upstream.on("data", (d) => {
      if (!blocked) downstream.write(d);
    });
    downstream.on("close", () => upstream.destroy());
    upstream.on("close", () => downstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    block: () => void (blocked = true),
    unblock: () => void (blocked = false),
    /** Resolves when the client next sends something that the block swallows. */
    nextSwallowedWrite: () =>
      new Promise<void>((resolve) => {
        const w = () => {
          blockedWriters.delete(w);
          resolve();
        };
        blockedWriters.add(w);
      }),
    cut() {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      return n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function startServer(): Promise<{ t: TestServer; clock: ManualClock }> {
  const clock = new ManualClock(Date.now());
  const t = await startTestServer({}, { clock, sweepIntervalMs: 100 });
  cleanups.push(() => t.close());
  return { t, clock };
}

/** Three jobs, each held by a running handler until `release` opens. */
async function holdThreeJobs(t: TestServer, queue: string, options: { url?: string; client?: ReturnType<typeof createLeaseQueueClient> }) {
  const log = workerEventLog();
  const release = gate();
  let returned = 0;
  const allReturned = gate();
  let running = 0;
  let peak = 0;
  const worker: Worker = createWorker({
    ...(options.client !== undefined ? { client: options.client } : { url: options.url! }),
    queue,
    workerId: `cut-${queue}`,
    concurrency: JOBS,
    leaseDuration: LEASE_MS,
    heartbeatInterval: HEARTBEAT_MS,
    reconnectBackoff: { initialMs: 50, maxMs: 200 },
    onEvent: log.onEvent,
    async handler(job) {
      peak = Math.max(peak, ++running);
      await release.promise;
      running--;
      if (++returned === JOBS) allReturned.open();
      return { done: job.id };
    },
  });
  cleanups.push(() => worker.close());
  await log.waitFor("connected");
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) ids.push((await t.call("Submit", { queue, task: "held", maxAttempts: 1 })).body.job.id);
  await log.waitFor("lease", JOBS);
  return { log, release, ids, worker, peak: () => peak, allReturned: allReturned.promise };
}

/** Holds on until the server's clock has moved a lease and a half (three rounds of half a lease) with the heartbeats it applied from now on. */
async function extendedPastALease(t: TestServer, clock: ManualClock, ids: string[]): Promise<void> {
  const rounds = moveClockWithHeartbeats(clock, t.server.store, ids, LEASE_MS / 2);
  await rounds.reached(3);
  rounds.stop();
}

async function expectCompletedOnce(t: TestServer, log: WorkerEventLog, ids: string[]): Promise<void> {
  for (const id of ids) await log.waitFor("completed", 1, (e) => e.job.id === id);
  expect(log.all("lease-lost")).toEqual([]);
  for (const id of ids) {
    const { job } = await t.client.getJob({ jobId: id });
    expect(job).toMatchObject({ state: JobState.COMPLETED, attempts: 1, deliveries: 1 });
    const kinds = (await t.client.listJobEvents({ jobId: id })).events.map((e) => e.kind);
    expect(kinds).not.toContain(EventKind.LEASE_EXPIRED);
    expect(kinds.filter((k) => k === EventKind.CLAIMED)).toHaveLength(1);
    expect(kinds.at(-1)).toBe(EventKind.COMPLETED);
  }
}

it("keeps heartbeating and completes its leases when the client side breaks the stream", { timeout: 60_000 }, async () => {
  const { t, clock } = await startServer();
  let breaks = 0;
  let leasesOnThisStream = 0;
  /** Breaks the first stream right after its third lease, the way a message that cannot be decoded does. */
  const breakAfterThirdLease: Interceptor = (next) => async (req) => {
    const res = await next(req);
    if (!res.stream || req.method.name !== "Work" || breaks > 0) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        for await (const m of messages) {
          yield m;
          leasesOnThisStream += (m as WorkResponse).leases.length;
          if (leasesOnThisStream === JOBS) {
            breaks++;
            throw new ConnectError("cannot decode message (simulated by the test)", Code.Internal);
          }
        }
      })(),
    };
  };
  const client = createLeaseQueueClient({ url: t.apiUrl, interceptors: [breakAfterThirdLease] });
  const { log, release, ids, peak } = await holdThreeJobs(t, "client-break", { client });

  const [disconnected] = await log.waitFor("disconnected");
  expect(disconnected.error.code).toBe(Code.Internal);
  await log.waitFor("connected", 2);
  // Each lease extended well past a full lease duration after the break.
  await extendedPastALease(t, clock, ids);
  release.open();
  await expectCompletedOnce(t, log, ids);
  expect(breaks).toBe(1);
  expect(peak()).toBe(JOBS);
});

it("keeps heartbeating and completes its leases when the connection under the stream is cut", { timeout: 60_000 }, async () => {
  const { t, clock } = await startServer();
  const proxy = await cuttableProxy(new URL(t.apiUrl));
  cleanups.push(() => proxy.close());
  const { log, release, ids } = await holdThreeJobs(t, "connection-cut", { url: proxy.url });

  const before = log.events.length;
  expect(proxy.cut()).toBeGreaterThan(0);
  const [disconnected] = await log.waitFor("disconnected", 1, (e) => log.events.indexOf(e) >= before);
  // connect-node reports a connection reset under an HTTP/2 stream as canceled.
  expect([Code.Unavailable, Code.Canceled]).toContain(disconnected.error.code);
  await log.waitFor("connected", 2);
  await extendedPastALease(t, clock, ids);
  release.open();
  await expectCompletedOnce(t, log, ids);
});

it("retries a Complete that was in flight when the connection was cut, and it commits once", { timeout: 60_000 }, async () => {
  const { t } = await startServer();
  const proxy = await cuttableProxy(new URL(t.apiUrl));
  cleanups.push(() => proxy.close());
  const { log, release, ids, allReturned } = await holdThreeJobs(t, "ack-cut", { url: proxy.url });

  proxy.block();
  release.open();
  await allReturned; // the three Complete calls are now being sent into the dead network
  await proxy.nextSwallowedWrite();
  await new Promise((resolve) => setImmediate(resolve));
  const before = log.events.length;
  proxy.cut();
  proxy.unblock();
  await log.waitFor("connected", 2);
  await expectCompletedOnce(t, log, ids);
  // The cut Complete calls failed once each (reported) and were sent again.
  const ackErrors = log.events.slice(before).filter((e) => e.type === "error" && e.job !== undefined && ids.includes(e.job.id));
  expect(ackErrors.length).toBeGreaterThanOrEqual(1);
});
