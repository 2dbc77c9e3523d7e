/**
 * Queue controls (docs/api.md "Queue controls") against a real server: a
 * paused queue hands out no lease on any path (Claim, long-poll Claim,
 * StreamClaims, Work, the SDK worker), stays paused across a restart, and on
 * resume its waiting long-polls and streams get the job at once; RedriveAll
 * and PurgeQueue report exact counts over more than one batch; bad input is
 * refused naming the field.
 *
 * "Nothing was leased" is proven without waiting for time to pass: a commit
 * that makes a job eligible wakes every claimer of its queue, and each of
 * them queues its claim with the store before the server reads the next
 * request. So once a later write (a submit to another queue) is answered,
 * those claims have committed, and the job must still be queued.
 */
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/app.js";
import { silentLogger } from "../../src/testing/index.js";
import { BULK_BATCH_JOBS } from "../../src/store/writing/bulk-transitions.js";
import { createWorker } from "../../src/worker/index.js";
import { LeaseQueueService, type WorkRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { workerEventLog } from "../helpers/worker-events.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases } from "../helpers/store.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(): Promise<TestServer> {
  const t = await startTestServer();
  cleanups.push(() => t.close());
  return t;
}

async function ok(t: TestServer, method: string, body: unknown) {
  const res = await t.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

async function submit(t: TestServer, queue: string, task = "t"): Promise<string> {
  return (await ok(t, "Submit", { queue, task })).job.id as string;
}

async function stateOf(t: TestServer, jobId: string): Promise<string> {
  return (await ok(t, "GetJob", { jobId })).job.state as string;
}

/** A write to another queue: once it is answered, every claim queued before it has committed. */
async function barrier(t: TestServer): Promise<void> {
  await submit(t, "barrier");
}

async function claimWaiters(t: TestServer): Promise<number> {
  const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  return Number(/^leasequeue_claim_waiters (\d+)$/m.exec(text)?.[1] ?? NaN);
}

async function untilClaimWaiters(t: TestServer, n: number): Promise<void> {
  await until(`${n} parked long-poll claims`, async () => (await claimWaiters(t)) === n);
}

function grpcClient(t: TestServer): Client<typeof LeaseQueueService> {
  return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
}

/** Pauses `queue`, lets `open` register a claimer, submits a job, and proves it stays queued. */
async function submitWhilePaused(t: TestServer, queue: string, open: () => Promise<void>): Promise<string> {
  const paused = await ok(t, "PauseQueue", { queue });
  expect(paused.stats).toMatchObject({ queue, paused: true });
  await open();
  const jobId = await submit(t, queue);
  await barrier(t);
  expect(await stateOf(t, jobId)).toBe("JOB_STATE_QUEUED");
  expect(await ok(t, "Claim", { queue, workerId: "plain-claim" })).toEqual({});
  expect(await stateOf(t, jobId)).toBe("JOB_STATE_QUEUED");
  return jobId;
}

describe("a paused queue", () => {
  it("leases nothing to a long-polling Claim, which gets the job as soon as the queue is resumed", async () => {
    const t = await server();
    let pending: Promise<{ status: number; body: any }> | undefined;
    const jobId = await submitWhilePaused(t, "lp", async () => {
      pending = t.call("Claim", { queue: "lp", workerId: "long-poller", wait: "60s" });
      await untilClaimWaiters(t, 1);
    });
    // Woken by the submit, the claim found nothing and parked again.
    await untilClaimWaiters(t, 1);
    const resumed = await ok(t, "ResumeQueue", { queue: "lp" });
    expect(resumed.stats).toMatchObject({ queue: "lp", queued: "1" });
    expect(resumed.stats.paused).toBeUndefined(); // false: left out of proto3 JSON
    const claimed = await pending!;
    expect(claimed.body.leases.map((l: any) => l.job.id)).toEqual([jobId]);
  });

  it("leases nothing on StreamClaims, and pushes the job to the waiting stream when resumed", async () => {
    const t = await server();
    const abort = new AbortController();
    cleanups.push(() => abort.abort());
    const stream = t.client.streamClaims({ queue: "sc", workerId: "streamer" }, { signal: abort.signal })[Symbol.asyncIterator]();
    const jobId = await submitWhilePaused(t, "sc", async () => {
      expect((await stream.next()).value?.lease).toBeUndefined(); // registered
    });
    const next = (async () => {
      for (;;) {
        const m = await stream.next();
        if (m.done) throw new Error("stream ended");
        if (m.value.lease !== undefined) return m.value.lease;
      }
    })();
    await ok(t, "ResumeQueue", { queue: "sc" });
    expect((await next).job?.id).toBe(jobId);
  });

  it("leases nothing on Work, and sends the job on the open stream when resumed", async () => {
    const t = await server();
    const abort = new AbortController();
    cleanups.push(() => abort.abort());
    async function* requests(): AsyncGenerator<Partial<WorkRequest>> {
      yield { start: { queue: "work", workerId: "worker-w", maxInFlight: 5 } as WorkRequest["start"] };
      await new Promise((resolve) => abort.signal.addEventListener("abort", resolve));
    }
    const work = grpcClient(t)
      .work(requests() as AsyncIterable<WorkRequest>, { signal: abort.signal })
      [Symbol.asyncIterator]();
    const jobId = await submitWhilePaused(t, "work", async () => {
      expect((await work.next()).value?.leases).toEqual([]); // registered
    });
    const next = (async () => {
      for (;;) {
        const m = await work.next();
        if (m.done) throw new Error("stream ended");
        if (m.value.leases.length > 0) return m.value.leases;
      }
    })();
    await ok(t, "ResumeQueue", { queue: "work" });
    expect((await next).map((l) => l.job?.id)).toEqual([jobId]);
  });

  it("gives the SDK worker nothing, and its handler runs the job once the queue is resumed", async () => {
    const t = await server();
    const log = workerEventLog();
    const ran: string[] = [];
    const worker = createWorker({
      url: t.apiUrl,
      queue: "sdk",
      workerId: "sdk-worker",
      onEvent: log.onEvent,
      handler(job) {
        ran.push(job.id);
        return { ok: true };
      },
    });
    cleanups.push(() => worker.close());
    const jobId = await submitWhilePaused(t, "sdk", async () => {
      await log.waitFor("connected");
    });
    expect(log.all("lease")).toEqual([]);
    await ok(t, "ResumeQueue", { queue: "sdk" });
    await log.waitFor("completed");
    expect(ran).toEqual([jobId]);
    expect(await stateOf(t, jobId)).toBe("JOB_STATE_COMPLETED");
  });

  it("keeps accepting submits, and only its own leases stop: other queues and running leases go on", async () => {
    const t = await server();
    await submit(t, "mixed");
    const [running] = (await ok(t, "Claim", { queue: "mixed", workerId: "w" })).leases;
    await ok(t, "PauseQueue", { queue: "mixed" });
    const waiting = await submit(t, "mixed");
    expect(await ok(t, "Claim", { queue: "mixed", workerId: "w" })).toEqual({});
    const other = await submit(t, "unpaused");
    expect((await ok(t, "Claim", { queue: "unpaused", workerId: "w" })).leases[0].job.id).toBe(other);
    await ok(t, "Heartbeat", { jobId: running.job.id, leaseToken: running.leaseToken });
    await ok(t, "Complete", { jobId: running.job.id, leaseToken: running.leaseToken });
    expect(await stateOf(t, waiting)).toBe("JOB_STATE_QUEUED");
  });

  it("stays paused across a restart, with or without jobs, and resumes after it", async () => {
    const t = await startTestServer();
    // Reversed: runs after `again` closed (it drops the database).
    cleanups.push(() => t.close());
    const jobId = await submit(t, "durable");
    await ok(t, "PauseQueue", { queue: "durable" });
    await ok(t, "PauseQueue", { queue: "empty" });
    await t.server.close();

    const again = await startServer(t.config, { log: silentLogger });
    cleanups.push(() => again.close());
    const client = createClient(LeaseQueueService, createConnectTransport({ baseUrl: again.apiUrl, httpVersion: "1.1" }));
    const stats = await client.getStats({});
    expect(stats.queues.map((q) => [q.queue, q.paused, q.queued])).toEqual([
      ["durable", true, 1n],
      ["empty", true, 0n],
    ]);
    expect((await client.claim({ queue: "durable", workerId: "w" })).leases).toEqual([]);
    const metrics = await (await fetch(`${again.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^leasequeue_queue_paused\{queue="durable"\} 1$/m);
    expect(metrics).toMatch(/^leasequeue_queue_paused\{queue="empty"\} 1$/m);
    await client.resumeQueue({ queue: "durable" });
    expect((await client.claim({ queue: "durable", workerId: "w" })).leases.map((l) => l.job?.id)).toEqual([jobId]);
  });
});

describe("GetStats and metrics", () => {
  it("list a paused queue that has no jobs, and follow pause and resume", async () => {
    const t = await server();
    await submit(t, "busy");
    const paused = await ok(t, "PauseQueue", { queue: "quiet" });
    expect(paused.stats).toEqual({ queue: "quiet", oldestPendingAge: "0s", paused: true });
    await ok(t, "PauseQueue", { queue: "busy" });
    const stats = await ok(t, "GetStats", {});
    expect(stats.queues.map((q: any) => [q.queue, q.paused ?? false])).toEqual([
      ["busy", true],
      ["quiet", true],
    ]);
    expect(stats.total.paused).toBeUndefined();
    const scrape = async () => (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(await scrape()).toMatch(/^leasequeue_queue_paused\{queue="busy"\} 1$/m);
    await ok(t, "ResumeQueue", { queue: "busy" });
    await ok(t, "ResumeQueue", { queue: "quiet" });
    const after = await scrape();
    expect(after).toMatch(/^leasequeue_queue_paused\{queue="busy"\} 0$/m);
    expect(after).not.toMatch(/queue="quiet"/);
    expect((await ok(t, "GetStats", {})).queues.map((q: any) => q.queue)).toEqual(["busy"]);
  });
});

describe("RedriveAll", () => {
  /** `n` dead jobs of `task`, made through the server's own store (fast) rather than n RPCs. */
  async function deadJobs(t: TestServer, queue: string, task: string, n: number): Promise<void> {
    const store = t.server.store;
    for (let done = 0; done < n; done += 500) {
      const count = Math.min(500, n - done);
      await store.submit(Array.from({ length: count }, () => newJob({ queue, task, maxAttempts: 1 })));
      const leases = await claimLeases(store, { queue, workerId: "w", leaseDurationMs: 60_000, maxJobs: count });
      expect(leases).toHaveLength(count);
      await Promise.all(leases.map((l) => store.fail(l.job.id, l.leaseToken, { error: "boom", permanent: true })));
    }
  }

  async function counts(t: TestServer, queue: string) {
    const q = (await ok(t, "GetStats", {})).queues.find((x: any) => x.queue === queue) ?? {};
    return { queued: Number(q.queued ?? 0), dead: Number(q.dead ?? 0) };
  }

  it("redrives every dead job over several batches and reports the exact count", async () => {
    const t = await server();
    const n = 2 * BULK_BATCH_JOBS + 37;
    await deadJobs(t, "backlog", "a", n);
    await deadJobs(t, "elsewhere", "a", 3);
    expect(await ok(t, "RedriveAll", { queue: "backlog" })).toEqual({ redriven: String(n) });
    expect(await counts(t, "backlog")).toEqual({ queued: n, dead: 0 });
    expect(await counts(t, "elsewhere")).toEqual({ queued: 0, dead: 3 });
    expect(await ok(t, "RedriveAll", { queue: "backlog" })).toEqual({}); // 0, left out of proto3 JSON
  });

  it("redrives only the given task, at most `limit` jobs", async () => {
    const t = await server();
    await deadJobs(t, "mixed", "a", BULK_BATCH_JOBS + 10);
    await deadJobs(t, "mixed", "b", 20);
    expect(await ok(t, "RedriveAll", { queue: "mixed", task: "b", limit: 15 })).toEqual({ redriven: "15" });
    expect(await ok(t, "RedriveAll", { queue: "mixed", task: "b" })).toEqual({ redriven: "5" });
    expect(await counts(t, "mixed")).toEqual({ queued: 20, dead: BULK_BATCH_JOBS + 10 });
    expect(await ok(t, "RedriveAll", { queue: "mixed", limit: BULK_BATCH_JOBS + 1 })).toEqual({ redriven: String(BULK_BATCH_JOBS + 1) });
    expect(await counts(t, "mixed")).toEqual({ queued: BULK_BATCH_JOBS + 21, dead: 9 });
    expect(await ok(t, "RedriveAll", { queue: "never-used" })).toEqual({});
  });
});

describe("PurgeQueue", () => {
  it("refuses a confirm that is not the queue name with failed_precondition, and cancels nothing", async () => {
    const t = await server();
    const jobId = await submit(t, "billing");
    for (const confirm of [undefined, "", "Billing", "billing "]) {
      const res = await t.call("PurgeQueue", { queue: "billing", confirm });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("failed_precondition");
      expect(res.body.message).toMatch(/^confirm: must equal the queue name "billing"/);
      expect(res.body.details[0]).toMatchObject({
        type: "google.rpc.ErrorInfo",
        debug: { reason: "PURGE_NOT_CONFIRMED", domain: "leasequeue", metadata: { field: "confirm", queue: "billing" } },
      });
    }
    expect(await stateOf(t, jobId)).toBe("JOB_STATE_QUEUED");
  });

  it('cancels every queued and retrying job with reason "purged" over several batches, and reports the exact count', async () => {
    const t = await server();
    const store = t.server.store;
    const queued = BULK_BATCH_JOBS + 250;
    await store.submit(Array.from({ length: 4 }, () => newJob({ queue: "purge", task: "r" })));
    const leases = await claimLeases(store, { queue: "purge", workerId: "w", leaseDurationMs: 60_000, maxJobs: 4 });
    const [running, ...retrying] = leases;
    for (const l of retrying) await store.fail(l.job.id, l.leaseToken, { error: "later", permanent: false });
    await store.submit(Array.from({ length: 500 }, () => newJob({ queue: "purge", task: "q" })));
    await store.submit(Array.from({ length: queued - 500 }, () => newJob({ queue: "purge", task: "q" })));
    await submit(t, "kept");
    expect(await ok(t, "PurgeQueue", { queue: "purge", confirm: "purge" })).toEqual({ cancelled: String(queued + 3) });
    const q = (await ok(t, "GetStats", {})).queues.find((x: any) => x.queue === "purge");
    expect(q).toMatchObject({ running: "1", cancelled: String(queued + 3) });
    expect(q.queued).toBeUndefined();
    expect(q.retry).toBeUndefined();
    expect(await stateOf(t, running.job.id)).toBe("JOB_STATE_RUNNING");
    const events = (await ok(t, "ListJobEvents", { jobId: retrying[0].job.id })).events;
    expect(events.at(-1)).toMatchObject({ kind: "EVENT_KIND_CANCELLED", fromState: "JOB_STATE_RETRY", message: "purged" });
    expect((await ok(t, "GetStats", {})).queues.find((x: any) => x.queue === "kept").queued).toBe("1");
  });
});

describe("bad input", () => {
  async function refusedField(t: TestServer, method: string, body: unknown, field: string): Promise<string> {
    const res = await t.call(method, body);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.code, JSON.stringify(res.body)).toBe("invalid_argument");
    expect(res.body.details?.[0], JSON.stringify(res.body)).toBeDefined();
    expect(res.body.details[0].debug.fieldViolations[0].field).toBe(field);
    expect(res.body.message).toMatch(new RegExp(`^${field}: `));
    return res.body.message as string;
  }

  it("refuses missing and malformed queue names on every control, naming the field", async () => {
    const t = await server();
    for (const method of ["PauseQueue", "ResumeQueue", "RedriveAll", "PurgeQueue"]) {
      expect(await refusedField(t, method, {}, "queue")).toBe("queue: is required");
      for (const queue of ["bad name", "-starts-with-dash", "x".repeat(65), "ünïcode"]) {
        const body = method === "PurgeQueue" ? { queue, confirm: queue } : { queue };
        expect(await refusedField(t, method, body, "queue")).toMatch(/1-64 characters/);
      }
    }
    // Nothing was paused by the refused calls.
    expect((await ok(t, "GetStats", {})).queues).toBeUndefined();
  });

  it("refuses a malformed task and a negative limit on RedriveAll", async () => {
    const t = await server();
    await refusedField(t, "RedriveAll", { queue: "q", task: "a/b" }, "task");
    expect(await refusedField(t, "RedriveAll", { queue: "q", limit: -1 }, "limit")).toBe("limit: must not be negative (0 means all)");
  });
});
