/**
 * The Work stream (docs/api.md "The batched path: Acknowledge and Work")
 * against a real server, over gRPC (HTTP/2): start rules, leases in batches
 * within max_in_flight, results in arrival order, keepalives,
 * acknowledgements of leases from elsewhere, and the end of the stream
 * releasing what was claimed but not sent.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import {
  LeaseQueueService,
  WorkRequestSchema,
  type Lease,
  type WorkRequest,
  type WorkResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function server(options: Parameters<typeof startTestServer>[1] = {}) {
  const t = await startTestServer({}, options);
  servers.push(t);
  return { t, grpc: createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl })) };
}

/** An open Work stream: `send` pushes request messages, `next` reads responses. */
function openWork(client: Client<typeof LeaseQueueService>) {
  const queued: WorkRequest[] = [];
  let wake: (() => void) | undefined;
  let ended = false;
  const abort = new AbortController();
  async function* requests(): AsyncGenerator<WorkRequest> {
    for (;;) {
      const m = queued.shift();
      if (m !== undefined) {
        yield m;
        continue;
      }
      if (ended) return;
      await new Promise<void>((r) => (wake = r));
    }
  }
  const it = client.work(requests(), { signal: abort.signal })[Symbol.asyncIterator]();
  return {
    abort,
    send(init: Parameters<typeof create<typeof WorkRequestSchema>>[1]) {
      queued.push(create(WorkRequestSchema, init));
      wake?.();
    },
    end() {
      ended = true;
      wake?.();
    },
    async next(): Promise<WorkResponse | undefined> {
      const r = await it.next();
      return r.done ? undefined : r.value;
    },
    /** Reads until `n` leases arrived (keepalives and results skipped). */
    async leases(n: number): Promise<Lease[]> {
      const out: Lease[] = [];
      while (out.length < n) {
        const m = await this.next();
        if (m === undefined) throw new Error("stream ended");
        out.push(...m.leases);
      }
      return out;
    },
  };
}

async function submit(t: TestServer, queue: string, n: number): Promise<string[]> {
  const res = await t.call("SubmitBatch", {
    jobs: Array.from({ length: n }, (_, i) => ({ queue, task: "t", payload: { i } })),
    view: "JOB_VIEW_BASIC",
  });
  expect(res.status).toBe(200);
  return res.body.results.map((r: any) => r.job.id);
}

async function stats(t: TestServer, queue: string) {
  const q = (await t.call("GetStats", {})).body.queues.find((x: any) => x.queue === queue) ?? {};
  return { queued: Number(q.queued ?? 0), running: Number(q.running ?? 0), completed: Number(q.completed ?? 0) };
}

/** Open StreamClaims and Work streams, as the server counts them. */
async function claimStreams(t: TestServer): Promise<number> {
  const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  return Number(/^leasequeue_claim_streams (\d+)$/m.exec(text)?.[1] ?? NaN);
}

