/**
 * StreamClaims against a real server: pushed leases, the in-flight cap,
 * wake-ups without polling, fair sharing, expiry and redelivery, shutdown,
 * and both the Connect and an independent gRPC client.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { Lease, StreamClaimsResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ManualClock } from "../../src/testing/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function server(options: Parameters<typeof startTestServer>[1] = {}) {
  const t = await startTestServer({}, options);
  servers.push(t);
  return t;
}

/** A stream opened with the typed Connect client, read message by message. */
function openStream(t: TestServer, req: { queue: string; workerId: string; maxInFlight?: number; leaseDuration?: { seconds: bigint } }) {
  const abort = new AbortController();
  const it = t.client.streamClaims(req, { signal: abort.signal })[Symbol.asyncIterator]();
  return {
    abort,
    /** Next message, keepalives included. */
    async next(): Promise<StreamClaimsResponse> {
      const r = await it.next();
      if (r.done) throw new Error("stream ended");
      return r.value;
    },
    /** Next lease, skipping keepalives. */
    async lease(): Promise<Lease> {
      for (;;) {
        const m = await this.next();
        if (m.lease !== undefined) return m.lease;
      }
    },
  };
}

async function submitMany(t: TestServer, queue: string, n: number) {
  const res = await t.call("SubmitBatch", { jobs: Array.from({ length: n }, (_, i) => ({ queue, task: `t${i}` })) });
  expect(res.status).toBe(200);
}

async function stats(t: TestServer, queue: string) {
  const res = await t.call("GetStats", {});
  const q = res.body.queues.find((x: any) => x.queue === queue) ?? {};
  return { queued: Number(q.queued ?? 0), running: Number(q.running ?? 0), completed: Number(q.completed ?? 0) };
}

