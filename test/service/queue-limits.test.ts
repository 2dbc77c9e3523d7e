/**
 * Queue limits (docs/api.md "Queue limits", UpdateQueue and
 * QueueStats.config) against a real server: the mask semantics, the limits on
 * every lease path (Claim, long-poll Claim, StreamClaims, Work), a waiting
 * claimer woken the moment a place frees, the limits across a restart, the
 * metrics, and bad input over Connect JSON and gRPC, each refusal naming its
 * field.
 *
 * The server runs on a ManualClock where a rate window has to move; a
 * window of 60 s that never moves proves the rate limit without waiting.
 */
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/app.js";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { LeaseQueueService, type WorkRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(clock?: ManualClock): Promise<TestServer> {
  const t = await startTestServer({}, clock === undefined ? {} : { clock });
  cleanups.push(() => t.close());
  return t;
}

async function ok(t: TestServer, method: string, body: unknown) {
  const res = await t.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

async function submit(t: TestServer, queue: string, n = 1): Promise<string[]> {
  const { results } = await ok(t, "SubmitBatch", { jobs: Array.from({ length: n }, (_, i) => ({ queue, task: `t${i}` })) });
  return results.map((r: any) => r.job.id as string);
}

async function claim(t: TestServer, queue: string, maxJobs: number, workerId = "w"): Promise<any[]> {
  return (await ok(t, "Claim", { queue, workerId, maxJobs })).leases ?? [];
}

function grpcClient(t: TestServer): Client<typeof LeaseQueueService> {
  return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
}

async function scrape(t: TestServer): Promise<string> {
  return (await fetch(`${t.metricsUrl}/metrics`)).text();
}

/** Resolves once the server counted `n` claims of `queue` held back by `limit` (the claimer is then parked). */
async function heldBack(t: TestServer, queue: string, limit: string, n = 1): Promise<void> {
  const line = new RegExp(`^leasequeue_queue_limited_claims_total\\{queue="${queue}",limit="${limit}"\\} (\\d+)$`, "m");
  await until(`${n} claims of ${queue} held back by ${limit}`, async () => Number(line.exec(await scrape(t))?.[1] ?? 0) >= n);
}

describe("UpdateQueue", () => {
  it("sets the fields the mask names, answers the queue's limits, and shows them in GetStats", async () => {
    const t = await server(new ManualClock());
    expect(await ok(t, "UpdateQueue", { queue: "api", config: { maxRunning: 5, rateLimit: 100, ratePeriod: "60s" } })).toEqual({
      config: { maxRunning: 5, rateLimit: 100, ratePeriod: "60s" },
    });
    expect(await ok(t, "UpdateQueue", { queue: "api", config: { maxRunning: 2, rateLimit: 7 }, updateMask: "maxRunning" })).toEqual({
      config: { maxRunning: 2, rateLimit: 100, ratePeriod: "60s" },
    });
    expect(
      await ok(t, "UpdateQueue", { queue: "api", config: { rateLimit: 9, ratePeriod: "2s" }, updateMask: "rateLimit,ratePeriod" }),
    ).toEqual({ config: { maxRunning: 2, rateLimit: 9, ratePeriod: "2s" } });
    expect(await ok(t, "UpdateQueue", { queue: "api", config: { maxRunning: 3 }, updateMask: "*" })).toEqual({
      config: { maxRunning: 3, ratePeriod: "1s" },
    });
    await submit(t, "other");
    const stats = await ok(t, "GetStats", {});
    // A configured queue is listed without jobs and shows its config; a queue without limits and the total have none.
    expect(stats.queues).toEqual([
      { queue: "api", oldestPendingAge: "0s", config: { maxRunning: 3, ratePeriod: "1s" } },
      { queue: "other", queued: "1", oldestPendingAge: "0s" },
    ]);
    expect(stats.total.config).toBeUndefined();
    // No config and no mask: every limit goes, and so does the listing.
    expect(await ok(t, "UpdateQueue", { queue: "api" })).toEqual({});
    expect((await ok(t, "GetStats", {})).queues.map((q: any) => q.queue)).toEqual(["other"]);
    const paused = await ok(t, "PauseQueue", { queue: "other" });
    expect(paused.stats.config).toBeUndefined();
  });

  it("shows no config for a queue without limits, and shows it again only while a limit is set", async () => {
    const t = await server(new ManualClock());
    const bare = (q: Record<string, unknown>) => expect(Object.keys(q)).not.toContain("config");
    await submit(t, "fresh");
    const fresh = await ok(t, "GetStats", {});
    expect(fresh.queues).toEqual([{ queue: "fresh", queued: "1", oldestPendingAge: "0s" }]);
    bare(fresh.queues[0]);
    bare(fresh.total);
    bare((await ok(t, "PauseQueue", { queue: "fresh" })).stats);
    bare((await ok(t, "ResumeQueue", { queue: "fresh" })).stats);

    // Only the period: still no limit, so still no config.
    expect(await ok(t, "UpdateQueue", { queue: "fresh", config: { ratePeriod: "60s" } })).toEqual({});
    bare((await ok(t, "GetStats", {})).queues[0]);

    expect(await ok(t, "UpdateQueue", { queue: "fresh", config: { rateLimit: 10, ratePeriod: "60s" } })).toEqual({
      config: { rateLimit: 10, ratePeriod: "60s" },
    });
    expect((await ok(t, "GetStats", {})).queues[0].config).toEqual({ rateLimit: 10, ratePeriod: "60s" });

    expect(await ok(t, "UpdateQueue", { queue: "fresh", config: { rateLimit: 0 }, updateMask: "rateLimit" })).toEqual({});
    const removed = await ok(t, "GetStats", {});
    expect(removed.queues).toEqual([{ queue: "fresh", queued: "1", oldestPendingAge: "0s" }]);
    bare(removed.queues[0]);
  });

  it("keeps its limits across a restart", async () => {
    const t = await startTestServer();
    // Runs after the restarted server closed (cleanups run in reverse): it drops the database.
    cleanups.push(() => t.close());
    await submit(t, "durable", 4);
    await ok(t, "UpdateQueue", { queue: "durable", config: { maxRunning: 2, rateLimit: 3, ratePeriod: "3600s" } });
    expect(await claim(t, "durable", 1)).toHaveLength(1);
    await t.server.close();

    const again = await startServer(t.config, { log: silentLogger });
    cleanups.push(() => again.close());
    const client = createClient(LeaseQueueService, createConnectTransport({ baseUrl: again.apiUrl, httpVersion: "1.1" }));
    const [stats] = (await client.getStats({})).queues;
    expect(stats.config).toMatchObject({ maxRunning: 2, rateLimit: 3, ratePeriod: { seconds: 3600n } });
    expect((await client.claim({ queue: "durable", workerId: "w", maxJobs: 4 })).leases).toHaveLength(1);
    expect((await client.claim({ queue: "durable", workerId: "w", maxJobs: 4 })).leases).toHaveLength(0);
  });
});

describe("limits on every lease path", () => {
  it("Claim hands out no more than max_running, and the rate limit holds within its window", async () => {
    const t = await server();
    await submit(t, "capped", 10);
    await ok(t, "UpdateQueue", { queue: "capped", config: { maxRunning: 3 } });
    const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => claim(t, "capped", 2, `w${i}`)));
    expect(claims.flat()).toHaveLength(3);

    await submit(t, "rated", 10);
    await ok(t, "UpdateQueue", { queue: "rated", config: { rateLimit: 4, ratePeriod: "60s" } });
    expect(await claim(t, "rated", 3)).toHaveLength(3);
    const [lease] = await claim(t, "rated", 3);
    await ok(t, "Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken });
    expect(await claim(t, "rated", 3)).toEqual([]);
  });

  it("a long-polling Claim held back by max_running gets the next job as soon as a lease of the queue finishes", async () => {
    const t = await server();
    await submit(t, "lp", 2);
    await ok(t, "UpdateQueue", { queue: "lp", config: { maxRunning: 1 } });
    const [running] = await claim(t, "lp", 1, "busy");
    const pending = t.call("Claim", { queue: "lp", workerId: "long-poller", wait: "60s" });
    await heldBack(t, "lp", "max_running");
    await ok(t, "Fail", { jobId: running.job.id, leaseToken: running.leaseToken, error: "boom", permanent: true });
    const { body } = await pending;
    expect(body.leases).toHaveLength(1);
    expect(body.leases[0].job.id).not.toBe(running.job.id);
  });

  it("a long-polling Claim held back by the rate limit gets the next job when the window moves", async () => {
    const clock = new ManualClock(Date.now());
    const t = await server(clock);
    await submit(t, "tick", 2);
    await ok(t, "UpdateQueue", { queue: "tick", config: { rateLimit: 1, ratePeriod: "1s" } });
    expect(await claim(t, "tick", 1)).toHaveLength(1);
    const pending = t.call("Claim", { queue: "tick", workerId: "long-poller", wait: "60s" });
    await heldBack(t, "tick", "rate_limit");
    // The server's timer is armed for the moment the window frees a place (1 s of real time).
    clock.advance(1000);
    expect((await pending).body.leases).toHaveLength(1);
  });

  it("StreamClaims gets no more than max_running, and the next job once another worker's lease finishes", async () => {
    const t = await server();
    await submit(t, "sc", 3);
    await ok(t, "UpdateQueue", { queue: "sc", config: { maxRunning: 2 } });
    const [elsewhere] = await claim(t, "sc", 1, "elsewhere");
    const abort = new AbortController();
    cleanups.push(() => abort.abort());
    const stream = t.client
      .streamClaims({ queue: "sc", workerId: "streamer", maxInFlight: 5 }, { signal: abort.signal })
      [Symbol.asyncIterator]();
    const nextLease = async () => {
      for (;;) {
        const m = await stream.next();
        if (m.done) throw new Error("stream ended");
        if (m.value.lease !== undefined) return m.value.lease;
      }
    };
    const first = await nextLease();
    await heldBack(t, "sc", "max_running");
    const second = nextLease();
    await ok(t, "Complete", { jobId: elsewhere.job.id, leaseToken: elsewhere.leaseToken });
    expect([first.job?.id, (await second).job?.id]).not.toContain(elsewhere.job.id);
    expect((await ok(t, "GetStats", {})).queues[0]).toMatchObject({ running: "2", completed: "1" });
  });

  it("Work gets no more than the rate limit allows, and more at once when the limit is raised", async () => {
    const t = await server();
    await submit(t, "work", 5);
    await ok(t, "UpdateQueue", { queue: "work", config: { rateLimit: 2, ratePeriod: "3600s" } });
    const abort = new AbortController();
    cleanups.push(() => abort.abort());
    async function* requests(): AsyncGenerator<Partial<WorkRequest>> {
      yield { start: { queue: "work", workerId: "worker-w", maxInFlight: 10 } as WorkRequest["start"] };
      await new Promise((resolve) => abort.signal.addEventListener("abort", resolve));
    }
    const work = grpcClient(t)
      .work(requests() as AsyncIterable<WorkRequest>, { signal: abort.signal })
      [Symbol.asyncIterator]();
    const received: string[] = [];
    const receive = async (n: number) => {
      while (received.length < n) {
        const m = await work.next();
        if (m.done) throw new Error("stream ended");
        for (const l of m.value.leases) received.push(l.job!.id);
      }
    };
    await receive(2);
    await heldBack(t, "work", "rate_limit");
    expect((await ok(t, "GetStats", {})).queues[0]).toMatchObject({ queued: "3", running: "2" });
    await ok(t, "UpdateQueue", { queue: "work", config: { rateLimit: 5 }, updateMask: "rateLimit" });
    await receive(5);
    expect(new Set(received).size).toBe(5);
  });
});

