/**
 * WatchEvents subscribers that never read must not take the writers down
 * (docs/api.md "WatchEvents limits"): against the real server in its own
 * process, 200 subscribers that never read (100 raw HTTP/2 gRPC streams
 * whose window is never reopened, 100 HTTP/1.1 Connect streams whose TCP
 * socket is never read) cost the writers a bounded share of their
 * throughput and are dropped (`output_full`, or `buffer_full` while the
 * server waits to learn whether an HTTP/1.1 client reads) within a bounded time, while a
 * subscriber that reads keeps receiving every event. One more watch than
 * LEASEQUEUE_MAX_WATCHERS is refused with resource_exhausted.
 *
 * Prints the figures; asserts only generous bounds, on the server's CPU per
 * job more than on wall-clock throughput (the machine is shared):
 * `node bench/watch-fanout.mjs` measures the same at a larger scale.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { openHttp1NonReader, openHttp2NonReader } from "../helpers/never-reading-watchers.js";
import { mib, processCpuMs, processMemory } from "../helpers/proc-stats.js";
import { okJson, spawnServer, type SpawnedServer } from "../helpers/process.js";
import { until } from "../helpers/until.js";

const JOBS = 12_000;
const BATCH = 100;
const PRODUCERS = 4;
const NON_READERS_PER_TRANSPORT = 100;
const READERS = 2;
const MAX_WATCHERS = 2 * NON_READERS_PER_TRANSPORT + READERS;
/** Low enough that the non-readers are dropped while the measured jobs are written. */
const MAX_PENDING_BYTES = 262_144;

