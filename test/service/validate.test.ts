/**
 * Bad input over Connect JSON (the way curl sends it), against one real
 * server: every bound of docs/api.md "Bounds", the "Defaults and identity"
 * rules and the "Errors" table. Each refusal is checked for its HTTP status,
 * its Connect code, a message naming the field, and its google.rpc detail. At
 * the end the server must still be healthy and hold exactly the jobs that
 * were accepted: no refused request leaves a half-written job behind.
 *
 * The server runs on a ManualClock, so the schedule bound (30 days ahead) is
 * tested to the millisecond and lease expiry needs no sleep.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ManualClock } from "../../src/testing/index.js";
import { assertJsonDepth, valueDepth } from "../../src/service/validate.js";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const DAY_MS = 24 * 60 * 60 * 1000;
const KIB64 = 64 * 1024;
/** Well-formed UUIDs (v7 and v4) that name no job. */
const UNKNOWN_IDS = ["0190b3c4-0000-7000-8000-000000000000", "f47ac10b-58cc-4372-a567-0e02b2c3d479"];
const NOT_UUIDS = [
  "not-a-uuid",
  "0190b3c4-0000-7000-8000-00000000000", // 35 characters
  "0190b3c4-0000-7000-8000-0000000000000", // 37 characters
  "0190b3c4000070008000000000000000", // no dashes
  "{0190b3c4-0000-7000-8000-000000000000}",
  " 0190b3c4-0000-7000-8000-000000000000",
  "0190b3c4-0000-7000-8000-00000000000g",
  "1",
];
/** Methods that take a job_id, with the other fields they need to get as far as the job lookup. */
const JOB_ID_METHODS: [method: string, extra: Record<string, unknown>][] = [
  ["GetJob", {}],
  ["Heartbeat", { leaseToken: "some-token" }],
  ["Complete", { leaseToken: "some-token" }],
  ["Fail", { leaseToken: "some-token", error: "boom" }],
  ["Release", { leaseToken: "some-token" }],
  ["Snooze", { leaseToken: "some-token" }],
  ["Redrive", {}],
  ["Cancel", {}],
  ["ListJobEvents", {}],
];

const clock = new ManualClock(Date.UTC(2026, 0, 1));
let s: TestServer;
/** Jobs this file created (not deduplicated); GetStats must count exactly these at the end. */
let created = 0;

beforeAll(async () => {
  // The sweep runs on the manual clock anyway; keep it out of the way.
  s = await startTestServer({}, { clock, sweepIntervalMs: 60_000 });
});

afterAll(async () => {
  await s?.close();
});

type Reply = { status: number; body: any };

function detail(body: any, type: string): any {
  return (body?.details ?? []).find((d: any) => d.type === type)?.debug;
}

/** 400 invalid_argument, the message names `field`, and a BadRequest names exactly `field`. */
function expectInvalid(res: Reply, field: string): void {
  const context = JSON.stringify(res.body);
  expect(res.status, context).toBe(400);
  expect(res.body.code, context).toBe("invalid_argument");
  expect(res.body.message, context).toContain(field);
  expect(detail(res.body, "google.rpc.BadRequest"), context).toEqual({
    fieldViolations: [{ field, description: expect.any(String) }],
  });
}

/** A refusal from the error table: status, code and the ErrorInfo reason in domain "leasequeue". */
function expectReason(res: Reply, status: number, code: string, reason: string): void {
  const context = JSON.stringify(res.body);
  expect(res.status, context).toBe(status);
  expect(res.body.code, context).toBe(code);
  expect(res.body.message, context).toEqual(expect.any(String));
  expect(detail(res.body, "google.rpc.ErrorInfo"), context).toMatchObject({ reason, domain: "leasequeue" });
}

/** invalid_argument from the JSON decoder (before any handler runs). */
function expectDecodeError(res: Reply, ...mentions: string[]): void {
  const context = JSON.stringify(res.body);
  expect(res.status, context).toBe(400);
  expect(res.body.code, context).toBe("invalid_argument");
  for (const m of mentions) expect(res.body.message, context).toContain(m);
}

