/**
 * Retention and the heartbeat policy seen through a real server (manual
 * clock): the background pruner deletes finished jobs with their events and
 * frees their keys, leasequeue_pruned_jobs_total counts them, replays from
 * before them are out_of_range; a watcher sees only stored heartbeats while
 * the transition metric counts every heartbeat.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { EventKind, LeaseQueueService, type JobEvent } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ManualClock } from "../../src/testing/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const HOUR = 3_600_000;
const servers: TestServer[] = [];
const aborts: AbortController[] = [];
afterEach(async () => {
  for (const a of aborts.splice(0)) a.abort();
  for (const s of servers.splice(0)) await s.close();
});

async function server(flags: Record<string, string>, clock: ManualClock) {
  const t = await startTestServer(flags, { clock, pruneIntervalMs: 10 });
  servers.push(t);
  return t;
}

async function metricValue(t: TestServer, series: string): Promise<number> {
  const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

async function untilMetric(t: TestServer, series: string, value: number): Promise<void> {
  await until(`${series} at ${value}`, async () => (await metricValue(t, series)) === value);
}

async function runToCompletion(t: TestServer, queue: string, idempotencyKey?: string) {
  const { job } = await t.client.submit({ queue, task: "invoice.generate", idempotencyKey });
  const { leases } = await t.client.claim({ queue, workerId: "worker-1" });
  await t.client.complete({ jobId: leases[0].job!.id, leaseToken: leases[0].leaseToken });
  return job!;
}

function events(t: TestServer, afterSequence?: bigint) {
  const abort = new AbortController();
  aborts.push(abort);
  const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
  const it = client.watchEvents({ afterSequence }, { signal: abort.signal })[Symbol.asyncIterator]();
  return {
    async subscribed() {
      const first = await it.next();
      expect(first.value?.event).toBeUndefined(); // the keepalive: headers out, registered
    },
    async event(): Promise<JobEvent> {
      for (;;) {
        const r = await it.next();
        if (r.done) throw new Error("stream ended");
        if (r.value.event !== undefined) return r.value.event;
      }
    },
  };
}

describe("retention on a running server", () => {
  it("prunes finished jobs past the retention, counts them, frees their keys and refuses replays across them", async () => {
    const clock = new ManualClock(Date.now());
    const t = await server({ retention: "1h" }, clock);
    const waiting = await t.client.submit({ queue: "emails", task: "welcome.send" });
    const done = await runToCompletion(t, "billing", "invoice-481");
    const cancelled = (await t.client.submit({ queue: "billing", task: "invoice.void" })).job!;
    await t.client.cancel({ jobId: cancelled.id });
    const { events: doneEvents } = await t.client.listJobEvents({ jobId: done.id });
    const lastPruned = doneEvents.at(-1)!.sequence + 2n; // the cancelled job's two events come after

    clock.advance(2 * HOUR);
    await untilMetric(t, 'leasequeue_pruned_jobs_total{queue="billing",state="completed"}', 1);
    await untilMetric(t, 'leasequeue_pruned_jobs_total{queue="billing",state="cancelled"}', 1);

    for (const id of [done.id, cancelled.id]) {
      const err = await t.client.getJob({ jobId: id }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.NotFound);
    }
    const stats = await t.client.getStats({});
    expect(stats.total).toMatchObject({ queued: 1n, completed: 0n, cancelled: 0n });
    expect((await t.client.getJob({ jobId: waiting.job!.id })).job!.state).toBe(waiting.job!.state);

    const again = await t.client.submit({ queue: "billing", task: "invoice.generate", idempotencyKey: "invoice-481" });
    expect(again.deduplicated).toBe(false);
    expect(again.job!.id).not.toBe(done.id);

    // The waiting job's SUBMITTED event (sequence 1) is still stored, but the history after it has holes.
    const tooOld = events(t, 0n);
    const err = await tooOld.subscribed().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.OutOfRange);
    expect(err?.rawMessage).toContain(`oldest available sequence is ${lastPruned + 1n}`);
    const complete = events(t, lastPruned);
    await complete.subscribed();
    expect(await complete.event()).toMatchObject({ jobId: again.job!.id, kind: EventKind.SUBMITTED });
  });
});

describe("heartbeats on a running server", () => {
  it("reach watchers only when stored, while leasequeue_transitions_total counts every one", async () => {
    const clock = new ManualClock(Date.now());
    const t = await server({}, clock);
    const live = events(t);
    await live.subscribed();
    const { job } = await t.client.submit({ queue: "billing", task: "report.build" });
    const { leases } = await t.client.claim({ queue: "billing", workerId: "worker-1" });
    const lease = { jobId: job!.id, leaseToken: leases[0].leaseToken };
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      const beat = await t.client.heartbeat(lease);
      expect(beat.job!.leaseExpireTime!.seconds).toBe(BigInt(Math.floor((clock.now() + 60_000) / 1000)));
    }
    await t.client.complete(lease);
    const marker = (await t.client.submit({ queue: "billing", task: "marker" })).job!;

    const kinds: EventKind[] = [];
    for (;;) {
      const e = await live.event();
      if (e.jobId === marker.id) break;
      kinds.push(e.kind);
    }
    expect(kinds).toEqual([EventKind.SUBMITTED, EventKind.CLAIMED, EventKind.HEARTBEAT, EventKind.COMPLETED]);
    const { events: timeline } = await t.client.listJobEvents({ jobId: job!.id });
    expect(timeline.map((e) => e.kind)).toEqual(kinds);
    expect(await metricValue(t, 'leasequeue_transitions_total{queue="billing",kind="heartbeat"}')).toBe(5);
  });
});