let dir = "";
let server: SpawnedServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-fanout-"));
  server = await spawnServer(join(dir, "jobs.db"), [
    "--sqlite-synchronous",
    "normal",
    "--max-watchers",
    String(MAX_WATCHERS),
    "--watch-max-pending-bytes",
    String(MAX_PENDING_BYTES),
  ]);
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
  const m = new RegExp(`^${name.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(text);
  if (m === null) throw new Error(`no ${name} in /metrics`);
  return Number(m[1]);
}

/** Submits `jobs` jobs with SubmitBatch from PRODUCERS concurrent callers; returns jobs per second. */
async function submitJobs(jobs: number, tag: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < jobs) {
        const n = Math.min(BATCH, jobs - next);
        next += n;
        await okJson(server.apiUrl, "SubmitBatch", {
          jobs: Array.from({ length: n }, (_, i) => ({ queue: "fanout", task: tag, payload: { i } })),
        });
      }
    }),
  );
  return (jobs * 1000) / (performance.now() - started);
}

describe("WatchEvents subscribers that never read", () => {
  it("cost the writers a bounded share of their throughput, are dropped, and leave a reading subscriber whole", async () => {
    const pid = server.child.pid!;
    await submitJobs(JOBS / 4, "warm-up"); // so that "alone" is not measured on a cold process
    let cpu = processCpuMs(pid);
    const alone = await submitJobs(JOBS, "alone");
    const cpuAlone = processCpuMs(pid) - cpu;

    // Two readers, over HTTP/2 (gRPC) and HTTP/1.1 (Connect JSON), that record every event from here on.
    const subscribedAfter = await lastSequence();
    const readerAbort = new AbortController();
    const readers = [
      createGrpcTransport({ baseUrl: server.apiUrl }),
      createConnectTransport({ baseUrl: server.apiUrl, httpVersion: "1.1", useBinaryFormat: false }),
    ].map((transport) => {
      const watcher = createClient(LeaseQueueService, transport);
      const received: bigint[] = [];
      let resumes = 0;
      let reached: { sequence: bigint; resolve: () => void } | undefined;
      let it = watcher.watchEvents({}, { signal: readerAbort.signal })[Symbol.asyncIterator]();
      const subscribed = it.next().then((r) => expect(r.value?.event).toBeUndefined());
      let failure: unknown;
      const reading = subscribed
        .then(async () => {
          for (;;) {
            try {
              const r = await it.next();
              if (r.done) return;
              if (r.value.event === undefined) continue;
              received.push(r.value.event.sequence);
              if (reached !== undefined && r.value.event.sequence >= reached.sequence) reached.resolve();
            } catch (err) {
              if (readerAbort.signal.aborted) return;
              // A reader starved of CPU (this test process also produces the
              // jobs, and the machine is shared) may be dropped as too slow like
              // any other: it resumes where it was, as docs/api.md
              // "Resuming after a disconnect" tells clients to.
              const error = ConnectError.from(err);
              if (error.code !== Code.ResourceExhausted || received.length === 0) throw err;
              resumes++;
              it = watcher.watchEvents({ afterSequence: received.at(-1)! }, { signal: readerAbort.signal })[Symbol.asyncIterator]();
            }
          }
        })
        .catch((err: unknown) => {
          // Kept for the assertion below (and never an unhandled rejection when
          // an earlier assertion fails and the server stops under the reader).
          failure = err;
        });
      const reach = (sequence: bigint) =>
        (received.at(-1) ?? 0n) >= sequence ? Promise.resolve() : new Promise<void>((resolve) => (reached = { sequence, resolve }));
      return { received, subscribed, reading, until: reach, resumes: () => resumes, failure: () => failure };
    });
    for (const r of readers) await r.subscribed;
    const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: server.apiUrl }));

    const closers: Array<() => void> = [];
    for (let i = 0; i < NON_READERS_PER_TRANSPORT; i++) closers.push(await openHttp2NonReader(server.apiUrl));
    for (let i = 0; i < NON_READERS_PER_TRANSPORT; i++) closers.push(await openHttp1NonReader(server.apiUrl));
    expect(await metric("leasequeue_watch_subscribers")).toBe(MAX_WATCHERS);

    // One more than the limit is refused, clearly.
    const extra = client.watchEvents({})[Symbol.asyncIterator]();
    const refused = await extra.next().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(refused?.code).toBe(Code.ResourceExhausted);
    expect(refused?.rawMessage).toMatch(/LEASEQUEUE_MAX_WATCHERS/);

    const drops = async () =>
      (await metric('leasequeue_watch_subscribers_dropped_total{reason="output_full"}')) +
      (await metric('leasequeue_watch_subscribers_dropped_total{reason="buffer_full"}'));
    const droppedBefore = await drops();
    cpu = processCpuMs(pid);
    const started = performance.now();
    const watched = await submitJobs(JOBS, "watched");
    const cpuWatched = processCpuMs(pid) - cpu;
    const subscribersAfterJobs = await metric("leasequeue_watch_subscribers");

    // Keep writing (bounded) until only the reader is left.
    while ((await metric("leasequeue_watch_subscribers")) > READERS && performance.now() - started < 30_000) {
      await submitJobs(BATCH, "more");
    }
    const dropSeconds = (performance.now() - started) / 1000;
    const dropped = (await drops()) - droppedBefore;
    const droppedByBytes = await metric('leasequeue_watch_subscribers_dropped_total{reason="output_full"}');
    const memory = processMemory(pid);

    console.log(
      `watch fan-out: ${JOBS} jobs alone ${alone.toFixed(0)} jobs/s (server CPU ${cpuAlone} ms); ` +
        `with ${READERS} readers + ${2 * NON_READERS_PER_TRANSPORT} non-readers ${watched.toFixed(0)} jobs/s (server CPU ${cpuWatched} ms), ` +
        `${((100 * watched) / alone).toFixed(0)}% of alone (server CPU per job ${((100 * cpuAlone) / cpuWatched).toFixed(0)}% of alone); ` +
        `${subscribersAfterJobs} subscribers left after those jobs, ` +
        `${dropped} dropped (${droppedByBytes} output_full), only the readers left after ${dropSeconds.toFixed(1)} s; ` +
        `server RSS ${mib(memory.rssBytes)} (peak ${mib(memory.peakRssBytes)})`,
    );
    // Wall-clock throughput on a shared machine swings with its other load
    // (21% to 105% of alone between identical runs here), while the server's
    // own CPU per job stays within about 10%: bound the CPU the subscribers
    // cost (capacity left at least 30%, the one-time cost of the 200 drops
    // included), and keep only a loose bound on throughput (subscribers that
    // were never dropped used to leave about 3%).
    // (Runs here gave 0.38 to 0.81; the code before the fast path gave about
    // 0.25 with gRPC non-readers alone, and far less with HTTP/1.1 ones.)
    expect(cpuAlone / cpuWatched).toBeGreaterThanOrEqual(0.3);
    expect(watched).toBeGreaterThanOrEqual(0.1 * alone);
    await until("only the readers left subscribed", async () => (await metric("leasequeue_watch_subscribers")) === READERS);

    // The readers got every event committed since they subscribed, once and in order.
    const last = await lastSequence();
    for (const r of readers) {
      await r.until(last);
      expect(r.received.length).toBe(Number(last - subscribedAfter));
      expect(r.received).toEqual(Array.from({ length: r.received.length }, (_, i) => subscribedAfter + 1n + BigInt(i)));
    }
    // Counted once the readers hold every event: a reader still behind could be dropped (and resume) later.
    const resumes = readers.reduce((n, r) => n + r.resumes(), 0);
    if (resumes > 0) console.log(`watch fan-out: the readers were dropped as too slow and resumed ${resumes} time(s)`);
    expect((await drops()) - droppedBefore).toBe(2 * NON_READERS_PER_TRANSPORT + resumes);
    readerAbort.abort();
    for (const r of readers) await r.reading;
    for (const r of readers) expect(r.failure()).toBeUndefined();
    for (const close of closers) close();
  }, 90_000);
});

/** The sequence of the newest event, read through a replay of the last one. */
async function lastSequence(): Promise<bigint> {
  const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: server.apiUrl }));
  const jobs = (await okJson(server.apiUrl, "ListJobs", { queue: "fanout", pageSize: 1 })).jobs as Array<{ id: string }>;
  const events = await client.listJobEvents({ jobId: jobs[0].id });
  return events.events.at(-1)!.sequence;
}