describe("StreamClaims", () => {
  it("sends a keepalive first, so a subscriber knows it is registered (and counted)", async () => {
    const t = await server();
    const s = openStream(t, { queue: "first", workerId: "w" });
    expect((await s.next()).lease).toBeUndefined();
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^leasequeue_claim_streams 1$/m);
    s.abort.abort();
  });

  it("pushes a job submitted to an idle queue to the waiting stream at once", async () => {
    const t = await server();
    const s = openStream(t, { queue: "idle", workerId: "w-idle" });
    await s.next(); // registered
    const { body } = await t.call("Submit", { queue: "idle", task: "t", payload: { n: 1 } });
    const lease = await s.lease();
    expect(lease.job?.id).toBe(body.job.id);
    expect(lease.job?.workerId).toBe("w-idle");
    expect(lease.leaseToken.length).toBeGreaterThan(20);
    s.abort.abort();
  });

  it("never has more than max_in_flight unfinished leases, and refills as they finish", async () => {
    const t = await server();
    await submitMany(t, "cap", 12);
    const s = openStream(t, { queue: "cap", workerId: "w", maxInFlight: 3 });
    const held: Lease[] = [await s.lease(), await s.lease(), await s.lease()];
    // The stream is full: nothing more was claimed for it.
    expect(await stats(t, "cap")).toEqual({ queued: 9, running: 3, completed: 0 });
    let delivered = 3;
    while (held.length > 0) {
      const lease = held.shift()!;
      await t.client.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken });
      if (delivered < 12) {
        held.push(await s.lease());
        delivered++;
      }
      expect((await stats(t, "cap")).running).toBeLessThanOrEqual(3);
    }
    expect(await stats(t, "cap")).toEqual({ queued: 0, running: 0, completed: 12 });
    s.abort.abort();
  });

  it("counts a failed lease as finished", async () => {
    const t = await server();
    await submitMany(t, "fails", 2);
    const s = openStream(t, { queue: "fails", workerId: "w", maxInFlight: 1 });
    const first = await s.lease();
    await t.client.fail({ jobId: first.job!.id, leaseToken: first.leaseToken, error: "boom", permanent: true });
    const second = await s.lease();
    expect(second.job!.id).not.toBe(first.job!.id);
    s.abort.abort();
  });

  it("shares one queue fairly between streams: the one that just got work goes to the back of the ring", async () => {
    const t = await server();
    const streams = {
      a: openStream(t, { queue: "fair", workerId: "a", maxInFlight: 10 }),
      b: openStream(t, { queue: "fair", workerId: "b", maxInFlight: 10 }),
    };
    await Promise.all([streams.a.next(), streams.b.next()]);
    // One job at a time, each submitted once the last one arrived: every
    // claim finds both streams with room, and the ring alone decides.
    type Name = keyof typeof streams;
    const read = (name: Name): Promise<Name> => streams[name].lease().then(() => name);
    const next: Record<Name, Promise<Name>> = { a: read("a"), b: read("b") };
    const order: Name[] = [];
    for (let i = 0; i < 10; i++) {
      await t.call("Submit", { queue: "fair", task: `t${i}` });
      const who = await Promise.race([next.a, next.b]);
      order.push(who);
      next[who] = read(who);
    }
    const first = order[0];
    const second = first === "a" ? "b" : "a";
    expect(order).toEqual(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? first : second)));
    expect(await stats(t, "fair")).toEqual({ queued: 0, running: 10, completed: 0 });
    // The reads still waiting end with the streams.
    for (const waiting of [next.a, next.b]) waiting.catch(() => undefined);
    streams.a.abort.abort();
    streams.b.abort.abort();
  });

  it("delivers a killed worker's job exactly once more after its lease expires", async () => {
    // The lease expires when the test moves the server's clock; the sweep (every 100 ms) then recovers it.
    const clock = new ManualClock();
    const t = await server({ clock, sweepIntervalMs: 100 });
    const crashed = openStream(t, { queue: "crash", workerId: "crashed", leaseDuration: { seconds: 1n } });
    await crashed.next();
    const { body } = await t.call("Submit", { queue: "crash", task: "t" });
    const lost = await crashed.lease();
    crashed.abort.abort(); // the worker dies mid-job

    const survivor = openStream(t, { queue: "crash", workerId: "survivor", maxInFlight: 5 });
    await survivor.next(); // registered: the job is still the crashed worker's
    clock.advance(1000);
    const again = await survivor.lease();
    expect(again.job).toMatchObject({ id: body.job.id, deliveries: 2, attempts: 2, workerId: "survivor" });
    await t.client.complete({ jobId: again.job!.id, leaseToken: again.leaseToken });
    await expect(t.client.complete({ jobId: lost.job!.id, leaseToken: lost.leaseToken })).rejects.toMatchObject({
      code: Code.Aborted,
    });
    const events = await t.client.listJobEvents({ jobId: body.job.id });
    expect(events.events.map((e) => e.kind)).toEqual([1, 2, 7, 2, 4]); // SUBMITTED CLAIMED LEASE_EXPIRED CLAIMED COMPLETED
    survivor.abort.abort();
  });

  it("wakes for a delayed job when its time comes", async () => {
    const t = await server();
    const s = openStream(t, { queue: "later", workerId: "w" });
    await s.next();
    const { body } = await t.call("Submit", { queue: "later", task: "t", delay: "0.3s" });
    expect((await s.lease()).job!.id).toBe(body.job.id);
    s.abort.abort();
  });

  it("sends keepalives while idle", async () => {
    const t = await server({ claimKeepaliveMs: 50 });
    const s = openStream(t, { queue: "quiet", workerId: "w" });
    for (let i = 0; i < 3; i++) expect((await s.next()).lease).toBeUndefined();
    s.abort.abort();
  });

  it("ends with unavailable when the server shuts down, leaving its leases owned", async () => {
    const t = await startTestServer();
    const s = openStream(t, { queue: "bye", workerId: "w" });
    await s.next();
    await t.call("Submit", { queue: "bye", task: "t" });
    const lease = await s.lease();
    const ended = s.next().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    await t.server.close();
    expect((await ended)?.code).toBe(Code.Unavailable);
    // Reopen the same database: the lease is still the worker's.
    const again = await startTestServer(t.databaseFlags);
    // Closed in this order: the first server's close drops its database.
    servers.push(again, t);
    const job = await again.client.getJob({ jobId: lease.job!.id });
    expect(job.job).toMatchObject({ workerId: "w", state: 2 });
    const done = await again.client.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken });
    expect(done.job?.state).toBe(4);
  });

  it("is driven by @grpc/grpc-js as a plain server stream", async () => {
    const t = await server();
    const def = protoLoader.loadSync("leasequeue/v1/leasequeue.proto", {
      includeDirs: [fileURLToPath(new URL("../../proto", import.meta.url))],
      longs: String,
      enums: String,
    });
    const pkg = grpc.loadPackageDefinition(def) as any;
    const client = new pkg.leasequeue.v1.LeaseQueueService(new URL(t.apiUrl).host, grpc.credentials.createInsecure());
    const call = client.streamClaims({ queue: "grpcjs", workerId: "grpc-worker", maxInFlight: 2 });
    const leases: any[] = [];
    const twoLeases = new Promise<void>((resolve, reject) => {
      call.on("data", (m: any) => {
        if (m.lease) leases.push(m.lease);
        if (leases.length === 2) resolve();
      });
      call.on("error", (e: grpc.ServiceError) => (e.code === grpc.status.CANCELLED ? undefined : reject(e)));
    });
    const firstMessage = new Promise((resolve) => call.once("data", resolve));
    await firstMessage;
    await submitMany(t, "grpcjs", 3);
    await twoLeases;
    expect(leases.map((l) => l.job.workerId)).toEqual(["grpc-worker", "grpc-worker"]);
    expect(await stats(t, "grpcjs")).toEqual({ queued: 1, running: 2, completed: 0 });
    call.cancel();
    client.close();
  });

  it("refuses bad requests before streaming", async () => {
    const t = await server();
    const s = openStream(t, { queue: "x", workerId: "w", maxInFlight: 1001 });
    await expect(s.next()).rejects.toMatchObject({ code: Code.InvalidArgument });
  });
});