async function ok(method: string, body: unknown, headers?: Record<string, string>): Promise<any> {
  const res = await s.call(method, body, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function submitOk(body: Record<string, unknown>, headers?: Record<string, string>): Promise<any> {
  const res = await ok("Submit", body, headers);
  if (!res.deduplicated) created++;
  return res;
}

async function submitBatchOk(jobs: Record<string, unknown>[]): Promise<any[]> {
  const res = await ok("SubmitBatch", { jobs });
  for (const r of res.results) if (!r.deduplicated) created++;
  return res.results;
}

/** Submits one job to `queue` and claims it: a running job and its lease token. */
async function runningJob(queue: string, claim: Record<string, unknown> = {}): Promise<{ id: string; token: string; lease: any }> {
  const { job } = await submitOk({ queue, task: "t" });
  const { leases } = await ok("Claim", { queue, workerId: "bad-input-worker", ...claim });
  expect(leases).toHaveLength(1);
  expect(leases[0].job.id).toBe(job.id);
  return { id: job.id, token: leases[0].leaseToken, lease: leases[0] };
}

async function totalJobs(server: TestServer = s): Promise<number> {
  const { body } = await server.call("GetStats", {});
  const t = body.total ?? {};
  return ["queued", "running", "retry", "completed", "dead", "cancelled"].reduce((n, k) => n + Number(t[k] ?? 0), 0);
}

async function queueJobs(queue: string): Promise<any[]> {
  const { jobs = [] } = await ok("ListJobs", { queue, pageSize: 500 });
  return jobs;
}

/** One message of a Connect streaming call (`application/connect+json`), and what the stream ended with. */
async function callStream(server: TestServer, method: string, json: string): Promise<{ status: number; messages: any[]; end: any }> {
  const payload = Buffer.from(json, "utf8");
  const envelope = Buffer.alloc(5 + payload.length);
  envelope.writeUInt32BE(payload.length, 1);
  payload.copy(envelope, 5);
  const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/connect+json", "connect-protocol-version": "1" },
    body: envelope,
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const messages: any[] = [];
  let end: any;
  for (let i = 0; i + 5 <= bytes.length;) {
    const flags = bytes[i];
    const length = bytes.readUInt32BE(i + 1);
    const message = JSON.parse(bytes.subarray(i + 5, i + 5 + length).toString("utf8"));
    if (flags & 0b10) end = message;
    else messages.push(message);
    i += 5 + length;
  }
  return { status: res.status, messages, end };
}

const base = { queue: "refused", task: "t" };

describe("queue and task names", () => {
  const badNames: [string, string][] = [
    ["65 characters", "q".repeat(65)],
    ["a leading dot", ".queue"],
    ["a leading dash", "-queue"],
    ["a leading colon", ":queue"],
    ["a space", "my queue"],
    ["a trailing newline", "queue\n"],
    ["a slash", "a/b"],
    ["an at sign", "a@b"],
    ["non-ASCII Latin", "qué"],
    ["CJK", "队列"],
    ["an emoji", "jobs😀"],
    ["full-width letters", "ｑｕｅｕｅ"],
    ["a zero-width space", "queue\u200b"],
    ["a NUL", "queue\u0000"],
  ];

  it.each(badNames)("Submit refuses a queue with %s", async (_, queue) => {
    expectInvalid(await s.call("Submit", { ...base, queue }), "queue");
  });

  it.each([["empty", ""], ...badNames])("Submit refuses a task that is %s", async (_, task) => {
    expectInvalid(await s.call("Submit", { ...base, task }), "task");
  });

  it.each(badNames)("Claim and ListJobs refuse a queue with %s", async (_, queue) => {
    expectInvalid(await s.call("Claim", { queue, workerId: "w" }), "queue");
    expectInvalid(await s.call("ListJobs", { queue }), "queue");
  });

  it("accepts 1 and 64 characters, every allowed punctuation, and defaults the queue to `default`", async () => {
    const long = "Q9" + "a".repeat(62);
    expect(long).toHaveLength(64);
    const a = await submitOk({ queue: long, task: long });
    expect(a.job).toMatchObject({ queue: long, task: long });
    const b = await submitOk({ queue: "A.b:c-D_e", task: "9invoice.generate:v2_x" });
    expect(b.job).toMatchObject({ queue: "A.b:c-D_e", task: "9invoice.generate:v2_x" });
    const c = await submitOk({ queue: "x", task: "y" });
    expect(c.job.queue).toBe("x");
    const d = await submitOk({ task: "t" });
    expect(d.job.queue).toBe("default");
  });
});

describe("worker_id", () => {
  it.each([
    ["empty", ""],
    ["129 characters", "w".repeat(129)],
    ["a space", "worker 1"],
    ["a hash", "worker#1"],
    ["a plus", "worker+1"],
    ["non-ASCII", "wörker"],
    ["a newline", "worker\n"],
  ])("Claim refuses a worker_id that is %s", async (_, workerId) => {
    expectInvalid(await s.call("Claim", { queue: "workers", workerId }), "worker_id");
  });

  it("is required: omitted is refused", async () => {
    expectInvalid(await s.call("Claim", { queue: "workers" }), "worker_id");
  });

  it("accepts 128 characters of [A-Za-z0-9._:@/-]", async () => {
    const workerId = "aZ09._:@/-" + "w".repeat(118);
    expect(workerId).toHaveLength(128);
    const { job } = await submitOk({ queue: "workers", task: "t" });
    const { leases } = await ok("Claim", { queue: "workers", workerId });
    expect(leases[0].job).toMatchObject({ id: job.id, workerId });
  });
});

describe("idempotency_key", () => {
  it.each([
    ["129 characters", "k".repeat(129)],
    ["a space", "order 42"],
    ["a tab", "order\t42"],
    ["non-ASCII", "commande-é"],
    ["an emoji", "key😀"],
    ["DEL (0x7f)", "key\u007f"],
  ])("Submit refuses a key with %s (field)", async (_, idempotencyKey) => {
    expectInvalid(await s.call("Submit", { ...base, idempotencyKey }), "idempotency_key");
  });

  it.each([
    ["129 characters", "k".repeat(129)],
    ["an inner space", "order 42"],
    ["non-ASCII", "commande-\u00e9"],
    ["empty", ""],
  ])("Submit refuses a key with %s (Idempotency-Key header)", async (_, key) => {
    expectInvalid(await s.call("Submit", base, { "idempotency-key": key }), "idempotency_key");
  });

  it("refuses a header and a field that differ", async () => {
    const res = await s.call("Submit", { ...base, idempotencyKey: "key-a" }, { "idempotency-key": "key-b" });
    expectInvalid(res, "idempotency_key");
  });

  it("accepts 128 visible ASCII characters, from 0x21 to 0x7e", async () => {
    const visible = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join("");
    const idempotencyKey = (visible + visible).slice(0, 128);
    const first = await submitOk({ queue: "keys", task: "t", idempotencyKey });
    expect(first.deduplicated ?? false).toBe(false);
    const again = await submitOk({ queue: "keys", task: "t", idempotencyKey });
    expect(again).toMatchObject({ deduplicated: true, job: { id: first.job.id } });
  });

  it("takes a header and field that are equal", async () => {
    const res = await submitOk({ queue: "keys", task: "t", idempotencyKey: "same-both" }, { "idempotency-key": "same-both" });
    expect(res.job.queue).toBe("keys");
  });

  it("takes the header alone, and dedups it against the field form (and back)", async () => {
    const viaHeader = await submitOk({ queue: "keys", task: "t", payload: { n: 1 } }, { "Idempotency-Key": "hdr-1" });
    expect(viaHeader.deduplicated ?? false).toBe(false);
    const viaField = await submitOk({ queue: "keys", task: "t", payload: { n: 1 }, idempotencyKey: "hdr-1" });
    expect(viaField).toMatchObject({ deduplicated: true, job: { id: viaHeader.job.id } });

    const fieldFirst = await submitOk({ queue: "keys", task: "t", idempotencyKey: "field-1" });
    const headerAfter = await submitOk({ queue: "keys", task: "t" }, { "idempotency-key": "field-1" });
    expect(headerAfter).toMatchObject({ deduplicated: true, job: { id: fieldFirst.job.id } });
  });

  it("compares the request after defaults: omitted fields equal their defaults, key order of the payload does not matter", async () => {
    const first = await submitOk({ task: "t", payload: { a: 1, b: [1, 2] }, idempotencyKey: "defaults-1" });
    const explicit = await submitOk({
      queue: "default",
      task: "t",
      payload: { b: [1, 2], a: 1 },
      priority: 0,
      maxAttempts: 3,
      retryBaseDelay: "15s",
      idempotencyKey: "defaults-1",
    });
    expect(explicit).toMatchObject({ deduplicated: true, job: { id: first.job.id } });
  });

  it("same key, different request -> already_exists IDEMPOTENCY_MISMATCH, and no second job", async () => {
    const before = await totalJobs();
    await submitOk({ queue: "keys", task: "t", payload: { n: 1 }, idempotencyKey: "mismatch-1" });
    for (const different of [{ payload: { n: 2 } }, { priority: 1 }, { maxAttempts: 4 }, { task: "u" }, { delay: "1s" }]) {
      const res = await s.call("Submit", { queue: "keys", task: "t", payload: { n: 1 }, idempotencyKey: "mismatch-1", ...different });
      expectReason(res, 409, "already_exists", "IDEMPOTENCY_MISMATCH");
    }
    const viaHeader = await s.call("Submit", { queue: "keys", task: "t", payload: { n: 3 } }, { "idempotency-key": "mismatch-1" });
    expectReason(viaHeader, 409, "already_exists", "IDEMPOTENCY_MISMATCH");
    expect(await totalJobs()).toBe(before + 1);
  });

  it("is scoped to a queue: the same key on another queue is another job", async () => {
    const a = await submitOk({ queue: "keys-a", task: "t", idempotencyKey: "scoped" });
    const b = await submitOk({ queue: "keys-b", task: "t", payload: { other: true }, idempotencyKey: "scoped" });
    expect(b.deduplicated ?? false).toBe(false);
    expect(b.job.id).not.toBe(a.job.id);
  });
});

describe("group_key", () => {
  const badKeys: [string, string][] = [
    ["129 characters", "g".repeat(129)],
    ["a space", "customer 42"],
    ["a leading space", " customer-42"],
    ["a tab", "customer\t42"],
    ["a newline", "customer-42\n"],
    ["non-ASCII", "kunde-\u00e4"],
    ["an emoji", "tenant😀"],
    ["DEL (0x7f)", "tenant\u007f"],
    ["a NUL", "tenant\u0000"],
  ];

  it.each(badKeys)("Submit refuses a group key with %s", async (_, groupKey) => {
    expectInvalid(await s.call("Submit", { ...base, groupKey }), "group_key");
  });

  it.each(badKeys)("SubmitBatch refuses a group key with %s, naming jobs[1].group_key", async (_, groupKey) => {
    expectInvalid(await s.call("SubmitBatch", { jobs: [base, { ...base, groupKey }] }), "jobs[1].group_key");
  });

  it.each(badKeys)("CreateSchedule refuses a template's group key with %s", async (_, groupKey) => {
    const schedule = { name: "grouped", cron: "@daily", template: { ...base, groupKey } };
    expectInvalid(await s.call("CreateSchedule", { schedule }), "schedule.template.group_key");
  });

  it.each(badKeys)("ListJobs refuses a group_key filter with %s", async (_, groupKey) => {
    expectInvalid(await s.call("ListJobs", { queue: "groups", groupKey }), "group_key");
  });

  it("accepts 128 visible ASCII characters, from 0x21 to 0x7e, and empty (no group)", async () => {
    const visible = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join("");
    const groupKey = (visible + visible).slice(0, 128);
    expect((await submitOk({ queue: "groups", task: "t", groupKey })).job.groupKey).toBe(groupKey);
    expect((await submitOk({ queue: "groups", task: "t", groupKey: "" })).job.groupKey).toBeUndefined();
    expect((await ok("ListJobs", { queue: "groups", groupKey })).jobs).toHaveLength(1);
  });

  it("is part of the request an idempotency key names: another group is IDEMPOTENCY_MISMATCH", async () => {
    const first = await submitOk({ queue: "groups", task: "t", groupKey: "tenant-1", idempotencyKey: "grouped-1" });
    const again = await submitOk({ queue: "groups", task: "t", groupKey: "tenant-1", idempotencyKey: "grouped-1" });
    expect(again).toMatchObject({ deduplicated: true, job: { id: first.job.id } });
    for (const groupKey of ["tenant-2", ""]) {
      const res = await s.call("Submit", { queue: "groups", task: "t", groupKey, idempotencyKey: "grouped-1" });
      expectReason(res, 409, "already_exists", "IDEMPOTENCY_MISMATCH");
    }
  });
});

describe("trace_context: W3C Trace Context, at most 512 bytes a value", () => {
  const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const badContexts: [string, Record<string, string>][] = [
    ["an unknown key", { traceparent: parent, baggage: "userId=1" }],
    ["a traceparent with upper-case hex", { traceparent: parent.toUpperCase() }],
    ["a traceparent missing its flags", { traceparent: parent.slice(0, -3) }],
    ["a traceparent of version ff", { traceparent: `ff${parent.slice(2)}` }],
    ["a version-00 traceparent with a fifth field", { traceparent: `${parent}-01` }],
    ["an all-zero trace-id", { traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01` }],
    ["an all-zero parent-id", { traceparent: `00-4bf92f3577b34da6a3ce929d0e0e4736-${"0".repeat(16)}-01` }],
    ["a tracestate alone", { tracestate: "congo=t61rcWkgMzE" }],
    ["a tracestate member without a value", { traceparent: parent, tracestate: "congo=" }],
    ["a tracestate key starting with a digit and no tenant", { traceparent: parent, tracestate: "1congo=x" }],
    ["a tracestate value with '='", { traceparent: parent, tracestate: "congo=a=b" }],
    ["33 tracestate members", { traceparent: parent, tracestate: Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",") }],
    ["a tracestate of 513 bytes", { traceparent: parent, tracestate: `k=${"v".repeat(252)},l=${"w".repeat(256)}` }],
  ];

  it.each(badContexts)("Submit refuses %s, naming trace_context", async (_, traceContext) => {
    expectInvalid(await s.call("Submit", { ...base, traceContext }), "trace_context");
  });

  it("SubmitBatch names the job, jobs[1].trace_context, and creates nothing", async () => {
    const res = await s.call("SubmitBatch", { jobs: [base, { ...base, traceContext: { traceparent: "nope" } }] });
    expectInvalid(res, "jobs[1].trace_context");
    expect(await queueJobs("refused")).toEqual([]);
  });

  it("CreateSchedule refuses a template with one: each run starts a new trace", async () => {
    const schedule = { name: "traced", cron: "@daily", template: { ...base, traceContext: { traceparent: parent } } };
    expectInvalid(await s.call("CreateSchedule", { schedule }), "schedule.template.trace_context");
  });

  it("stores the field and returns it with the job: Submit, GetJob, ListJobs (basic view too) and the lease", async () => {
    const traceContext = { traceparent: parent, tracestate: `tenant@vendor=${"x".repeat(241)},congo=t61rcWkgMzE` };
    const { job } = await submitOk({ queue: "traced", task: "t", traceContext });
    expect(job.traceContext).toEqual(traceContext);
    expect((await ok("GetJob", { jobId: job.id })).job.traceContext).toEqual(traceContext);
    expect((await ok("ListJobs", { queue: "traced", view: "JOB_VIEW_BASIC" })).jobs[0].traceContext).toEqual(traceContext);
    const { leases } = await ok("Claim", { queue: "traced", workerId: "w" });
    expect(leases[0].job.traceContext).toEqual(traceContext);
    const binary = await s.client.getJob({ jobId: job.id });
    expect(binary.job!.traceContext).toEqual(traceContext);
  });

  it("accepts a tracestate of exactly 512 bytes, 32 members, empty members, and a future traceparent version", async () => {
    const exact = `k=${"v".repeat(251)},l=${"w".repeat(256)}`;
    expect(Buffer.byteLength(exact)).toBe(512);
    for (const traceContext of [
      { traceparent: parent, tracestate: exact },
      { traceparent: parent, tracestate: Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(" , ") + ",," },
      { traceparent: `cc${parent.slice(2)}-what-comes-next` },
    ]) {
      expect((await submitOk({ queue: "traced-bounds", task: "t", traceContext })).job.traceContext).toEqual(traceContext);
    }
  });

  it("takes the call's traceparent and tracestate headers when the field is empty; the field wins over them", async () => {
    const headers = { traceparent: other, tracestate: "rojo=00f067aa0ba902b7" };
    const fromHeaders = await submitOk({ queue: "traced-headers", task: "t" }, headers);
    expect(fromHeaders.job.traceContext).toEqual(headers);
    const own = await submitOk({ queue: "traced-headers", task: "t", traceContext: { traceparent: parent } }, headers);
    expect(own.job.traceContext).toEqual({ traceparent: parent });
    const [a, b] = await submitBatchOk([
      { queue: "traced-headers", task: "a" },
      { queue: "traced-headers", task: "b", traceContext: { traceparent: parent } },
    ]).then((results) => results.map((r) => r.job.traceContext));
    expect(a).toBeUndefined(); // submitBatchOk sends no headers
    expect(b).toEqual({ traceparent: parent });
    const batch = await ok(
      "SubmitBatch",
      {
        jobs: [
          { queue: "traced-headers", task: "a" },
          { queue: "traced-headers", task: "b", traceContext: { traceparent: parent } },
        ],
      },
      headers,
    );
    created += 2;
    expect(batch.results.map((r: any) => r.job.traceContext)).toEqual([headers, { traceparent: parent }]);
  });

  it("takes the headers as gRPC metadata too (the unary gRPC path), and answers the context in binary", async () => {
    const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }));
    const headers = { traceparent: other, tracestate: "rojo=00f067aa0ba902b7" };
    const { job } = await client.submit({ queue: "traced-headers", task: "grpc" }, { headers });
    created++;
    expect(job!.traceContext).toEqual(headers);
    const { results } = await client.submitBatch({ jobs: [{ queue: "traced-headers", task: "grpc" }] }, { headers });
    created++;
    expect(results[0].job!.traceContext).toEqual(headers);
  });

  it("ignores a malformed traceparent header with its tracestate, and drops a malformed tracestate header alone", async () => {
    const ignored = await submitOk({ queue: "traced-headers", task: "t" }, { traceparent: "00-xyz", tracestate: "congo=1" });
    expect(ignored.job.traceContext).toBeUndefined();
    const dropped = await submitOk({ queue: "traced-headers", task: "t" }, { traceparent: other, tracestate: "not a list" });
    expect(dropped.job.traceContext).toEqual({ traceparent: other });
  });

  it("is not part of the request an idempotency key names: a retry with another trace gets the first job", async () => {
    const first = await submitOk({ queue: "traced", task: "t", idempotencyKey: "traced-once", traceContext: { traceparent: parent } });
    const again = await submitOk({ queue: "traced", task: "t", idempotencyKey: "traced-once", traceContext: { traceparent: other } });
    expect(again).toMatchObject({ deduplicated: true, job: { id: first.job.id, traceContext: { traceparent: parent } } });
  });
});

describe("payload and result: at most 64 KiB of compact UTF-8 JSON", () => {
  function expectTooLarge(res: Reply, field: string, bytes: number): void {
    expectInvalid(res, field);
    expect(detail(res.body, "google.rpc.ErrorInfo")).toEqual({
      reason: "PAYLOAD_TOO_LARGE",
      domain: "leasequeue",
      metadata: { field, bytes: String(bytes), limit: String(KIB64) },
    });
  }

  it("refuses a payload one byte over, counting UTF-8 bytes", async () => {
    expectTooLarge(await s.call("Submit", { ...base, payload: "x".repeat(KIB64 - 1) }), "payload", KIB64 + 1);
    // "é" is two bytes in UTF-8: 32768 of them and the quotes are 65538 bytes.
    expectTooLarge(await s.call("Submit", { ...base, payload: "é".repeat(KIB64 / 2) }), "payload", KIB64 + 2);
    const wide = { items: Array.from({ length: 3000 }, (_, i) => ({ i, v: "abcdef" })) };
    const bytes = Buffer.byteLength(JSON.stringify(wide));
    expect(bytes).toBeGreaterThan(KIB64);
    expectTooLarge(await s.call("Submit", { ...base, payload: wide }), "payload", bytes);
  });

  it("accepts exactly 64 KiB, measured compact (whitespace in the request does not count)", async () => {
    const ascii = await submitOk({ queue: "big", task: "t", payload: "x".repeat(KIB64 - 2) });
    expect(ascii.job.payload).toHaveLength(KIB64 - 2);
    const utf8 = await submitOk({ queue: "big", task: "t", payload: "é".repeat(KIB64 / 2 - 1) });
    expect(Buffer.byteLength(JSON.stringify(utf8.job.payload))).toBe(KIB64);
    // {"a":"…"} is 8 bytes plus the string; sent pretty-printed it is well over 64 KiB.
    const value = "y".repeat(KIB64 - 8);
    const pretty = `{"queue":"big","task":"t","payload":{${" ".repeat(4000)}"a"${" ".repeat(4000)}:${" ".repeat(4000)}"${value}"\n}}`;
    const res = await s.call("Submit", pretty);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    created++;
    expect(res.body.job.payload.a).toHaveLength(KIB64 - 8);
  });

  it("refuses a result one byte over on Complete, keeps the lease, and accepts exactly 64 KiB", async () => {
    const { id, token } = await runningJob("results");
    expectTooLarge(await s.call("Complete", { jobId: id, leaseToken: token, result: "r".repeat(KIB64 - 1) }), "result", KIB64 + 1);
    expect((await ok("GetJob", { jobId: id })).job.state).toBe("JOB_STATE_RUNNING");
    const done = await ok("Complete", { jobId: id, leaseToken: token, result: "r".repeat(KIB64 - 2) });
    expect(done.job.state).toBe("JOB_STATE_COMPLETED");
    expect(done.job.result).toHaveLength(KIB64 - 2);
  });

  it("refuses a payload that is not JSON-representable (Infinity) naming the field", async () => {
    expectInvalid(await s.call("Submit", `{"queue":"refused","task":"t","payload":1e400}`), "payload");
  });

  it("defaults to null", async () => {
    const { job } = await submitOk({ queue: "big", task: "t" });
    expect(job.payload).toBeNull();
  });
});

describe("payload and result: at most 32 levels of nesting (`1` is level 0, `[1]` level 1)", () => {
  /** `levels` arrays or objects around the number 1 (`1` itself when 0). */
  function nested(kind: "array" | "object", levels: number): JsonValue {
    let value: JsonValue = 1;
    for (let i = 0; i < levels; i++) value = kind === "array" ? [value] : { k: value };
    return value;
  }

  /** The same, as the google.protobuf.Value a typed client sends. */
  function nestedValue(kind: "array" | "object", levels: number): Value {
    return fromJson(ValueSchema, nested(kind, levels));
  }

  function grpcClient() {
    return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }));
  }

  /** invalid_argument over gRPC, naming `field` in the message and in a BadRequest. */
  async function expectGrpcInvalid(call: Promise<unknown>, field: string): Promise<void> {
    const err = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err, `expected ${field} to be refused`).toBeInstanceOf(ConnectError);
    expect(err!.code, err!.message).toBe(Code.InvalidArgument);
    expect(err!.rawMessage).toContain(field);
    expect(err!.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations.map((v) => v.field))).toEqual([field]);
  }

  it.each(["array", "object"] as const)(
    "Connect JSON: a %s payload of 32 levels is stored and read back whole; 33 is refused",
    async (kind) => {
      const { job } = await submitOk({ queue: "depth", task: "t", payload: nested(kind, 32) });
      expect(job.payload).toEqual(nested(kind, 32));
      expect((await ok("GetJob", { jobId: job.id })).job.payload).toEqual(nested(kind, 32));
      expectInvalid(await s.call("Submit", { ...base, payload: nested(kind, 33) }), "payload");
    },
  );

  it("counts the deepest branch, and empty containers as a level", async () => {
    // 31 levels of arrays around an empty object: 32 levels.
    await submitOk({ queue: "depth", task: "t", payload: { wide: [1, 2, 3], deep: nested("array", 30), leaf: [[{}]] } });
    let thirtyThree: JsonValue = {};
    for (let i = 0; i < 32; i++) thirtyThree = [thirtyThree];
    expectInvalid(await s.call("Submit", { ...base, payload: { shallow: 1, deep: thirtyThree } }), "payload");
  });

  it("refuses a payload nested 97 levels deep (the deepest the JSON decoder lets through)", async () => {
    expectInvalid(await s.call("Submit", { ...base, payload: nested("array", 97) }), "payload");
    expectInvalid(await s.call("Submit", { ...base, payload: nested("object", 97) }), "payload");
  });

  it("measures depth without recursion: a Value nested 200 000 levels deep is measured, not a stack overflow", () => {
    let value = create(ValueSchema, { kind: { case: "numberValue", value: 1 } });
    for (let i = 0; i < 200_000; i++) {
      value = create(
        ValueSchema,
        i % 2 === 0
          ? { kind: { case: "listValue", value: { values: [value] } } }
          : { kind: { case: "structValue", value: { fields: { k: value } } } },
      );
    }
    expect(valueDepth(value, 32)).toBe(33);
    expect(valueDepth(value, 1_000_000)).toBe(200_000);
    expect(() => assertJsonDepth("payload", value)).toThrow(/payload: is nested more than 32 levels/);
  });

  it.each(["array", "object"] as const)(
    "gRPC binary: a %s payload of 32 levels is accepted; 33 is refused naming payload",
    async (kind) => {
      const client = grpcClient();
      const { job } = await client.submit({ queue: "depth", task: "t", payload: nestedValue(kind, 32) });
      created++;
      expect(job?.payload).toBeDefined();
      await expectGrpcInvalid(client.submit({ ...base, payload: nestedValue(kind, 33) }), "payload");
      // The deepest a SubmitRequest can carry through the binary decoder.
      await expectGrpcInvalid(client.submit({ ...base, payload: nestedValue(kind, 48) }), "payload");
    },
  );

  it("SubmitBatch names the job: jobs[3].payload, and creates nothing", async () => {
    const before = await totalJobs();
    const good = { queue: "depth-batch", task: "t", payload: nested("object", 32) };
    const bad = { ...good, payload: nested("array", 33) };
    expectInvalid(await s.call("SubmitBatch", { jobs: [good, good, good, bad] }), "jobs[3].payload");
    const goodValue = { ...good, payload: nestedValue("object", 32) };
    const badValue = { ...good, payload: nestedValue("array", 33) };
    await expectGrpcInvalid(grpcClient().submitBatch({ jobs: [goodValue, goodValue, goodValue, badValue] }), "jobs[3].payload");
    expect(await queueJobs("depth-batch")).toEqual([]);
    expect(await totalJobs()).toBe(before);
  });

  it.each(["array", "object"] as const)(
    "Complete: a %s result of 32 levels completes the job; 33 is refused and keeps the lease",
    async (kind) => {
      const json = await runningJob("depth-results");
      expectInvalid(await s.call("Complete", { jobId: json.id, leaseToken: json.token, result: nested(kind, 33) }), "result");
      expect((await ok("GetJob", { jobId: json.id })).job.state).toBe("JOB_STATE_RUNNING");
      const done = await ok("Complete", { jobId: json.id, leaseToken: json.token, result: nested(kind, 32) });
      expect(done.job.result).toEqual(nested(kind, 32));

      const client = grpcClient();
      const grpc = await runningJob("depth-results");
      await expectGrpcInvalid(client.complete({ jobId: grpc.id, leaseToken: grpc.token, result: nestedValue(kind, 33) }), "result");
      expect((await ok("GetJob", { jobId: grpc.id })).job.state).toBe("JOB_STATE_RUNNING");
      const res = await client.complete({ jobId: grpc.id, leaseToken: grpc.token, result: nestedValue(kind, 32) });
      expect(res.job?.state).toBe(4 /* COMPLETED */);
    },
  );
});

describe("numbers: priority, max_attempts", () => {
  it.each([
    ["priority", { priority: -101 }],
    ["priority", { priority: 101 }],
    ["priority", { priority: -2147483648 }],
    ["priority", { priority: 2147483647 }],
    ["max_attempts", { maxAttempts: -1 }],
    ["max_attempts", { maxAttempts: 101 }],
    ["max_attempts", { maxAttempts: -2147483648 }],
  ])("Submit refuses %s out of bounds: %j", async (field, extra) => {
    expectInvalid(await s.call("Submit", { ...base, ...extra }), field);
  });

  it.each([
    [{ priority: -100 }, { priority: -100 }],
    [{ priority: 100 }, { priority: 100 }],
    [{ priority: "7" }, { priority: 7 }], // proto3 JSON also takes numbers as strings
    [{}, { maxAttempts: 3 }],
    [{ maxAttempts: 0 }, { maxAttempts: 3 }],
    [{ maxAttempts: 1 }, { maxAttempts: 1 }],
    [{ maxAttempts: 100 }, { maxAttempts: 100 }],
  ])("Submit accepts %j as %j", async (extra, expected) => {
    const { job } = await submitOk({ queue: "numbers", task: "t", ...extra });
    expect(job).toMatchObject(expected);
    if (!("priority" in expected)) expect(job.priority ?? 0).toBe(0);
  });
});

describe("durations and schedules on Submit", () => {
  it.each([
    ["retry_base_delay", { retryBaseDelay: "-1s" }],
    ["retry_base_delay", { retryBaseDelay: "-0.001s" }],
    ["retry_base_delay", { retryBaseDelay: "3601s" }],
    ["retry_base_delay", { retryBaseDelay: "3600.001s" }],
    ["retry_base_delay", { retryBaseDelay: "3600.000000001s" }],
    ["delay", { delay: "-1s" }],
    ["delay", { delay: "2592001s" }],
    ["delay", { delay: "2592000.000000001s" }],
    ["delay", { delay: "315576000000s" }],
    ["schedule_time", { scheduleTime: "9999-12-31T23:59:59Z" }],
  ])("refuses %s out of bounds: %j", async (field, extra) => {
    expectInvalid(await s.call("Submit", { ...base, ...extra }), field);
  });

  it("refuses schedule_time more than 30 days ahead, to the nanosecond", async () => {
    const limit = clock.now() + 30 * DAY_MS;
    const iso = (ms: number) => new Date(ms).toISOString();
    expectInvalid(await s.call("Submit", { ...base, scheduleTime: iso(limit + 1) }), "schedule_time");
    expectInvalid(await s.call("Submit", { ...base, scheduleTime: iso(limit).replace(".000Z", ".000000001Z") }), "schedule_time");
    expectInvalid(await s.call("Submit", { ...base, scheduleTime: iso(limit + DAY_MS) }), "schedule_time");
    const { job } = await submitOk({ queue: "schedules", task: "t", scheduleTime: iso(limit) });
    expect(Date.parse(job.scheduleTime)).toBe(limit);
  });

  it("accepts a schedule_time in the past (eligible at once)", async () => {
    const { job } = await submitOk({ queue: "schedules", task: "t", scheduleTime: "2020-01-01T00:00:00Z" });
    expect(job.scheduleTime).toBe("2020-01-01T00:00:00Z");
  });

  it.each([
    [{ retryBaseDelay: "0s" }, { retryBaseDelay: "0s" }],
    [{ retryBaseDelay: "3600s" }, { retryBaseDelay: "3600s" }],
    [{}, { retryBaseDelay: "15s" }],
  ])("accepts %j as %j (a present 0s is not the default)", async (extra, expected) => {
    const { job } = await submitOk({ queue: "schedules", task: "t", ...extra });
    expect(job).toMatchObject(expected);
  });

  it("accepts delay 0s and exactly 30 days, and no schedule means now", async () => {
    const now = clock.now();
    const zero = await submitOk({ queue: "schedules", task: "t", delay: "0s" });
    expect(Date.parse(zero.job.scheduleTime)).toBe(now);
    const max = await submitOk({ queue: "schedules", task: "t", delay: "2592000s" });
    expect(Date.parse(max.job.scheduleTime)).toBe(now + 30 * DAY_MS);
    const none = await submitOk({ queue: "schedules", task: "t" });
    expect(Date.parse(none.job.scheduleTime)).toBe(now);
    expect(none.job.createTime).toBe(none.job.scheduleTime);
  });

  it("refuses schedule_time and delay together (the oneof, in the JSON decoder)", async () => {
    const res = await s.call("Submit", { ...base, delay: "1s", scheduleTime: "2026-01-02T00:00:00Z" });
    expectDecodeError(res, "delay", "schedule_time");
  });
});

describe("Claim bounds", () => {
  it.each([
    ["lease_duration", { leaseDuration: "0s" }],
    ["lease_duration", { leaseDuration: "0.5s" }],
    ["lease_duration", { leaseDuration: "0.999999999s" }],
    ["lease_duration", { leaseDuration: "-1s" }],
    ["lease_duration", { leaseDuration: "43201s" }],
    ["lease_duration", { leaseDuration: "43200.000000001s" }],
    ["max_jobs", { maxJobs: 101 }],
    ["max_jobs", { maxJobs: -1 }],
    ["wait", { wait: "61s" }],
    ["wait", { wait: "60.000000001s" }],
    ["wait", { wait: "-1s" }],
  ])("refuses %s out of bounds: %j", async (field, extra) => {
    expectInvalid(await s.call("Claim", { queue: "claims-empty", workerId: "w", ...extra }), field);
  });

  it.each([{ leaseDuration: "1s" }, { leaseDuration: "43200s" }, { maxJobs: 100 }, { wait: "0s" }, {}])(
    "accepts %j (nothing eligible: no leases)",
    async (extra) => {
      const res = await ok("Claim", { queue: "claims-empty", workerId: "w", ...extra });
      expect(res.leases ?? []).toEqual([]);
    },
  );

  it("max_jobs 0 and omitted mean 1", async () => {
    await submitBatchOk([1, 2, 3].map(() => ({ queue: "max-jobs", task: "t" })));
    expect((await ok("Claim", { queue: "max-jobs", workerId: "w", maxJobs: 0 })).leases).toHaveLength(1);
    expect((await ok("Claim", { queue: "max-jobs", workerId: "w" })).leases).toHaveLength(1);
    expect((await ok("Claim", { queue: "max-jobs", workerId: "w", maxJobs: 100 })).leases).toHaveLength(1);
  });

  it("wait 60s is accepted (and returns at once when work is there)", async () => {
    await submitOk({ queue: "wait-max", task: "t" });
    expect((await ok("Claim", { queue: "wait-max", workerId: "w", wait: "60s" })).leases).toHaveLength(1);
  });

  it("lease_duration defaults to 60s, and Heartbeat without one extends by the claim's", async () => {
    const { lease } = await runningJob("lease-defaults");
    expect(Date.parse(lease.job.leaseExpireTime)).toBe(clock.now() + 60_000);
    const custom = await runningJob("lease-defaults", { leaseDuration: "120s" });
    clock.advance(10_000);
    const { job } = await ok("Heartbeat", { jobId: custom.id, leaseToken: custom.token });
    expect(Date.parse(job.leaseExpireTime)).toBe(clock.now() + 120_000);
  });
});

describe("StreamClaims bounds (Connect streaming JSON)", () => {
  it.each([
    ["max_in_flight", { workerId: "w", maxInFlight: 1001 }],
    ["max_in_flight", { workerId: "w", maxInFlight: -1 }],
    ["worker_id", { workerId: "" }],
    ["worker_id", { workerId: "bad worker" }],
    ["lease_duration", { workerId: "w", leaseDuration: "0s" }],
    ["lease_duration", { workerId: "w", leaseDuration: "43201s" }],
    ["queue", { workerId: "w", queue: ".bad" }],
  ])("refuses %s out of bounds: %j", async (field, req) => {
    const res = await callStream(s, "StreamClaims", JSON.stringify(req));
    expect(res.status).toBe(200);
    expect(res.messages).toEqual([]);
    expect(res.end?.error?.code, JSON.stringify(res.end)).toBe("invalid_argument");
    expect(res.end.error.message).toContain(field);
    expect(detail(res.end.error, "google.rpc.BadRequest")).toEqual({ fieldViolations: [{ field, description: expect.any(String) }] });
  });
});

describe("job_id: not a UUID is invalid_argument, an unknown UUID is not_found", () => {
  const rows = JOB_ID_METHODS.flatMap(([method, extra]) => NOT_UUIDS.map((id) => [method, id, extra] as const));
  it.each(rows)("%s refuses job_id %j", async (method, jobId, extra) => {
    expectInvalid(await s.call(method, { ...extra, jobId }), "job_id");
  });

  it.each(JOB_ID_METHODS)("%s refuses an empty or missing job_id", async (method, extra) => {
    expectInvalid(await s.call(method, { ...extra, jobId: "" }), "job_id");
    expectInvalid(await s.call(method, extra), "job_id");
  });

  const unknown = JOB_ID_METHODS.flatMap(([method, extra]) =>
    [...UNKNOWN_IDS, UNKNOWN_IDS[1].toUpperCase()].map((id) => [method, id, extra] as const),
  );
  it.each(unknown)("%s answers not_found JOB_NOT_FOUND for %s", async (method, jobId, extra) => {
    expectReason(await s.call(method, { ...extra, jobId }), 404, "not_found", "JOB_NOT_FOUND");
  });

  it("an upper-case UUID finds the job (UUIDs are case-insensitive)", async () => {
    const { job } = await submitOk({ queue: "ids", task: "t" });
    expect((await ok("GetJob", { jobId: job.id.toUpperCase() })).job.id).toBe(job.id);
    expect((await ok("ListJobEvents", { jobId: job.id.toUpperCase() })).events[0]).toMatchObject({ jobId: job.id });
  });
});

describe("lease_token, error, reason, retry_delay", () => {
  it.each(["Heartbeat", "Complete", "Fail", "Snooze"])("%s refuses an empty or absurdly long lease_token", async (method) => {
    expectInvalid(await s.call(method, { jobId: UNKNOWN_IDS[0], leaseToken: "" }), "lease_token");
    expectInvalid(await s.call(method, { jobId: UNKNOWN_IDS[0] }), "lease_token");
    expectInvalid(await s.call(method, { jobId: UNKNOWN_IDS[0], leaseToken: "t".repeat(257) }), "lease_token");
  });

  it("Heartbeat refuses lease_duration out of bounds", async () => {
    for (const leaseDuration of ["0s", "0.5s", "43201s", "-1s"]) {
      expectInvalid(await s.call("Heartbeat", { jobId: UNKNOWN_IDS[0], leaseToken: "x", leaseDuration }), "lease_duration");
    }
  });

  it("Fail refuses an error of 4097 characters and a negative retry_delay; Cancel refuses a reason of 4097", async () => {
    const { id, token } = await runningJob("texts");
    expectInvalid(await s.call("Fail", { jobId: id, leaseToken: token, error: "e".repeat(4097) }), "error");
    expectInvalid(await s.call("Fail", { jobId: id, leaseToken: token, error: "😀".repeat(4097) }), "error");
    expectInvalid(await s.call("Fail", { jobId: id, leaseToken: token, error: "e", retryDelay: "-1s" }), "retry_delay");
    const { job: queued } = await submitOk({ queue: "texts", task: "t" });
    expectInvalid(await s.call("Cancel", { jobId: queued.id, reason: "r".repeat(4097) }), "reason");
    // Nothing changed.
    expect((await ok("GetJob", { jobId: id })).job.state).toBe("JOB_STATE_RUNNING");
    expect((await ok("GetJob", { jobId: queued.id })).job.state).toBe("JOB_STATE_QUEUED");
  });

  it("accepts exactly 4096 characters (code points: 4096 emoji are 8192 UTF-16 units)", async () => {
    const { id, token } = await runningJob("texts-ok");
    const failed = await ok("Fail", { jobId: id, leaseToken: token, error: "😀".repeat(4096) });
    expect(failed.job.state).toBe("JOB_STATE_RETRY");
    expect(failed.job.lastError).toBe("😀".repeat(4096));
    const cancelled = await ok("Cancel", { jobId: id, reason: "r".repeat(4096) });
    expect(cancelled.job.state).toBe("JOB_STATE_CANCELLED");
  });
});

describe("ListJobs: page_size, page_token, states", () => {
  it.each([
    ["page_size", { pageSize: 501 }],
    ["page_size", { pageSize: -1 }],
    ["page_size", { pageSize: -2147483648 }],
    ["states[0]", { states: ["JOB_STATE_UNSPECIFIED"] }],
    ["states[0]", { states: [0] }],
    ["states[1]", { states: ["JOB_STATE_QUEUED", "JOB_STATE_UNSPECIFIED"] }],
    ["states[0]", { states: [99] }],
    ["page_token", { pageToken: "garbage" }],
    ["page_token", { pageToken: "!!!not base64!!!" }],
    ["page_token", { pageToken: Buffer.from("null").toString("base64url") }],
    ["page_token", { pageToken: Buffer.from('{"b":1,"f":2}').toString("base64url") }],
    ["page_token", { pageToken: Buffer.from('{"b":"a","f":"[\\"\\"]","r":"ListGroups"}').toString("base64url") }],
    ["group_key", { groupKey: "a b" }],
    ["group_key", { groupKey: "g".repeat(129) }],
  ])("refuses %s: %j", async (field, extra) => {
    expectInvalid(await s.call("ListJobs", extra), field);
  });

  it("page_size 0 means 50, 500 is the most, and a token is bound to its filter", async () => {
    await submitBatchOk(Array.from({ length: 500 }, (_, i) => ({ queue: "pages", task: "t", priority: i % 3 })));
    const first = await ok("ListJobs", { queue: "pages" });
    expect(first.jobs).toHaveLength(50);
    expect(first.nextPageToken).toEqual(expect.any(String));
    const zero = await ok("ListJobs", { queue: "pages", pageSize: 0 });
    expect(zero.jobs).toHaveLength(50);
    const all = await ok("ListJobs", { queue: "pages", pageSize: 500 });
    expect(all.jobs).toHaveLength(500);
    expect(all.nextPageToken ?? "").toBe("");

    const next = await ok("ListJobs", { queue: "pages", pageToken: first.nextPageToken });
    expect(next.jobs).toHaveLength(50);
    expect(next.jobs[0].id < first.jobs[49].id).toBe(true);

    for (const other of [{ queue: "other" }, { queue: "pages", states: ["JOB_STATE_QUEUED"] }, { queue: "pages", groupKey: "g" }, {}]) {
      expectInvalid(await s.call("ListJobs", { ...other, pageToken: first.nextPageToken }), "page_token");
    }
    // A different page_size is not a different filter.
    expect((await ok("ListJobs", { queue: "pages", pageSize: 10, pageToken: first.nextPageToken })).jobs).toHaveLength(10);
  });
});

describe("SubmitBatch", () => {
  it("refuses 0 jobs and 501 jobs, naming `jobs`", async () => {
    expectInvalid(await s.call("SubmitBatch", { jobs: [] }), "jobs");
    expectInvalid(await s.call("SubmitBatch", {}), "jobs");
    const jobs = Array.from({ length: 501 }, () => ({ queue: "refused", task: "t" }));
    expectInvalid(await s.call("SubmitBatch", { jobs }), "jobs");
  });

  it("a bad field inside jobs[3] names `jobs[3].<field>` and creates nothing", async () => {
    const before = await totalJobs();
    const good = { queue: "batch-atomic", task: "t" };
    const cases: [string, Record<string, unknown>][] = [
      ["jobs[3].queue", { queue: ".bad" }],
      ["jobs[3].task", { task: "" }],
      ["jobs[3].priority", { priority: 101 }],
      ["jobs[3].max_attempts", { maxAttempts: -1 }],
      ["jobs[3].retry_base_delay", { retryBaseDelay: "3601s" }],
      ["jobs[3].delay", { delay: "2592001s" }],
      ["jobs[3].idempotency_key", { idempotencyKey: "a b" }],
      ["jobs[3].group_key", { groupKey: "a b" }],
      ["jobs[3].group_key", { groupKey: "g".repeat(129) }],
    ];
    for (const [field, bad] of cases) {
      expectInvalid(await s.call("SubmitBatch", { jobs: [good, good, good, { ...good, ...bad }, good] }), field);
    }
    const big = await s.call("SubmitBatch", { jobs: [good, good, good, { ...good, payload: "x".repeat(KIB64) }] });
    expectInvalid(big, "jobs[3].payload");
    expect(detail(big.body, "google.rpc.ErrorInfo")).toMatchObject({ reason: "PAYLOAD_TOO_LARGE", domain: "leasequeue" });
    const unknownField = await s.call("SubmitBatch", { jobs: [good, good, good, { ...good, colour: "red" }] });
    expectDecodeError(unknownField, "colour");
    expect(await queueJobs("batch-atomic")).toEqual([]);
    expect(await totalJobs()).toBe(before);
  });

  it("an idempotency conflict in jobs[2] creates nothing (all or nothing)", async () => {
    await submitOk({ queue: "batch-conflict", task: "t", idempotencyKey: "taken" });
    const before = await totalJobs();
    const res = await s.call("SubmitBatch", {
      jobs: [
        { queue: "batch-conflict", task: "a" },
        { queue: "batch-conflict", task: "b" },
        { queue: "batch-conflict", task: "different", idempotencyKey: "taken" },
      ],
    });
    expectReason(res, 409, "already_exists", "IDEMPOTENCY_MISMATCH");
    expect(await totalJobs()).toBe(before);
    expect(await queueJobs("batch-conflict")).toHaveLength(1);
  });

  it("refuses the Idempotency-Key header (keys go on each job)", async () => {
    const res = await s.call("SubmitBatch", { jobs: [{ queue: "refused", task: "t" }] }, { "idempotency-key": "k" });
    expectInvalid(res, "Idempotency-Key");
  });

  it("accepts 500 jobs", async () => {
    const results = await submitBatchOk(Array.from({ length: 500 }, (_, i) => ({ queue: "batch-500", task: `t${i}` })));
    expect(results).toHaveLength(500);
    expect(results.map((r) => r.job.task)).toEqual(Array.from({ length: 500 }, (_, i) => `t${i}`));
  });
});

describe("JSON the decoder refuses: invalid_argument", () => {
  it.each([
    ["malformed JSON", "Submit", "{not json", ["JSON"]],
    ["a truncated body", "Submit", '{"queue":"refused","task":"t"', ["JSON"]],
    ["an empty body", "Submit", "", ["JSON"]],
    ["null", "Submit", "null", []],
    ["an array", "Submit", "[]", []],
    ["a string", "Submit", '"Submit"', []],
    ["an unknown field", "Submit", '{"queue":"refused","task":"t","colour":"red"}', ['"colour"']],
    ["a snake_case typo", "Submit", '{"queue":"refused","task":"t","max_attempt":3}', ['"max_attempt"']],
    ["an unknown field on Claim", "Claim", '{"workerId":"w","leaseSeconds":5}', ['"leaseSeconds"']],
    ["an unknown field on GetStats", "GetStats", '{"queue":"x"}', ['"queue"']],
    ["priority as a word", "Submit", '{"queue":"refused","task":"t","priority":"high"}', ["priority"]],
    ["priority as a fraction", "Submit", '{"queue":"refused","task":"t","priority":1.5}', ["priority"]],
    ["priority beyond int32", "Submit", '{"queue":"refused","task":"t","priority":2147483648}', ["priority"]],
    ["max_attempts as a bool", "Submit", '{"queue":"refused","task":"t","maxAttempts":true}', ["max_attempts"]],
    ["queue as a number", "Submit", '{"queue":5,"task":"t"}', ["queue"]],
    ["page_size as a word", "ListJobs", '{"pageSize":"ten"}', ["page_size"]],
    ["max_jobs as a fraction", "Claim", '{"workerId":"w","maxJobs":2.5}', ["max_jobs"]],
    ["permanent as a string", "Fail", `{"jobId":"${UNKNOWN_IDS[0]}","leaseToken":"x","permanent":"yes"}`, ["permanent"]],
    ["a Duration without unit", "Submit", '{"queue":"refused","task":"t","delay":"10"}', ["Duration"]],
    ["a Duration as a number", "Claim", '{"workerId":"w","leaseDuration":30}', ["Duration"]],
    ["a Duration past its range", "Submit", '{"queue":"refused","task":"t","delay":"315576000001s"}', ["Duration"]],
    ["a bad Timestamp", "Submit", '{"queue":"refused","task":"t","scheduleTime":"tomorrow"}', ["Timestamp"]],
    ["a Timestamp without zone", "Submit", '{"queue":"refused","task":"t","scheduleTime":"2026-01-02T00:00:00"}', ["Timestamp"]],
    ["an unknown enum name", "ListJobs", '{"states":["QUEUED"]}', ["JobState"]],
    ["a payload nested 200 deep", "Submit", `{"queue":"refused","task":"t","payload":${"[".repeat(200)}${"]".repeat(200)}}`, ["depth"]],
    ["a lone surrogate in a string field", "Submit", '{"queue":"refused","task":"t","idempotencyKey":"\\ud800"}', ["idempotency_key"]],
  ] as const)("%s", async (_, method, body, mentions) => {
    expectDecodeError(await s.call(method, body), ...mentions);
  });

  it.each([
    ['"abc"', "after_sequence"],
    ["1.5", "after_sequence"],
    ['"9223372036854775808"', "after_sequence"],
    ["true", "after_sequence"],
  ])("WatchEvents refuses after_sequence %s (int64 in JSON)", async (value, field) => {
    const res = await callStream(s, "WatchEvents", `{"afterSequence":${value}}`);
    expect(res.status).toBe(200);
    expect(res.end?.error?.code, JSON.stringify(res.end)).toBe("invalid_argument");
    expect(res.end.error.message).toContain(field);
  });

  // docs/api.md "Errors" wants a BadRequest detail on these too; they are refused by
  // connect-es's JSON decoder before any interceptor runs, which would need a
  // change outside src/service (the adapter set-up in src/app.ts).
  it.todo("decoder refusals (malformed JSON, unknown field, oneof) carry a google.rpc.BadRequest naming the field");
});

describe("the error table's state rows", () => {
  it("Cancel of a running or completed job -> failed_precondition NOT_CANCELLABLE", async () => {
    const { id, token } = await runningJob("states");
    expectReason(await s.call("Cancel", { jobId: id }), 400, "failed_precondition", "NOT_CANCELLABLE");
    await ok("Complete", { jobId: id, leaseToken: token });
    expectReason(await s.call("Cancel", { jobId: id }), 400, "failed_precondition", "NOT_CANCELLABLE");
  });

  it("Redrive of a queued or running job -> failed_precondition NOT_DEAD", async () => {
    const { job } = await submitOk({ queue: "states-redrive", task: "t" });
    expectReason(await s.call("Redrive", { jobId: job.id }), 400, "failed_precondition", "NOT_DEAD");
    const { id } = await runningJob("states-redrive-running");
    expectReason(await s.call("Redrive", { jobId: id }), 400, "failed_precondition", "NOT_DEAD");
  });

  it("a wrong token, or a job that is not running -> aborted LEASE_REJECTED", async () => {
    const { id, token } = await runningJob("states-token");
    for (const [method, extra] of [
      ["Heartbeat", {}],
      ["Complete", {}],
      ["Fail", { error: "x" }],
    ] as const) {
      const res = await s.call(method, { jobId: id, leaseToken: token + "x", ...extra });
      expectReason(res, 409, "aborted", "LEASE_REJECTED");
    }
    const { job: queued } = await submitOk({ queue: "states-queued", task: "t" });
    expectReason(await s.call("Complete", { jobId: queued.id, leaseToken: token }), 409, "aborted", "LEASE_REJECTED");
    // The rejected calls changed nothing: the right token still works.
    expect((await ok("Complete", { jobId: id, leaseToken: token })).job.state).toBe("JOB_STATE_COMPLETED");
  });

  it("the right token after the lease expired -> aborted LEASE_EXPIRED", async () => {
    const { id, token } = await runningJob("states-expired", { leaseDuration: "1s" });
    clock.advance(1000); // a lease is active while now < lease_expire_time
    expectReason(await s.call("Complete", { jobId: id, leaseToken: token }), 409, "aborted", "LEASE_EXPIRED");
    expectReason(await s.call("Heartbeat", { jobId: id, leaseToken: token }), 409, "aborted", "LEASE_EXPIRED");
  });
});

describe("request body over LEASEQUEUE_MAX_REQUEST_BYTES", () => {
  const LIMIT = 2048;
  let small: TestServer;
  beforeAll(async () => {
    small = await startTestServer({ "max-request-bytes": String(LIMIT) });
  });
  afterAll(async () => {
    await small?.close();
  });

  function bodyOfSize(bytes: number): string {
    const head = '{"queue":"limit","task":"t","payload":"';
    const tail = '"}';
    return head + "x".repeat(bytes - head.length - tail.length) + tail;
  }

  async function post(body: string, chunked: boolean): Promise<Reply> {
    const bytes = new TextEncoder().encode(body);
    const res = await fetch(`${small.apiUrl}/leasequeue.v1.LeaseQueueService/Submit`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // A stream has no Content-Length: the adapter's readMaxBytes refuses it while reading.
      body: chunked
        ? new ReadableStream({
            start(c) {
              c.enqueue(bytes);
              c.close();
            },
          })
        : bytes,
      duplex: "half",
    });
    return { status: res.status, body: await res.json() };
  }

  it.each([false, true])("refuses one byte over with resource_exhausted (chunked: %s) and takes exactly the limit", async (chunked) => {
    const over = await post(bodyOfSize(LIMIT + 1), chunked);
    expect(over.status).toBe(429);
    expect(over.body.code).toBe("resource_exhausted");
    const big = await post(bodyOfSize(LIMIT * 20), chunked);
    expect(big.body.code).toBe("resource_exhausted");
    const exact = await post(bodyOfSize(LIMIT), chunked);
    expect(exact.status, JSON.stringify(exact.body)).toBe(200);
    expect(exact.body.job.queue).toBe("limit");
  });

  it("created only the accepted jobs and is still healthy", async () => {
    expect(await totalJobs(small)).toBe(2);
    expect((await small.call("GetStats", {})).body.total.queued).toBe("2");
  });
});

describe("after all the bad input", () => {
  // Reads every job and its timeline (a few hundred calls, some 64 KiB): seconds on a loaded machine.
  it("the server is healthy and holds exactly the accepted jobs", { timeout: 60_000 }, async () => {
    const health = await fetch(`${s.apiUrl}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "SERVING" });

    const { job } = await submitOk({ queue: "after", task: "t" });
    expect((await ok("GetJob", { jobId: job.id })).job.state).toBe("JOB_STATE_QUEUED");

    const stats = await ok("GetStats", {});
    // int64 counts travel as strings; the total is a QueueStats with an empty queue.
    expect(stats.total.queue ?? "").toBe("");
    expect(typeof stats.total.queued).toBe("string");
    expect(await totalJobs()).toBe(created);
    const queues = stats.queues.map((q: any) => q.queue);
    for (const refusedOnly of ["refused", "batch-atomic", "claims-empty", "limit"]) expect(queues).not.toContain(refusedOnly);
    expect(await queueJobs("refused")).toEqual([]);

    // Every job that exists has its SUBMITTED event: nothing half-written.
    let seen = 0;
    let pageToken = "";
    do {
      const page = await ok("ListJobs", { pageSize: 500, pageToken });
      for (const j of page.jobs ?? []) {
        const { events } = await ok("ListJobEvents", { jobId: j.id });
        expect(events[0]).toMatchObject({ jobId: j.id, kind: "EVENT_KIND_SUBMITTED" });
      }
      seen += (page.jobs ?? []).length;
      pageToken = page.nextPageToken ?? "";
    } while (pageToken !== "");
    expect(seen).toBe(created);
  });
});
