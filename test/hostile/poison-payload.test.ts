/**
 * Hostile payloads: nesting and size at the edge of docs/api.md "Bounds", and
 * a job no client could decode.
 *
 * 1. Every job the server accepts can be read and leased by every client
 *    family: protobuf-es (connect-node gRPC, Connect binary on HTTP/2 and
 *    HTTP/1.1, Connect JSON as the console uses, and the worker SDK),
 *    @grpc/grpc-js (protobufjs, stubs loaded from proto/), and Python grpcio
 *    (C++ protobuf, 100 nested messages at most). Payloads and results nested
 *    32 levels (arrays and objects, also with 64 KiB at the bottom) and near
 *    64 KiB go through GetJob, ListJobs, Claim and StreamClaims.
 * 2. A job stored before the bound existed (written here through the store,
 *    bypassing validation) that no binary client can decode is never sent:
 *    its lease is dead-lettered with a last_error saying why, its neighbours
 *    in the same Claim or on the same stream are delivered, and the stream
 *    stays open.
 */
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import Database from "better-sqlite3";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, LeaseQueueService, type Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { createWorker, type WorkerEvent } from "../../src/worker/index.js";
import { REPO_ROOT, requireTool, run, skipUnlessAvailable, works } from "../external/tools.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const KIB64 = 64 * 1024;
const PYTHON = "/usr/bin/python3";
const pythonAvailable = await works(PYTHON, ["-c", "import grpc, google.protobuf"]);

/** `levels` arrays or objects around `leaf`. */
function nested(kind: "array" | "object", levels: number, leaf: JsonValue = 1): JsonValue {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = kind === "array" ? [value] : { k: value };
  return value;
}

function bytesOf(value: JsonValue): number {
  return Buffer.byteLength(JSON.stringify(value), "utf8");
}

/** `value` with its `pad` string grown until the whole is exactly 64 KiB. */
function exactly64KiB(value: { pad: string } & Record<string, JsonValue>): JsonValue {
  return { ...value, pad: "p".repeat(KIB64 - bytesOf(value)) };
}

/** The deepest and largest values docs/api.md "Bounds" accepts. `{"k":` and `}` cost 6 bytes a level, the quotes 2. */
const FIXTURES: Record<string, JsonValue> = {
  deepArray: nested("array", 32),
  // 30 objects, the leaf object and its empty array: 32 levels.
  deepObject: nested("object", 30, { s: "leaf", n: -1.5, b: true, z: null, e: [] }),
  deepAndBig: nested("object", 32, "x".repeat(KIB64 - 32 * 6 - 2)),
  wide: exactly64KiB({ items: Array.from({ length: 2600 }, (_, i) => ({ i, v: "abcdef" })), pad: "" }),
  utf8: "é".repeat(KIB64 / 2 - 1),
};

type Contents = { payload: JsonValue; result: JsonValue };
/** What a client decoded: job id -> payload and result, per RPC. */
interface Decoded {
  getJob: Record<string, Contents>;
  listJobs: Record<string, Contents>;
  claim: Record<string, Contents>;
  stream: Record<string, Contents>;
}

let s: TestServer;
/** Completed jobs with a fixture as payload and result: read with GetJob and ListJobs. */
const readJobs: Record<string, Contents> = {};

async function ok(method: string, body: unknown): Promise<any> {
  const res = await s.call(method, body);
  expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200);
  return res.body;
}

/** One job per fixture on `queue`; returns id -> contents as a fresh lease carries them. */
async function fill(queue: string): Promise<Record<string, Contents>> {
  const out: Record<string, Contents> = {};
  for (const payload of Object.values(FIXTURES)) {
    const { job } = await ok("Submit", { queue, task: "t", payload });
    out[job.id] = { payload, result: null };
  }
  return out;
}

function valueJson(v: Value | undefined): JsonValue {
  return v === undefined ? null : toJson(ValueSchema, v);
}

function contentsOf(job: Job | undefined): Contents {
  return { payload: valueJson(job?.payload), result: valueJson(job?.result) };
}

beforeAll(async () => {
  for (const [name, value] of Object.entries(FIXTURES)) {
    expect(bytesOf(value), name).toBeLessThanOrEqual(KIB64);
    expect(bytesOf(value), name).toBeGreaterThan(name.startsWith("deep") && name !== "deepAndBig" ? 0 : KIB64 - 100);
  }
  s = await startTestServer();
  for (const payload of Object.values(FIXTURES)) {
    const { job } = await ok("Submit", { queue: "read", task: "t", payload });
    const { leases } = await ok("Claim", { queue: "read", workerId: "filler" });
    expect(leases[0].job.id).toBe(job.id);
    await ok("Complete", { jobId: job.id, leaseToken: leases[0].leaseToken, result: payload });
    readJobs[job.id] = { payload, result: payload };
  }
}, 60_000);

