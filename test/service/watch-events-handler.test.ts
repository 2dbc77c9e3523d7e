/**
 * WatchEvents against a real server: live start, resume with no gap and no
 * duplicate under concurrent writes, out_of_range, filters, the slow-
 * subscriber bound, keepalives, metrics and shutdown. Streams are read over
 * gRPC (HTTP/2) and over Connect JSON (HTTP/1.1); writes go over Connect JSON.
 */
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import {
  EventKind,
  LeaseQueueService,
  type JobEvent,
  type WatchEventsRequest,
  type WatchEventsResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { deleteEventsThrough, startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const servers: TestServer[] = [];
const aborts: AbortController[] = [];
afterEach(async () => {
  for (const a of aborts.splice(0)) a.abort();
  for (const s of servers.splice(0)) await s.close();
});

/** Load tests commit thousands of events; they prove ordering, not durability, so skip the fsyncs. */
const FAST = { "sqlite-synchronous": "normal" };
/** For tests that commit continuously: generous when the machine is busy. */
const LOAD_TIMEOUT_MS = 30_000;

async function server(options: Parameters<typeof startTestServer>[1] = {}, flags: Record<string, string> = {}) {
  const t = await startTestServer(flags, options);
  servers.push(t);
  return t;
}

type LeaseQueueClient = Client<typeof LeaseQueueService>;

function grpcClient(t: TestServer): LeaseQueueClient {
  return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
}

type WatchRequest = Partial<Pick<WatchEventsRequest, "queue" | "jobId" | "afterSequence">>;

/** A WatchEvents stream read message by message; `abort` disconnects. */
function openWatch(client: LeaseQueueClient, req: WatchRequest, onHeader?: (h: Headers) => void) {
  const abort = new AbortController();
  aborts.push(abort);
  const it = client.watchEvents(req, { signal: abort.signal, onHeader })[Symbol.asyncIterator]();
  return {
    abort,
    /** Next message, keepalives included. */
    async next(): Promise<WatchEventsResponse> {
      const r = await it.next();
      if (r.done) throw new Error("stream ended");
      return r.value;
    },
    /** Next event, skipping keepalives. */
    async event(): Promise<JobEvent> {
      for (;;) {
        const m = await this.next();
        if (m.event !== undefined) return m.event;
      }
    },
    /** Reads until the stream fails; returns the events read before and the error. */
    async untilError(): Promise<{ events: JobEvent[]; error: ConnectError }> {
      const events: JobEvent[] = [];
      try {
        for (;;) {
          const m = await this.next();
          if (m.event !== undefined) events.push(m.event);
        }
      } catch (err) {
        return { events, error: ConnectError.from(err) };
      }
    },
  };
}

async function streamError(client: LeaseQueueClient, req: WatchRequest): Promise<ConnectError> {
  const w = openWatch(client, req);
  try {
    await w.next();
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the stream to fail");
}

async function metric(t: TestServer, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? NaN);
}

const SUBSCRIBERS = /^leasequeue_watch_subscribers (\d+)$/m;
const SENT = /^leasequeue_watch_events_sent_total (\d+)$/m;
const DROPPED = /^leasequeue_watch_subscribers_dropped_total\{reason="output_full"\} (\d+)$/m;

/** The server ends streams asynchronously after a client disconnects: wait until it has. */
async function untilMetric(t: TestServer, pattern: RegExp, value: number): Promise<void> {
  await until(`${pattern.source} at ${value}`, async () => (await metric(t, pattern)) === value);
}

async function latestSequence(t: TestServer): Promise<bigint> {
  return BigInt((await t.server.store.eventBounds()).latest);
}

describe("WatchEvents", () => {
  it("without after_sequence sends a keepalive first, then only events committed after the call", async () => {
    const t = await server();
    const grpc = grpcClient(t);
    const { job: before } = await t.client.submit({ queue: "billing", task: "invoice.generate" });

    let headers: Headers | undefined;
    const w = openWatch(grpc, {}, (h) => (headers = h));
    const first = await w.next();
    expect(first.event).toBeUndefined();
    expect(headers?.get("content-type")).toMatch(/^application\/grpc/);

    const { job: after } = await t.client.submit({ queue: "billing", task: "invoice.generate" });
    const e = await w.event();
    expect(e).toMatchObject({ jobId: after!.id, queue: "billing", kind: EventKind.SUBMITTED });
    expect(e.jobId).not.toBe(before!.id);
    expect(e.sequence).toBe(await latestSequence(t));
  });

  it(
    "resumed from the last received sequence, misses nothing and repeats nothing while writes continue",
    async () => {
      const t = await server({}, FAST);
      const grpc = grpcClient(t);
      const base = await latestSequence(t);

      // Writers commit continuously (batches of submits, and some claim + complete) until told to stop.
      let committed = 0;
      let stop = false;
      const progress: Array<{ at: number; resolve: () => void }> = [];
      const tick = () => {
        committed++;
        for (const p of progress.filter((p) => committed >= p.at)) {
          progress.splice(progress.indexOf(p), 1);
          p.resolve();
        }
      };
      const commitsFromNow = (n: number) => new Promise<void>((resolve) => progress.push({ at: committed + n, resolve }));
      const writers = Array.from({ length: 3 }, async (_, w) => {
        const queue = `load-${w}`;
        for (let i = 0; !stop; i++) {
          // Commits of one to three events.
          await t.client.submitBatch({ jobs: Array.from({ length: (i % 3) + 1 }, () => ({ queue, task: "t" })) });
          tick();
          if (i % 4 === 3) {
            const { leases } = await t.client.claim({ queue, workerId: `worker-${w}`, maxJobs: 2 });
            for (const l of leases) await t.client.complete({ jobId: l.job!.id, leaseToken: l.leaseToken });
            tick();
          }
        }
      });

      const received: bigint[] = [];
      const read = async (w: ReturnType<typeof openWatch>, until: (seq: bigint) => boolean) => {
        for (;;) {
          const seq = (await w.event()).sequence;
          received.push(seq);
          if (until(seq)) return;
        }
      };
      let after = base;
      try {
        for (let round = 0; round < 5; round++) {
          // With what piled up meanwhile, a backlog longer than one replay page
          // (500 events): commits that land while the first page is sent are
          // both buffered and read again by the next page.
          await t.client.submitBatch({ jobs: Array.from({ length: 500 }, () => ({ queue: "backlog", task: "t" })) });
          const w = openWatch(grpc, { afterSequence: after });
          expect((await w.next()).event).toBeUndefined();
          const atOpen = await latestSequence(t);
          // Read through the replay and well into live events, then disconnect
          // at an arbitrary point.
          await read(w, (seq) => seq >= atOpen + 60n + BigInt(round * 7));
          w.abort.abort();
          after = received.at(-1)!;
          // Let events pile up while disconnected.
          await commitsFromNow(10);
        }
      } finally {
        stop = true;
        await Promise.all(writers);
      }

      // The writes have stopped: a last resume reads up to the latest event.
      const last = await latestSequence(t);
      const w = openWatch(grpc, { afterSequence: after });
      await read(w, (seq) => seq >= last);

      const stored = await t.server.store.listEvents({ afterSequence: Number(base), limit: 1_000_000 });
      expect(stored.length).toBeGreaterThan(5 * 500);
      expect(received).toEqual(stored.map((e) => BigInt(e.sequence)));
      await untilMetric(t, DROPPED, 0);
    },
    LOAD_TIMEOUT_MS,
  );

  it("delivers the same events, replayed and live, over every protocol and codec", async () => {
    const t = await server({}, FAST);
    const baseUrl = t.apiUrl;
    const transports = {
      "gRPC (HTTP/2)": createGrpcTransport({ baseUrl }),
      "gRPC-Web binary (HTTP/1.1)": createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
      "gRPC-Web JSON (HTTP/1.1)": createGrpcWebTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
      "Connect binary (HTTP/1.1)": createConnectTransport({ baseUrl, httpVersion: "1.1" }),
      "Connect JSON (HTTP/1.1)": createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
      "Connect JSON (HTTP/2)": createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: false }),
    };
    // Some stored events to replay, with errors and cancel reasons (non-ASCII too) in them.
    const { job } = await t.client.submit({ queue: "codecs", task: "t", maxAttempts: 2 });
    const [lease] = (await t.client.claim({ queue: "codecs", workerId: "w-1" })).leases;
    await t.client.fail({ jobId: job!.id, leaseToken: lease.leaseToken, error: 'timeout "smtp" ✗' });
    const replayFrom = 0n;
    const watches = Object.entries(transports).map(([name, transport]) => ({
      name,
      watch: openWatch(createClient(LeaseQueueService, transport), { afterSequence: replayFrom }),
    }));
    for (const { watch } of watches) expect((await watch.next()).event).toBeUndefined();
    // Live: single submits (one event per write) and a batch (many events per write).
    await t.client.cancel({ jobId: (await t.client.submit({ queue: "codecs", task: "t" })).job!.id, reason: "no longer needed ✓" });
    await t.client.submitBatch({ jobs: Array.from({ length: 50 }, (_, i) => ({ queue: "codecs", task: `t${i}` })) });
    const latest = await latestSequence(t);
    const expected = [];
    for (let seq = 1n; seq <= latest; seq++) expected.push(seq);
    const stored = await grpcClient(t).listJobEvents({ jobId: job!.id });

    for (const { name, watch } of watches) {
      const got: JobEvent[] = [];
      while (got.length < expected.length) got.push(await watch.event());
      expect(
        got.map((e) => e.sequence),
        name,
      ).toEqual(expected);
      expect(got.slice(0, stored.events.length), name).toEqual(stored.events);
      expect(got.at(-1), name).toMatchObject({ queue: "codecs", kind: EventKind.SUBMITTED });
    }
  });

  it("fails with out_of_range when the replay would start before the oldest stored event", async () => {
    const t = await server();
    const grpc = grpcClient(t);
    await t.client.submitBatch({ jobs: Array.from({ length: 10 }, () => ({ queue: "billing", task: "t" })) });
    // Simulate pruning: the first four events are gone.
    await deleteEventsThrough(t, 4);

    const tooOld = await streamError(grpc, { afterSequence: 3n });
    expect(tooOld.code).toBe(Code.OutOfRange);
    expect(tooOld.rawMessage).toContain("oldest available sequence is 5");

    // Connect JSON reports the same.
    expect((await streamError(t.client, { afterSequence: 0n })).code).toBe(Code.OutOfRange);

    // Right before the oldest kept event is a complete replay.
    const w = openWatch(grpc, { afterSequence: 4n });
    expect((await w.next()).event).toBeUndefined();
    const seqs: bigint[] = [];
    for (let i = 0; i < 6; i++) seqs.push((await w.event()).sequence);
    expect(seqs).toEqual([5n, 6n, 7n, 8n, 9n, 10n]);
  });

  it("fails with out_of_range for a sequence this server never issued, and invalid_argument for bad fields", async () => {
    const t = await server();
    const grpc = grpcClient(t);
    await t.client.submit({ queue: "billing", task: "t" });

    const ahead = await streamError(grpc, { afterSequence: 2n });
    expect(ahead.code).toBe(Code.OutOfRange);
    expect(ahead.rawMessage).toContain("beyond the latest sequence this server has issued (1)");
    expect((await streamError(grpc, { afterSequence: 2n ** 62n })).code).toBe(Code.OutOfRange);

    for (const req of [{ afterSequence: -1n }, { queue: "no spaces" }, { jobId: "job-1" }] satisfies WatchRequest[]) {
      const err = await streamError(grpc, req);
      expect(
        err.code,
        JSON.stringify(req, (_, v) => (typeof v === "bigint" ? String(v) : v)),
      ).toBe(Code.InvalidArgument);
    }
    await untilMetric(t, SUBSCRIBERS, 0);
  });

  it("filters by queue and by job id (in any letter case), in the replay and live", async () => {
    const t = await server();
    const { job: a } = await t.client.submit({ queue: "billing", task: "t" });
    const { job: b } = await t.client.submit({ queue: "email", task: "t" });

    // Over Connect JSON (HTTP/1.1 server streaming).
    const byQueue = openWatch(t.client, { queue: "email", afterSequence: 0n });
    const byJob = openWatch(t.client, { jobId: a!.id.toUpperCase(), afterSequence: 0n });
    expect((await byQueue.next()).event).toBeUndefined();
    expect((await byJob.next()).event).toBeUndefined();
    expect(await byQueue.event()).toMatchObject({ jobId: b!.id, kind: EventKind.SUBMITTED });
    expect(await byJob.event()).toMatchObject({ jobId: a!.id, kind: EventKind.SUBMITTED });

    const [lease] = (await t.client.claim({ queue: "billing", workerId: "w1" })).leases;
    await t.client.cancel({ jobId: b!.id, reason: "not needed" });
    await t.client.complete({ jobId: a!.id, leaseToken: lease.leaseToken });
    const { job: c } = await t.client.submit({ queue: "email", task: "t" });

    expect(await byQueue.event()).toMatchObject({ jobId: b!.id, kind: EventKind.CANCELLED, message: "not needed" });
    expect(await byQueue.event()).toMatchObject({ jobId: c!.id, kind: EventKind.SUBMITTED });
    expect(await byJob.event()).toMatchObject({ jobId: a!.id, kind: EventKind.CLAIMED, workerId: "w1" });
    expect(await byJob.event()).toMatchObject({ jobId: a!.id, kind: EventKind.COMPLETED });
  });

  it(
    "ends a subscriber that stops reading with resource_exhausted once its connection holds too many unread bytes, naming the sequence to resume from",
    async () => {
      const BOUND_BYTES = 65_536;
      const t = await server({}, { ...FAST, "watch-max-pending-bytes": String(BOUND_BYTES) });
      const grpc = grpcClient(t);
      const slow = openWatch(grpc, {});
      expect((await slow.next()).event).toBeUndefined();
      expect(await metric(t, SUBSCRIBERS)).toBe(1);

      // The client reads nothing more: HTTP/2 flow control holds the server's
      // writes back, the bytes waiting in the stream grow, and past the bound
      // it is dropped.
      let batches = 0;
      while ((await metric(t, DROPPED)) === 0) {
        expect(batches++, "the subscriber was never dropped").toBeLessThan(100);
        // Commits smaller than the bound: a subscriber that kept reading would keep up.
        await t.client.submitBatch({ jobs: Array.from({ length: 100 }, () => ({ queue: "bulk", task: "t" })) });
      }
      expect(await metric(t, DROPPED)).toBe(1);
      expect(await metric(t, SUBSCRIBERS)).toBe(0);
      // What it holds for the subscriber is bounded: it stopped buffering at the drop.
      const committed = Number(await latestSequence(t));
      expect(committed).toBeGreaterThan(BOUND_BYTES / 100);

      // Reading again, the client gets what was in flight, then the error.
      const { events, error } = await slow.untilError();
      expect(error.code).toBe(Code.ResourceExhausted);
      const last = events.at(-1)!.sequence;
      expect(error.rawMessage).toContain(`resume with after_sequence=${last}`);
      expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: events.length }, (_, i) => BigInt(i + 1)));
      expect(events.length).toBeLessThan(committed);

      // Resuming where it says continues without a gap.
      const again = openWatch(grpc, { afterSequence: last });
      expect((await again.next()).event).toBeUndefined();
      expect((await again.event()).sequence).toBe(last + 1n);
    },
    LOAD_TIMEOUT_MS,
  );

  it("sends a keepalive first and then every keepalive interval while idle", async () => {
    const t = await server({ watchKeepaliveMs: 25 });
    const w = openWatch(grpcClient(t), { queue: "quiet" });
    for (let i = 0; i < 4; i++) expect((await w.next()).event).toBeUndefined();
    // An event still comes through between keepalives.
    const { job } = await t.client.submit({ queue: "quiet", task: "t" });
    expect((await w.event()).jobId).toBe(job!.id);
  });

  it("reports current subscribers, events sent and drops in /metrics", async () => {
    const t = await server();
    const grpc = grpcClient(t);
    expect(await metric(t, SUBSCRIBERS)).toBe(0);
    expect(await metric(t, SENT)).toBe(0);
    expect(await metric(t, DROPPED)).toBe(0);

    const watches = [openWatch(grpc, {}), openWatch(grpc, { queue: "billing" }), openWatch(t.client, { afterSequence: 0n })];
    for (const w of watches) await w.next();
    expect(await metric(t, SUBSCRIBERS)).toBe(3);

    await t.client.submitBatch({
      jobs: [
        { queue: "billing", task: "t" },
        { queue: "email", task: "t" },
      ],
    });
    // 2 + 1 + 2 events.
    await watches[0].event();
    await watches[0].event();
    await watches[1].event();
    await watches[2].event();
    await watches[2].event();
    expect(await metric(t, SENT)).toBe(5);

    for (const w of watches) w.abort.abort();
    await untilMetric(t, SUBSCRIBERS, 0);
  });

  it("ends open streams with unavailable when the server shuts down", async () => {
    const t = await startTestServer();
    const w = openWatch(grpcClient(t), {});
    await w.next();
    const ended = w.untilError();
    await t.close();
    expect((await ended).error.code).toBe(Code.Unavailable);
  });
});