describe("metrics", () => {
  it("count claims held back by each limit, and show each queue's limits", async () => {
    const t = await server();
    await submit(t, "m", 3);
    await ok(t, "UpdateQueue", { queue: "m", config: { maxRunning: 1, rateLimit: 30, ratePeriod: "60s" } });
    await claim(t, "m", 2);
    await claim(t, "m", 2);
    const text = await scrape(t);
    expect(text).toMatch(/^leasequeue_queue_limited_claims_total\{queue="m",limit="max_running"\} 2$/m);
    expect(text).toMatch(/^leasequeue_queue_max_running\{queue="m"\} 1$/m);
    expect(text).toMatch(/^leasequeue_queue_rate_limit_per_second\{queue="m"\} 0.5$/m);
  });
});

describe("bad input", () => {
  async function refusedField(t: TestServer, body: unknown, field: string): Promise<string> {
    const res = await t.call("UpdateQueue", body);
    const context = JSON.stringify(res.body);
    expect(res.status, context).toBe(400);
    expect(res.body.code, context).toBe("invalid_argument");
    expect(res.body.details?.[0]?.debug?.fieldViolations?.[0]?.field, context).toBe(field);
    expect(res.body.message).toMatch(new RegExp(`^${field.replace(".", "\\.")}: `));
    return res.body.message as string;
  }

  it("refuses a missing or malformed queue, out-of-bounds limits and unknown mask paths over Connect JSON, naming the field", async () => {
    const t = await server();
    expect(await refusedField(t, {}, "queue")).toBe("queue: is required");
    await refusedField(t, { queue: "bad name" }, "queue");
    for (const maxRunning of [-1, 100_001]) {
      expect(await refusedField(t, { queue: "q", config: { maxRunning } }, "config.max_running")).toMatch(/between 0 and 100000/);
    }
    for (const rateLimit of [-1, 1_000_001]) {
      expect(await refusedField(t, { queue: "q", config: { rateLimit } }, "config.rate_limit")).toMatch(/between 0 and 1000000/);
    }
    for (const ratePeriod of ["0s", "0.5s", "86401s", "-1s"]) {
      await refusedField(t, { queue: "q", config: { rateLimit: 1, ratePeriod } }, "config.rate_period");
    }
    expect(await refusedField(t, { queue: "q", config: { maxRunning: 1 }, updateMask: "maxRunning,paused" }, "update_mask")).toMatch(
      /"paused".*max_running, rate_limit, rate_period/,
    );
    await refusedField(t, { queue: "q", updateMask: "config.maxRunning" }, "update_mask");
    // snake_case is not proto3 JSON for a FieldMask: the decoder refuses it.
    const snake = await t.call("UpdateQueue", { queue: "q", updateMask: "max_running" });
    expect([snake.status, snake.body.code]).toEqual([400, "invalid_argument"]);
    // Nothing was configured by the refused calls.
    expect((await ok(t, "GetStats", {})).queues).toBeUndefined();
  });

  it("ignores fields the mask leaves out, whatever they hold", async () => {
    const t = await server();
    expect(await ok(t, "UpdateQueue", { queue: "q", config: { maxRunning: 4, rateLimit: -5 }, updateMask: "maxRunning" })).toEqual({
      config: { maxRunning: 4, ratePeriod: "1s" },
    });
  });

  it("refuses the same over gRPC, with a BadRequest naming the field", async () => {
    const t = await server();
    const client = grpcClient(t);
    async function refused(call: Promise<unknown>, field: string): Promise<void> {
      const err = await call.then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err, `expected ${field} to be refused`).toBeInstanceOf(ConnectError);
      expect(err!.code, err!.message).toBe(Code.InvalidArgument);
      expect(err!.rawMessage).toMatch(new RegExp(`^${field.replace(".", "\\.")}: `));
      expect(err!.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations.map((v) => v.field))).toEqual([field]);
    }
    const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });
    await refused(client.updateQueue({ queue: "" }), "queue");
    await refused(client.updateQueue({ queue: "q", config: { maxRunning: -3 } }), "config.max_running");
    await refused(client.updateQueue({ queue: "q", config: { rateLimit: 2_000_000 } }), "config.rate_limit");
    await refused(
      client.updateQueue({ queue: "q", config: { rateLimit: 1, ratePeriod: { seconds: 0n, nanos: 999_000_000 } } }),
      "config.rate_period",
    );
    // Binary masks carry field names as they are in the proto: camelCase is an unknown path.
    await refused(client.updateQueue({ queue: "q", config: { maxRunning: 1 }, updateMask: mask("maxRunning") }), "update_mask");
    const answered = await client.updateQueue({ queue: "q", config: { maxRunning: 1, rateLimit: 8 }, updateMask: mask("rate_limit") });
    expect(answered.config).toMatchObject({ maxRunning: 0, rateLimit: 8, ratePeriod: { seconds: 1n, nanos: 0 } });
  });
});
