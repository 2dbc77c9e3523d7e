/**
 * Many workers claiming at once over Connect (docs/api.md "Claim order":
 * "Two claims never receive the same job"), and lease expiry under
 * concurrency: a job whose lease ran out goes back exactly once, recovered by
 * the background sweep (on a server whose clock the test moves).
 */
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseQueueService, WorkRequestSchema, type WorkRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ManualClock } from "../../src/testing/index.js";
import type { JobEvent } from "../../src/domain/job.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer();
});

afterAll(async () => {
  await s?.close();
});

async function ok(method: string, body: unknown, server = s): Promise<any> {
  const reply = await server.call(method, body);
  if (reply.status !== 200) throw new Error(`${method} -> HTTP ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

async function submitJobs(queue: string, n: number, server = s): Promise<Set<string>> {
  const { results } = await ok(
    "SubmitBatch",
    { jobs: Array.from({ length: n }, (_, i) => ({ queue, task: "concurrency", payload: { i } })) },
    server,
  );
  const ids = new Set<string>(results.map((r: any) => r.job.id));
  expect(ids.size).toBe(n);
  return ids;
}

interface Claimed {
  id: string;
  token: string;
  worker: string;
  leaseExpireTime: string;
}

/**
 * `workers` loops, each claiming 1..5 jobs at a time until a claim comes back
 * empty (or `stopAfter` jobs were claimed in all), completing what it gets
 * when `complete` is set. Returns every lease handed out, in arrival order.
 */
async function runWorkers(opts: {
  queue: string;
  workers: number;
  leaseDuration: string;
  complete: boolean;
  stopAfter?: number;
  prefix: string;
  server?: TestServer;
}): Promise<Claimed[]> {
  const claimed: Claimed[] = [];
  await Promise.all(
    Array.from({ length: opts.workers }, async (_, w) => {
      const worker = `${opts.prefix}-${w}`;
      for (let round = 0; opts.stopAfter === undefined || claimed.length < opts.stopAfter; round++) {
        const { leases = [] } = await ok(
          "Claim",
          { queue: opts.queue, workerId: worker, leaseDuration: opts.leaseDuration, maxJobs: 1 + ((w + round) % 5) },
          opts.server,
        );
        if (leases.length === 0) return;
        for (const lease of leases) {
          expect(lease.job).toMatchObject({ state: "JOB_STATE_RUNNING", workerId: worker });
          claimed.push({ id: lease.job.id, token: lease.leaseToken, worker, leaseExpireTime: lease.job.leaseExpireTime });
        }
        if (opts.complete) {
          await Promise.all(
            leases.map(async (lease: any) => {
              const { job } = await ok("Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken, result: { worker } }, opts.server);
              expect(job.state).toBe("JOB_STATE_COMPLETED");
            }),
          );
        }
      }
    }),
  );
  return claimed;
}

async function jobsOf(queue: string, server = s): Promise<any[]> {
  const { jobs, nextPageToken } = await ok("ListJobs", { queue, pageSize: 500 }, server);
  expect(nextPageToken ?? "").toBe("");
  return jobs;
}

function expectNoDuplicates(ids: string[]): void {
  const seen = new Set<string>();
  const twice = ids.filter((id) => (seen.has(id) ? true : (seen.add(id), false)));
  expect(twice, "jobs leased more than once").toEqual([]);
}

describe("concurrent claimers", () => {
  it("lease each of 500 jobs exactly once across 20 workers", async () => {
    const ids = await submitJobs("parallel", 500);
    const claimed = await runWorkers({ queue: "parallel", workers: 20, leaseDuration: "300s", complete: true, prefix: "w" });

    expectNoDuplicates(claimed.map((c) => c.id));
    expect(new Set(claimed.map((c) => c.id))).toEqual(ids);
    // The work was spread: more than one worker got jobs.
    expect(new Set(claimed.map((c) => c.worker)).size).toBeGreaterThan(1);

    const jobs = await jobsOf("parallel");
    expect(jobs.length).toBe(500);
    const workerOf = new Map(claimed.map((c) => [c.id, c.worker]));
    for (const job of jobs) {
      expect(job).toMatchObject({ state: "JOB_STATE_COMPLETED", deliveries: 1, attempts: 1 });
      expect(job.result).toEqual({ worker: workerOf.get(job.id) });
    }
    const { queues } = await ok("GetStats", {});
    const stats = queues.find((q: any) => q.queue === "parallel");
    expect(Number(stats.completed)).toBe(500);
    expect(Number(stats.queued ?? 0) + Number(stats.running ?? 0) + Number(stats.retry ?? 0)).toBe(0);
  }, 90_000);

  it("lease each of 500 jobs exactly once across 8 Work streams and a unary claimer", async () => {
    const queue = "parallel-work";
    const ids = await submitJobs(queue, 500);
    const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }));
    const claimed: Array<{ id: string; worker: string }> = [];
    const completedOk = new Set<string>();
    const allDone = new AbortController();
    const finish = () => {
      if (completedOk.size === 500) allDone.abort();
    };
    const workStreams = Array.from({ length: 8 }, async (_, n) => {
      const worker = `work-${n}`;
      const outbox: WorkRequest[] = [create(WorkRequestSchema, { start: { queue, workerId: worker, maxInFlight: 1 + (n % 4) * 10 } })];
      let wake: (() => void) | undefined;
      async function* requests(): AsyncGenerator<WorkRequest> {
        while (!allDone.signal.aborted) {
          const m = outbox.shift();
          if (m !== undefined) {
            yield m;
            continue;
          }
          await new Promise<void>((r) => (wake = r));
        }
      }
      allDone.signal.addEventListener("abort", () => wake?.());
      try {
        for await (const res of client.work(requests(), { signal: allDone.signal })) {
          for (const l of res.leases) claimed.push({ id: l.job!.id, worker });
          if (res.leases.length > 0) {
            outbox.push(
              create(WorkRequestSchema, {
                acks: res.leases.map((l) => ({
                  jobId: l.job!.id,
                  leaseToken: l.leaseToken,
                  outcome: { case: "complete" as const, value: {} },
                })),
              }),
            );
            wake?.();
          }
          for (const r of res.results) {
            expect(r.status?.code ?? 0).toBe(0);
            completedOk.add(r.jobId);
          }
          finish();
        }
      } catch (err) {
        if (!allDone.signal.aborted) throw err;
      }
    });
    // Unary claimers on the same queue at the same time.
    const unary = (async () => {
      for (let round = 0; !allDone.signal.aborted && round < 200; round++) {
        const { leases = [] } = await ok("Claim", { queue, workerId: "unary", leaseDuration: "300s", maxJobs: 3 });
        for (const lease of leases) {
          claimed.push({ id: lease.job.id, worker: "unary" });
          await ok("Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken });
          completedOk.add(lease.job.id);
        }
        finish();
        if (leases.length === 0) await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await Promise.all([...workStreams, unary]);

    expectNoDuplicates(claimed.map((c) => c.id));
    expect(new Set(claimed.map((c) => c.id))).toEqual(ids);
    expect(new Set(claimed.map((c) => c.worker)).size).toBeGreaterThan(1);
    const jobs = await jobsOf(queue);
    for (const job of jobs) expect(job).toMatchObject({ state: "JOB_STATE_COMPLETED", deliveries: 1, attempts: 1 });
  }, 90_000);

  it("give each expired job back exactly once after the sweep recovers it", async () => {
    // Leases expire when the test moves the server's clock, not after a real second that round 1 must beat.
    const clock = new ManualClock(Date.now());
    const t = await startTestServer({}, { clock, sweepIntervalMs: 100 });
    const queue = "expiring";
    const JOBS = 100;
    const ids = await submitJobs(queue, JOBS, t);

    // Count the sweep's recoveries as they commit: no claim runs on this
    // queue between the first round and the moment all of them are in.
    const expired = new Set<string>();
    const unexpected: JobEvent[] = [];
    let allExpired!: () => void;
    const recovered = new Promise<void>((r) => (allExpired = r));
    const unsubscribe = t.server.store.onCommitted(({ events }: { events: JobEvent[] }) => {
      for (const e of events) {
        if (e.queue !== queue || e.kind !== "lease_expired") continue;
        if (e.fromState !== "running" || e.toState !== "retry") unexpected.push(e);
        expired.add(e.jobId);
        if (expired.size === JOBS) allExpired();
      }
    });

    try {
      // Round 1: workers that crash (never complete); 1 s leases.
      const first = await runWorkers({
        queue,
        workers: 10,
        leaseDuration: "1s",
        complete: false,
        stopAfter: JOBS,
        prefix: "doomed",
        server: t,
      });
      expect(first.length).toBe(JOBS);
      // Everything in round 1 happened before the first lease could expire (the server's clock has not
      // moved), so a job seen twice would be a double lease, not a legitimate retry.
      const earliestExpiry = Math.min(...first.map((c) => Date.parse(c.leaseExpireTime)));
      expect(clock.now(), "round 1 took longer than the lease; the test proves nothing").toBeLessThan(earliestExpiry);
      expectNoDuplicates(first.map((c) => c.id));
      expect(new Set(first.map((c) => c.id))).toEqual(ids);

      clock.advance(1001);
      await recovered; // the sweep runs every 100 ms; bounded by the test timeout
      expect(expired).toEqual(ids);
      expect(unexpected).toEqual([]);
      for (const job of await jobsOf(queue, t)) {
        expect(job).toMatchObject({ state: "JOB_STATE_RETRY", deliveries: 1, attempts: 1 });
      }

      // A crashed worker's token is now useless.
      const stale = await t.call("Complete", { jobId: first[0].id, leaseToken: first[0].token });
      expect(stale.body.code).toBe("aborted");

      // Round 2: each job comes back exactly once more.
      const second = await runWorkers({ queue, workers: 10, leaseDuration: "300s", complete: true, prefix: "rescuer", server: t });
      expectNoDuplicates(second.map((c) => c.id));
      expect(new Set(second.map((c) => c.id))).toEqual(ids);

      for (const job of await jobsOf(queue, t)) {
        expect(job).toMatchObject({ state: "JOB_STATE_COMPLETED", deliveries: 2, attempts: 2 });
      }
      const { events } = await ok("ListJobEvents", { jobId: first[0].id }, t);
      expect(events.map((e: any) => e.kind)).toEqual([
        "EVENT_KIND_SUBMITTED",
        "EVENT_KIND_CLAIMED",
        "EVENT_KIND_LEASE_EXPIRED",
        "EVENT_KIND_CLAIMED",
        "EVENT_KIND_COMPLETED",
      ]);
    } finally {
      unsubscribe();
      await t.close();
    }
  }, 60_000);
});