afterAll(async () => {
  await s?.close();
});

describe("every job the server accepts decodes in every client", () => {
  const protobufEs: [string, () => Client<typeof LeaseQueueService>][] = [
    ["connect-node gRPC", () => createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }))],
    [
      "Connect binary, HTTP/2",
      () => createClient(LeaseQueueService, createConnectTransport({ baseUrl: s.apiUrl, httpVersion: "2", useBinaryFormat: true })),
    ],
    [
      "Connect binary, HTTP/1.1",
      () => createClient(LeaseQueueService, createConnectTransport({ baseUrl: s.apiUrl, httpVersion: "1.1", useBinaryFormat: true })),
    ],
    ["Connect JSON, HTTP/1.1", () => s.client],
  ];

  it.each(protobufEs)("protobuf-es over %s: GetJob, ListJobs, Claim and StreamClaims", async (name, makeClient) => {
    const client = makeClient();
    const queue = name.replace(/[^A-Za-z0-9]+/g, "-");
    const claimable = await fill(`claim-${queue}`);
    const streamable = await fill(`stream-${queue}`);
    const got: Decoded = { getJob: {}, listJobs: {}, claim: {}, stream: {} };

    for (const id of Object.keys(readJobs)) got.getJob[id] = contentsOf((await client.getJob({ jobId: id })).job);
    let pageToken = "";
    do {
      const page = await client.listJobs({ queue: "read", pageSize: 2, pageToken });
      for (const job of page.jobs) got.listJobs[job.id] = contentsOf(job);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");

    const { leases } = await client.claim({ queue: `claim-${queue}`, workerId: "decoder", maxJobs: 100 });
    const stream = new AbortController();
    for await (const m of client.streamClaims(
      { queue: `stream-${queue}`, workerId: "decoder", maxInFlight: 100 },
      { signal: stream.signal },
    )) {
      if (m.lease === undefined) continue;
      leases.push(m.lease);
      got.stream[m.lease.job!.id] = contentsOf(m.lease.job);
      if (Object.keys(got.stream).length === Object.keys(streamable).length) break;
    }
    stream.abort();
    for (const l of leases) {
      if (!(l.job!.id in got.stream)) got.claim[l.job!.id] = contentsOf(l.job);
      await client.complete({ jobId: l.job!.id, leaseToken: l.leaseToken });
    }

    expect(got).toEqual({ getJob: readJobs, listJobs: readJobs, claim: claimable, stream: streamable });
  });

  it("the worker SDK (gRPC) runs each of them and completes it with the same value as its result", async () => {
    const jobs = await fill("sdk");
    let resolveAll!: () => void;
    const allDone = new Promise<void>((r) => (resolveAll = r));
    const completed = new Set<string>();
    const problems: WorkerEvent[] = [];
    const worker = createWorker({
      url: s.apiUrl,
      queue: "sdk",
      workerId: "sdk-decoder",
      concurrency: 8,
      handler: (_job, { payload }) => payload,
      onEvent: (e) => {
        if (e.type === "error" || e.type === "disconnected" || e.type === "lease-lost") problems.push(e);
        if (e.type === "completed") completed.add(e.job.id);
        if (completed.size === Object.keys(jobs).length) resolveAll();
      },
    });
    await allDone;
    await worker.close();
    expect(problems).toEqual([]);
    for (const [id, { payload }] of Object.entries(jobs)) {
      const { job } = await ok("GetJob", { jobId: id });
      expect(job.state).toBe("JOB_STATE_COMPLETED");
      expect({ payload: job.payload, result: job.result }).toEqual({ payload, result: payload });
    }
  });

  it("@grpc/grpc-js (protobufjs): GetJob, ListJobs, Claim and StreamClaims", async () => {
    const def = protoLoader.loadSync(["leasequeue/v1/leasequeue.proto"], {
      includeDirs: [fileURLToPath(new URL("../../proto", import.meta.url))],
      longs: String,
      enums: String,
      defaults: false,
      oneofs: true,
    });
    const pkg = grpc.loadPackageDefinition(def) as any;
    const client = new pkg.leasequeue.v1.LeaseQueueService(new URL(s.apiUrl).host, grpc.credentials.createInsecure());
    const call = (method: string, req: object): Promise<any> =>
      new Promise((resolve, reject) => client[method](req, (err: Error | null, res: any) => (err ? reject(err) : resolve(res))));
    const plain = (v: any): JsonValue => {
      if (v === undefined || v === null) return null;
      switch (v.kind) {
        case "nullValue":
          return null;
        case "numberValue":
          return v.numberValue;
        case "stringValue":
          return v.stringValue;
        case "boolValue":
          return v.boolValue;
        case "listValue":
          return (v.listValue.values ?? []).map(plain);
        case "structValue":
          return Object.fromEntries(Object.entries(v.structValue.fields ?? {}).map(([k, x]) => [k, plain(x)]));
        default:
          throw new Error(`not a Value: ${JSON.stringify(v).slice(0, 200)}`);
      }
    };
    const contents = (job: any): Contents => ({ payload: plain(job.payload), result: plain(job.result) });
    try {
      const claimable = await fill("claim-grpc-js");
      const streamable = await fill("stream-grpc-js");
      const got: Decoded = { getJob: {}, listJobs: {}, claim: {}, stream: {} };
      for (const id of Object.keys(readJobs)) got.getJob[id] = contents((await call("getJob", { jobId: id })).job);
      let pageToken = "";
      do {
        const page = await call("listJobs", { queue: "read", pageSize: 2, pageToken });
        for (const job of page.jobs ?? []) got.listJobs[job.id] = contents(job);
        pageToken = page.nextPageToken ?? "";
      } while (pageToken !== "");
      const { leases = [] } = await call("claim", { queue: "claim-grpc-js", workerId: "decoder", maxJobs: 100 });
      for (const l of leases) got.claim[l.job.id] = contents(l.job);
      const streamed = await new Promise<any[]>((resolve, reject) => {
        const out: any[] = [];
        const stream = client.streamClaims({ queue: "stream-grpc-js", workerId: "decoder", maxInFlight: 100 });
        stream.on("data", (m: any) => {
          if (m.lease === undefined || m.lease === null) return;
          out.push(m.lease);
          if (out.length === Object.keys(streamable).length) {
            stream.cancel();
            resolve(out);
          }
        });
        stream.on("error", (err: grpc.ServiceError) => {
          if (err.code !== grpc.status.CANCELLED) reject(err);
        });
      });
      for (const l of streamed) got.stream[l.job.id] = contents(l.job);
      for (const l of [...leases, ...streamed]) await call("complete", { jobId: l.job.id, leaseToken: l.leaseToken });
      expect(got).toEqual({ getJob: readJobs, listJobs: readJobs, claim: claimable, stream: streamable });
    } finally {
      client.close();
    }
  });

  describe.skipIf(skipUnlessAvailable(pythonAvailable))("Python grpcio", () => {
    it("GetJob, ListJobs, Claim and StreamClaims", async () => {
      requireTool(pythonAvailable, "python3-grpcio and python3-protobuf (/usr/bin/python3)");
      const claimable = await fill("claim-python");
      const streamable = await fill("stream-python");
      const plan = {
        getJobs: Object.keys(readJobs),
        listQueue: "read",
        claimQueue: "claim-python",
        streamQueue: "stream-python",
        streamCount: Object.keys(streamable).length,
      };
      const res = await run(
        PYTHON,
        [join(REPO_ROOT, "test/hostile/python_decode.py"), new URL(s.apiUrl).host, join(REPO_ROOT, "gen/python")],
        {
          cwd: REPO_ROOT,
          input: JSON.stringify(plan),
          env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1", PYTHONPATH: "" },
        },
      );
      expect(res.code, res.stderr).toBe(0);
      expect(JSON.parse(res.stdout)).toEqual({ getJob: readJobs, listJobs: readJobs, claim: claimable, stream: streamable });
    }, 60_000);
  });
});