describe("Work", () => {
  it("answers the first message with an empty response, then sends leases many per message within max_in_flight", async () => {
    const { t, grpc } = await server();
    await submit(t, "batches", 30);
    const w = openWork(grpc);
    w.send({ start: { queue: "batches", workerId: "w1", maxInFlight: 20 } });
    const first = await w.next();
    expect(first?.leases).toHaveLength(0);
    expect(first?.results).toHaveLength(0);
    const leases = await w.leases(20);
    expect(leases).toHaveLength(20);
    expect(new Set(leases.map((l) => l.job!.id)).size).toBe(20);
    expect(leases.every((l) => l.job!.workerId === "w1" && l.leaseToken.length > 20)).toBe(true);
    expect((await stats(t, "batches")).running).toBe(20);

    // Acknowledging makes room: the next leases come in the same or the following response.
    w.send({
      acks: leases.slice(0, 5).map((l) => ({ jobId: l.job!.id, leaseToken: l.leaseToken, outcome: { case: "complete", value: {} } })),
    });
    const results = [];
    const more: Lease[] = [];
    while (results.length < 5 || more.length < 5) {
      const m = await w.next();
      results.push(...m!.results);
      more.push(...m!.leases);
    }
    expect(results.map((r) => r.jobId)).toEqual(leases.slice(0, 5).map((l) => l.job!.id));
    expect(results.every((r) => r.status?.code === 0)).toBe(true);
    expect(more).toHaveLength(5);
    expect((await stats(t, "batches")).running).toBe(20);
    w.abort.abort();
  });

  it("answers refusals on their own, in arrival order, and keeps the stream open", async () => {
    const { t, grpc } = await server();
    await submit(t, "refusals", 2);
    const w = openWork(grpc);
    w.send({ start: { queue: "refusals", workerId: "w1", maxInFlight: 2 } });
    const [a, b] = await w.leases(2);
    w.send({ acks: [{ jobId: a.job!.id, leaseToken: "stale", outcome: { case: "complete", value: {} } }] });
    w.send({
      acks: [
        { jobId: a.job!.id, leaseToken: a.leaseToken, outcome: { case: "heartbeat", value: {} } },
        { jobId: b.job!.id, leaseToken: b.leaseToken, outcome: { case: "fail", value: { error: "no", permanent: true } } },
      ],
    });
    const results = [];
    while (results.length < 3) results.push(...(await w.next())!.results);
    expect(results.map((r) => r.status?.code)).toEqual([Code.Aborted, 0, 0]);
    expect(results[1].leaseExpireTime).toBeDefined();
    expect((await t.call("GetJob", { jobId: b.job!.id })).body.job.state).toBe("JOB_STATE_DEAD");
    w.abort.abort();
  });

  it("refuses a stream whose first message has no start, and a second start", async () => {
    const { grpc } = await server();
    const noStart = openWork(grpc);
    noStart.send({ acks: [] });
    await expect(noStart.next()).rejects.toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringMatching(/^start:/) });

    const twice = openWork(grpc);
    twice.send({ start: { queue: "q", workerId: "w" } });
    await twice.next();
    twice.send({ start: { queue: "q", workerId: "w" } });
    await expect(twice.next()).rejects.toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringMatching(/^start:/) });

    const bad = openWork(grpc);
    bad.send({ start: { queue: "q", workerId: "", maxInFlight: 2000 } });
    await expect(bad.next()).rejects.toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringMatching(/^start\.worker_id:/) });

    const badAck = openWork(grpc);
    badAck.send({ start: { queue: "q", workerId: "w" } });
    await badAck.next();
    badAck.send({ acks: [{ jobId: "x", leaseToken: "t", outcome: { case: "release", value: {} } }] });
    await expect(badAck.next()).rejects.toMatchObject({
      code: Code.InvalidArgument,
      rawMessage: expect.stringMatching(/^acks\[0\]\.job_id:/),
    });
  });

  it("counts a lease finished through Acknowledge or Complete, and acknowledges leases of another stream", async () => {
    const { t, grpc } = await server();
    await submit(t, "elsewhere", 3);
    const w = openWork(grpc);
    w.send({ start: { queue: "elsewhere", workerId: "w1", maxInFlight: 1 } });
    const [first] = await w.leases(1);
    const completed = await t.call("Complete", { jobId: first.job!.id, leaseToken: first.leaseToken });
    expect(completed.status).toBe(200);
    const [second] = await w.leases(1); // room came back through the unary call
    expect(second.job!.id).not.toBe(first.job!.id);

    // A lease handed out by Claim, acknowledged on this stream.
    await submit(t, "other", 1);
    const claimed = (await t.call("Claim", { queue: "other", workerId: "w2" })).body.leases[0];
    w.send({ acks: [{ jobId: claimed.job.id, leaseToken: claimed.leaseToken, outcome: { case: "complete", value: {} } }] });
    let result;
    while (result === undefined) result = (await w.next())!.results[0];
    expect(result.status?.code).toBe(0);
    expect((await t.call("GetJob", { jobId: claimed.job.id })).body.job.state).toBe("JOB_STATE_COMPLETED");
    w.abort.abort();
  });

  it("sends keepalives while idle", async () => {
    const { grpc } = await server({ claimKeepaliveMs: 50 });
    const w = openWork(grpc);
    w.send({ start: { queue: "idle", workerId: "w" } });
    for (let i = 0; i < 3; i++) {
      const m = await w.next();
      expect(m?.leases).toHaveLength(0);
    }
    w.abort.abort();
  });

  it("ends when the client half-closes, after sending every result; sent leases stay with the worker", async () => {
    const { t, grpc } = await server();
    await submit(t, "drain", 4);
    const w = openWork(grpc);
    w.send({ start: { queue: "drain", workerId: "w", maxInFlight: 4 } });
    const leases = await w.leases(4);
    w.send({ acks: [{ jobId: leases[0].job!.id, leaseToken: leases[0].leaseToken, outcome: { case: "complete", value: {} } }] });
    w.end();
    const results = [];
    for (;;) {
      const m = await w.next();
      if (m === undefined) break;
      results.push(...m.results);
    }
    expect(results).toHaveLength(1);
    const s = await stats(t, "drain");
    expect(s).toMatchObject({ completed: 1, running: 3 });
    // The worker still owns the other three and may acknowledge them elsewhere.
    const ack = await t.call("Acknowledge", {
      acks: leases.slice(1).map((l) => ({ jobId: l.job!.id, leaseToken: l.leaseToken, complete: {} })),
    });
    expect(ack.body.results.every((r: any) => (r.status.code ?? 0) === 0)).toBe(true);
  });

  it("releases leases claimed for a stream that ended before sending them", async () => {
    const { t, grpc } = await server();
    // The claims the server's pump has issued and not seen answered: once the
    // stream is gone none can start for it, so none left means none to come.
    const store = t.server.store;
    const claimOutcome = store.claimOutcome.bind(store);
    let claiming = 0;
    store.claimOutcome = async (spec) => {
      claiming++;
      try {
        return await claimOutcome(spec);
      } finally {
        claiming--;
      }
    };
    const w = openWork(grpc);
    w.send({ start: { queue: "gone", workerId: "w", maxInFlight: 50 } });
    await w.next();
    w.abort.abort();
    await submit(t, "gone", 10);
    // Whatever the stream's pump claimed before noticing the end goes back.
    // Settled, for good, once (in this order) the server counts no stream,
    // no claim is running, and the ten jobs are queued: a claim that ended
    // before the last look has its release committed before the jobs read
    // as queued.
    await until("the stream gone, no claim running and the ten jobs queued", async () => {
      if ((await claimStreams(t)) !== 0 || claiming !== 0) return false;
      const s = await stats(t, "gone");
      return s.queued === 10 && s.running === 0;
    });
  });

  it("dead-letters a lease no client could decode and sends its neighbours", async () => {
    const { t, grpc } = await server();
    // A job stored before the nesting bound existed (written past validation).
    const deep = "[".repeat(60) + "1" + "]".repeat(60);
    const base = {
      queue: "poison-work",
      task: "t",
      groupKey: "",
      priority: 0,
      maxAttempts: 3,
      retryBaseDelayMs: 1000,
      schedule: null,
      idempotencyKey: null,
      traceContext: null,
    };
    const [poison, healthy] = await t.server.store.submit([
      { ...base, payloadJson: deep },
      { ...base, payloadJson: '{"ok":1}' },
    ]);
    const w = openWork(grpc);
    w.send({ start: { queue: "poison-work", workerId: "w", maxInFlight: 5 } });
    const [lease] = await w.leases(1);
    expect(lease.job!.id).toBe(healthy.job.id);
    const dead = (await t.call("GetJob", { jobId: poison.job.id })).body.job;
    expect(dead.state).toBe("JOB_STATE_DEAD");
    expect(dead.lastError).toMatch(/cannot be encoded for delivery to a worker/);
    w.abort.abort();
  });

  it("ends with unavailable on server shutdown", async () => {
    const { t, grpc } = await server();
    const w = openWork(grpc);
    w.send({ start: { queue: "shutdown", workerId: "w" } });
    await w.next();
    const closing = t.server.close();
    await expect(w.next()).rejects.toSatisfy((e: unknown) => e instanceof ConnectError && e.code === Code.Unavailable);
    await closing;
  });
});