describe("a stored job that no binary client could decode", () => {
  /** Writes a job as an old database might hold it: straight through the store, no validation. */
  async function storeLegacy(queue: string, payloadJson: string, priority = 0): Promise<string> {
    const [outcome] = await s.server.store.submit([
      {
        queue,
        task: "legacy",
        groupKey: "",
        payloadJson,
        priority,
        maxAttempts: 3,
        retryBaseDelayMs: 0,
        schedule: null,
        idempotencyKey: null,
        traceContext: null,
      },
    ]);
    return outcome.job.id;
  }

  const deep60 = (kind: "array" | "object") => JSON.stringify(nested(kind, 60));

  /** Read through the store: GetJob of a damaged row is not what is tested here. */
  async function expectDeadLettered(id: string, problem: RegExp): Promise<void> {
    const job = await s.server.store.getJob(id);
    expect(job?.state).toBe("dead");
    expect(job?.lastError).toMatch(problem);
    expect(job?.workerId).toBeNull();
    const { events } = await ok("ListJobEvents", { jobId: id });
    expect(events.map((e: any) => e.kind)).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED", "EVENT_KIND_DEAD_LETTERED"]);
    expect(events[2].message).toMatch(problem);
  }

  const grpcClient = () => createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }));

  it("a unary Claim returns its neighbours and dead-letters it, never leaving it RUNNING", async () => {
    const before = await storeLegacy("poison-claim", '{"n":1}');
    const poison = await storeLegacy("poison-claim", deep60("array"), 10);
    const after = await storeLegacy("poison-claim", '{"n":2}', -10);
    const { leases } = await grpcClient().claim({ queue: "poison-claim", workerId: "w", maxJobs: 10 });
    expect(leases.map((l) => l.job!.id)).toEqual([before, after]);
    await expectDeadLettered(poison, /^payload cannot be encoded for delivery to a worker: it is nested more than 32 levels deep/);
  });

  it("a Claim for one job skips to the next eligible job in the same call", async () => {
    const poison = await storeLegacy("poison-one", deep60("object"), 10);
    const healthy = await storeLegacy("poison-one", '"fine"');
    const { leases } = await grpcClient().claim({ queue: "poison-one", workerId: "w", maxJobs: 1 });
    expect(leases.map((l) => l.job!.id)).toEqual([healthy]);
    await expectDeadLettered(poison, /payload cannot be encoded .* more than 32 levels/);
  });

  it("stored JSON that cannot be read, or a lease over gRPC's 4 MiB, is dead-lettered the same way", async () => {
    const unreadable = await storeLegacy("poison-other", '"placeholder"', 10);
    const huge = await storeLegacy("poison-other", JSON.stringify("h".repeat(4 * 1024 * 1024)), 5);
    const healthy = await storeLegacy("poison-other", "1");
    const db = new Database(s.config.databasePath);
    try {
      db.prepare("UPDATE jobs SET payload = ? WHERE id = ?").run("{not json", unreadable);
    } finally {
      db.close();
    }
    const { leases } = await grpcClient().claim({ queue: "poison-other", workerId: "w", maxJobs: 10 });
    expect(leases.map((l) => l.job!.id)).toEqual([healthy]);
    await expectDeadLettered(unreadable, /cannot be encoded for delivery to a worker: its stored payload or result cannot be read/);
    await expectDeadLettered(huge, /cannot be encoded for delivery to a worker: the lease is \d+ bytes/);
  });

  it.each(["grpc", "connect"] as const)(
    "the SDK (%s, on its lease stream): the stream never breaks, the healthy jobs around it complete, none expires",
    async (transport) => {
      const queue = `poison-stream-${transport}`;
      const healthy = [await storeLegacy(queue, '{"n":1}', 20), await storeLegacy(queue, '{"n":2}')];
      const poison = await storeLegacy(queue, deep60("object"), 10);
      healthy.push(await storeLegacy(queue, '{"n":3}', -10));
      const events: WorkerEvent[] = [];
      let resolveAll!: () => void;
      const allDone = new Promise<void>((r) => (resolveAll = r));
      const completed = new Set<string>();
      const worker = createWorker({
        url: s.apiUrl,
        transport,
        queue,
        workerId: "poison-neighbour",
        concurrency: 4,
        leaseDuration: 5000,
        handler: (_job, { payload }) => payload,
        onEvent: (e) => {
          events.push(e);
          if (e.type === "completed") completed.add(e.job.id);
          if (completed.size === healthy.length) resolveAll();
        },
      });
      await allDone;
      await worker.close();
      expect(events.filter((e) => e.type === "connected")).toHaveLength(1);
      expect(events.filter((e) => ["disconnected", "error", "lease-lost"].includes(e.type))).toEqual([]);
      expect([...completed].sort()).toEqual([...healthy].sort());
      await expectDeadLettered(poison, /payload cannot be encoded .* more than 32 levels/);
      for (const id of healthy) {
        const { events: timeline } = await ok("ListJobEvents", { jobId: id });
        expect(timeline.map((e: any) => e.kind)).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED", "EVENT_KIND_COMPLETED"]);
      }
    },
  );

  it("a raw stream goes on after it: the next job submitted reaches the same stream", async () => {
    const client = grpcClient();
    const stream = new AbortController();
    const poison = await storeLegacy("poison-raw", deep60("array"));
    const messages = client
      .streamClaims({ queue: "poison-raw", workerId: "raw", maxInFlight: 1 }, { signal: stream.signal })
      [Symbol.asyncIterator]();
    expect((await messages.next()).value?.lease).toBeUndefined(); // the first keepalive: registered
    const { job } = await ok("Submit", { queue: "poison-raw", task: "t", payload: nested("array", 32) });
    let lease;
    while (lease === undefined) lease = (await messages.next()).value?.lease;
    expect(lease.job?.id).toBe(job.id);
    expect(lease.job?.state).toBe(JobState.RUNNING);
    stream.abort();
    await expectDeadLettered(poison, /more than 32 levels/);
    const { events } = await ok("ListJobEvents", { jobId: poison });
    expect(events.some((e: any) => e.kind === "EVENT_KIND_LEASE_EXPIRED")).toBe(false);
  });
});
