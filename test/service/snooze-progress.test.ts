/**
 * Snooze and progress (docs/api.md "Snooze and progress") against a real
 * server on a manual clock: over Connect JSON (as curl sends it) for the
 * Snooze RPC, Heartbeat progress and the Acknowledge outcomes, and over gRPC
 * (the Work stream and the typed client) for the same calls in binary; every
 * bound and refusal with the field it names. The clock makes the 30-day bound
 * exact and the once-a-second progress policy testable without sleeping.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { EventKind, JobState, LeaseQueueService, WorkRequestSchema, type WorkRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const SECOND = 1000;
const DAY_S = 24 * 60 * 60;
const UNKNOWN_ID = "0190b3c4-0000-7000-8000-000000000000";

const clock = new ManualClock(Date.UTC(2026, 0, 1));
let s: TestServer;
let grpc: Client<typeof LeaseQueueService>;

beforeAll(async () => {
  // The sweep runs on the manual clock anyway; keep it out of the way.
  s = await startTestServer({}, { clock, sweepIntervalMs: 60_000 });
  grpc = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }));
});
afterAll(async () => {
  await s?.close();
});

type Reply = { status: number; body: any };

const ok = (method: string, body: unknown): Promise<any> => s.ok(method, body);

/** Submits one job to `queue` and claims it. */
async function running(queue: string, submit: Record<string, unknown> = {}): Promise<{ id: string; token: string }> {
  const { job } = await ok("Submit", { queue, task: "t", ...submit });
  const { leases } = await ok("Claim", { queue, workerId: "snoozer", leaseDuration: "60s" });
  expect(leases[0].job.id).toBe(job.id);
  return { id: job.id, token: leases[0].leaseToken };
}

async function kinds(jobId: string): Promise<string[]> {
  return (await ok("ListJobEvents", { jobId })).events.map((e: any) => e.kind);
}

function expectInvalid(res: Reply, field: string): void {
  const context = JSON.stringify(res.body);
  expect(res.status, context).toBe(400);
  expect(res.body.code, context).toBe("invalid_argument");
  expect(res.body.message, context).toContain(field);
  const bad = res.body.details?.find((d: any) => d.type === "google.rpc.BadRequest")?.debug;
  expect(bad, context).toEqual({ fieldViolations: [{ field, description: expect.any(String) }] });
}

function expectReason(res: Reply, status: number, code: string, reason: string): void {
  const context = JSON.stringify(res.body);
  expect(res.status, context).toBe(status);
  expect(res.body.code, context).toBe(code);
  expect(res.body.details?.find((d: any) => d.type === "google.rpc.ErrorInfo")?.debug, context).toMatchObject({ reason });
}

/** Compact JSON of exactly `bytes` bytes: {"p":"xxx…"}. */
function jsonOfBytes(bytes: number): { p: string } {
  return { p: "x".repeat(bytes - '{"p":""}'.length) };
}

const nested = (levels: number): unknown => (levels === 0 ? 1 : [nested(levels - 1)]);

describe("Snooze over Connect JSON", () => {
  it("puts the job back to QUEUED at now + delay with the attempt refunded, and records SNOOZED", async () => {
    const { id, token } = await running("snooze", { maxAttempts: 1 });
    const { job } = await ok("Snooze", { jobId: id, leaseToken: token, delay: "30s" });
    expect(job).toMatchObject({ id, state: "JOB_STATE_QUEUED", deliveries: 1 });
    expect(job.attempts ?? 0).toBe(0);
    expect(job).not.toHaveProperty("leaseExpireTime");
    expect(job).not.toHaveProperty("workerId");
    expect(Date.parse(job.scheduleTime) - clock.now()).toBe(30 * SECOND);
    expect((await kinds(id)).at(-1)).toBe("EVENT_KIND_SNOOZED");
    const snoozed = (await ok("ListJobEvents", { jobId: id })).events.at(-1);
    expect(snoozed).toMatchObject({ fromState: "JOB_STATE_RUNNING", toState: "JOB_STATE_QUEUED", workerId: "snoozer" });

    expect((await ok("Claim", { queue: "snooze", workerId: "w" })).leases ?? []).toEqual([]);
    clock.advance(30 * SECOND);
    const { leases } = await ok("Claim", { queue: "snooze", workerId: "w" });
    // max_attempts 1 and it runs again: snoozing spent nothing.
    expect(leases[0].job).toMatchObject({ id, attempts: 1, deliveries: 2 });
    // The snoozed lease is over.
    expectReason(await s.call("Snooze", { jobId: id, leaseToken: token }), 409, "aborted", "LEASE_REJECTED");
  });

  it("makes the job eligible at once without a delay, and takes exactly 30 days", async () => {
    const a = await running("snooze-bounds");
    const { job } = await ok("Snooze", { jobId: a.id, leaseToken: a.token });
    expect(Date.parse(job.scheduleTime)).toBe(clock.now());
    const { leases } = await ok("Claim", { queue: "snooze-bounds", workerId: "w" });
    expect(leases[0].job.id).toBe(a.id);
    const far = await ok("Snooze", { jobId: a.id, leaseToken: leases[0].leaseToken, delay: `${30 * DAY_S}s` });
    expect(Date.parse(far.job.scheduleTime) - clock.now()).toBe(30 * DAY_S * SECOND);
  });

  it.each(["-1s", `${30 * DAY_S + 1}s`, `${30 * DAY_S}.000000001s`])(
    "refuses delay %s naming the field, and changes nothing",
    async (delay) => {
      const { id, token } = await running("snooze-refused");
      expectInvalid(await s.call("Snooze", { jobId: id, leaseToken: token, delay }), "delay");
      expect((await ok("GetJob", { jobId: id })).job.state).toBe("JOB_STATE_RUNNING");
      await ok("Complete", { jobId: id, leaseToken: token });
    },
  );

  it("refuses a bad job_id or lease_token, an unknown job, a wrong token and an expired lease", async () => {
    expectInvalid(await s.call("Snooze", { jobId: "not-a-uuid", leaseToken: "t" }), "job_id");
    expectInvalid(await s.call("Snooze", { leaseToken: "t" }), "job_id");
    expectInvalid(await s.call("Snooze", { jobId: UNKNOWN_ID }), "lease_token");
    expectInvalid(await s.call("Snooze", { jobId: UNKNOWN_ID, leaseToken: "t".repeat(257) }), "lease_token");
    expectReason(await s.call("Snooze", { jobId: UNKNOWN_ID, leaseToken: "t" }), 404, "not_found", "JOB_NOT_FOUND");
    const { id, token } = await running("snooze-fence");
    expectReason(await s.call("Snooze", { jobId: id, leaseToken: "forged" }), 409, "aborted", "LEASE_REJECTED");
    clock.advance(60 * SECOND);
    expectReason(await s.call("Snooze", { jobId: id, leaseToken: token }), 409, "aborted", "LEASE_EXPIRED");
    // An unknown JSON field is refused by the decoder, as on every RPC.
    const res = await s.call("Snooze", { jobId: id, leaseToken: token, delay: "1s", until: "later" });
    expect(res.body.code).toBe("invalid_argument");
  });
});

describe("progress over Connect JSON", () => {
  it("stores the latest progress on Job.progress, shown by GetJob and ListJobs, kept by heartbeats without one", async () => {
    const { id, token } = await running("progress");
    const beat = await ok("Heartbeat", { jobId: id, leaseToken: token, progress: { done: 3, of: 10 } });
    expect(beat.job.progress).toEqual({ done: 3, of: 10 });
    clock.advance(2 * SECOND);
    await ok("Heartbeat", { jobId: id, leaseToken: token });
    expect((await ok("GetJob", { jobId: id })).job.progress).toEqual({ done: 3, of: 10 });
    const listed = await ok("ListJobs", { queue: "progress", view: "JOB_VIEW_BASIC" });
    expect(listed.jobs[0]).toMatchObject({ id, progress: { done: 3, of: 10 } });
    expect(listed.jobs[0]).not.toHaveProperty("payload");

    await ok("Heartbeat", { jobId: id, leaseToken: token, progress: "rendering" });
    const done = await ok("Complete", { jobId: id, leaseToken: token });
    expect(done.job).toMatchObject({ state: "JOB_STATE_COMPLETED", progress: "rendering" });
    const events = (await ok("ListJobEvents", { jobId: id })).events.filter((e: any) => e.kind === "EVENT_KIND_PROGRESS");
    expect(events.map((e: any) => e.message)).toEqual(['{"done":3,"of":10}', '"rendering"']);
    expect(events[0]).toMatchObject({ fromState: "JOB_STATE_RUNNING", toState: "JOB_STATE_RUNNING", workerId: "snoozer" });
  });

  it("stores a PROGRESS event at most once a second per job; GetJob always shows the latest", async () => {
    const { id, token } = await running("progress-policy");
    for (let step = 1; step <= 6; step++) {
      await ok("Heartbeat", { jobId: id, leaseToken: token, progress: { step } });
      clock.advance(400);
    }
    // Reported at 0, 400, 800, 1200, 1600 and 2000 ms: stored at 0 and at 1200 ms (the first a second or more after 0).
    const stored = (await ok("ListJobEvents", { jobId: id })).events.filter((e: any) => e.kind === "EVENT_KIND_PROGRESS");
    expect(stored.map((e: any) => JSON.parse(e.message))).toEqual([{ step: 1 }, { step: 4 }]);
    expect((await ok("GetJob", { jobId: id })).job.progress).toEqual({ step: 6 });
  });

  it("takes any JSON value, null included, and announces stored progress on WatchEvents", async () => {
    const { id, token } = await running("progress-values");
    const watch = new AbortController();
    const seen: Array<{ kind: EventKind; message: string }> = [];
    const watching = (async () => {
      try {
        for await (const m of s.client.watchEvents({ jobId: id, afterSequence: 0n }, { signal: watch.signal })) {
          if (m.event !== undefined) seen.push({ kind: m.event.kind, message: m.event.message });
          if (m.event?.kind === EventKind.PROGRESS) return;
        }
      } catch (err) {
        if (!(err instanceof ConnectError && err.code === Code.Canceled)) throw err;
      }
    })();
    const beat = await ok("Heartbeat", { jobId: id, leaseToken: token, progress: [1, "two", { three: true }] });
    expect(beat.job.progress).toEqual([1, "two", { three: true }]);
    await watching;
    watch.abort();
    expect(seen.at(-1)).toEqual({ kind: EventKind.PROGRESS, message: '[1,"two",{"three":true}]' });
    clock.advance(SECOND);
    const nulled = await ok("Heartbeat", { jobId: id, leaseToken: token, progress: null });
    expect(nulled.job.progress).toBeNull();
    expect((await ok("GetJob", { jobId: id })).job.progress).toBeNull();
  });

  it("takes exactly 4 KiB of compact JSON and refuses one byte more with PAYLOAD_TOO_LARGE naming progress", async () => {
    const { id, token } = await running("progress-size");
    const exact = jsonOfBytes(4096);
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(4096);
    expect((await ok("Heartbeat", { jobId: id, leaseToken: token, progress: exact })).job.progress).toEqual(exact);
    clock.advance(SECOND);
    const over = await s.call("Heartbeat", { jobId: id, leaseToken: token, progress: jsonOfBytes(4097) });
    expectInvalid(over, "progress");
    expect(over.body.details.find((d: any) => d.type === "google.rpc.ErrorInfo").debug).toMatchObject({
      reason: "PAYLOAD_TOO_LARGE",
      metadata: { field: "progress", bytes: "4097", limit: "4096" },
    });
    // UTF-8 bytes count, not characters: 2,048 two-byte characters are 4,096 bytes plus the quotes.
    expectInvalid(await s.call("Heartbeat", { jobId: id, leaseToken: token, progress: "é".repeat(2048) }), "progress");
    expectInvalid(await s.call("Heartbeat", { jobId: id, leaseToken: token, progress: nested(33) }), "progress");
    // The refused heartbeats changed nothing.
    expect((await ok("GetJob", { jobId: id })).job.progress).toEqual(exact);
  });
});

describe("Acknowledge: the snooze outcome and heartbeat progress", () => {
  it("snoozes and reports progress beside other outcomes, each answered on its own", async () => {
    await ok("SubmitBatch", { jobs: [0, 1, 2].map((i) => ({ queue: "ack-snooze", task: "t", payload: { i } })) });
    const { leases } = await ok("Claim", { queue: "ack-snooze", workerId: "w", maxJobs: 3 });
    const [a, b, c] = leases as Array<{ job: { id: string }; leaseToken: string }>;
    const res = await ok("Acknowledge", {
      acks: [
        { jobId: a.job.id, leaseToken: a.leaseToken, snooze: { delay: "90s" } },
        { jobId: b.job.id, leaseToken: b.leaseToken, heartbeat: { progress: { pct: 50 } } },
        { jobId: c.job.id, leaseToken: "forged", snooze: {} },
      ],
    });
    expect(res.results.map((r: any) => r.status.code ?? 0)).toEqual([0, 0, Code.Aborted]);
    expect(res.results[0].leaseExpireTime).toBeUndefined();
    expect(res.results[1].leaseExpireTime).toBeDefined();
    const snoozed = (await ok("GetJob", { jobId: a.job.id })).job;
    expect(snoozed.state).toBe("JOB_STATE_QUEUED");
    expect(Date.parse(snoozed.scheduleTime) - clock.now()).toBe(90 * SECOND);
    expect((await ok("GetJob", { jobId: b.job.id })).job.progress).toEqual({ pct: 50 });
    expect((await ok("GetJob", { jobId: c.job.id })).job.state).toBe("JOB_STATE_RUNNING");
  });

  it.each([
    ["acks[1].snooze.delay", { snooze: { delay: "-1s" } }],
    ["acks[1].snooze.delay", { snooze: { delay: `${30 * DAY_S + 1}s` } }],
    ["acks[1].heartbeat.progress", { heartbeat: { progress: jsonOfBytes(4097) } }],
    ["acks[1].heartbeat.progress", { heartbeat: { progress: nested(33) } }],
  ])("refuses the whole request naming %s", async (field, outcome) => {
    const { id, token } = await running("ack-refused");
    const res = await s.call("Acknowledge", {
      acks: [
        { jobId: id, leaseToken: token, complete: {} },
        { jobId: id, leaseToken: token, ...outcome },
      ],
    });
    expectInvalid(res, field);
    expect((await ok("GetJob", { jobId: id })).job.state).toBe("JOB_STATE_RUNNING");
    await ok("Complete", { jobId: id, leaseToken: token });
  });
});

describe("over gRPC", () => {
  it("snoozes with the typed client and refuses a bad delay with INVALID_ARGUMENT", async () => {
    const { id, token } = await running("grpc-snooze");
    const refused = await grpc.snooze({ jobId: id, leaseToken: token, delay: { seconds: -1n } }).then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(refused?.code).toBe(Code.InvalidArgument);
    expect(refused?.rawMessage).toMatch(/^delay: /);
    const { job } = await grpc.snooze({ jobId: id, leaseToken: token, delay: { seconds: 5n } });
    expect(job).toMatchObject({ state: JobState.QUEUED, attempts: 0 });
    expect(timestampMs(job!.scheduleTime!) - clock.now()).toBe(5 * SECOND);
  });

  it("reports progress on Heartbeat and carries it on the next lease", async () => {
    const { id, token } = await running("grpc-progress");
    const { job } = await grpc.heartbeat({
      jobId: id,
      leaseToken: token,
      progress: { kind: { case: "structValue", value: { fields: { pct: { kind: { case: "numberValue", value: 75 } } } } } },
    });
    expect(job?.progress?.kind).toMatchObject({ case: "structValue" });
    await grpc.snooze({ jobId: id, leaseToken: token });
    const { leases } = await grpc.claim({ queue: "grpc-progress", workerId: "binary" });
    // The lease is written by the server's own encoder for binary clients: it carries the progress too.
    expect(leases[0].job?.progress).toEqual(job?.progress);
  });

  it("applies snooze and heartbeat progress on the Work stream; a snoozed lease makes room for the next", async () => {
    const submitted = await ok("SubmitBatch", { jobs: [0, 1, 2].map((i) => ({ queue: "work-snooze", task: "t", payload: { i } })) });
    const queued: WorkRequest[] = [create(WorkRequestSchema, { start: { queue: "work-snooze", workerId: "w", maxInFlight: 2 } })];
    let wake: (() => void) | undefined;
    let ended = false;
    async function* requests(): AsyncGenerator<WorkRequest> {
      for (;;) {
        const m = queued.shift();
        if (m !== undefined) yield m;
        else if (ended) return;
        else await new Promise<void>((r) => (wake = r));
      }
    }
    const responses = grpc.work(requests())[Symbol.asyncIterator]();
    const leases = [];
    while (leases.length < 2) leases.push(...(await responses.next()).value.leases);
    const [a, b] = leases;
    queued.push(
      create(WorkRequestSchema, {
        acks: [
          { jobId: a.job!.id, leaseToken: a.leaseToken, outcome: { case: "snooze", value: { delay: { seconds: 60n } } } },
          {
            jobId: b.job!.id,
            leaseToken: b.leaseToken,
            outcome: { case: "heartbeat", value: { progress: { kind: { case: "stringValue", value: "halfway" } } } },
          },
        ],
      }),
    );
    wake?.();
    const results = [];
    const next = [];
    while (results.length < 2 || next.length < 1) {
      const m = (await responses.next()).value;
      results.push(...m.results);
      next.push(...m.leases);
    }
    // max_in_flight 2: the third job comes only because the snooze ended a lease.
    expect(next.map((l) => l.job!.id)).toEqual([submitted.results[2].job.id]);
    expect(results.map((r) => [r.jobId, r.status?.code])).toEqual([
      [a.job!.id, 0],
      [b.job!.id, 0],
    ]);
    ended = true;
    wake?.();
    for (let r = await responses.next(); r.done !== true; r = await responses.next());
    expect((await ok("GetJob", { jobId: a.job!.id })).job.state).toBe("JOB_STATE_QUEUED");
    expect((await ok("GetJob", { jobId: b.job!.id })).job.progress).toBe("halfway");
  });
});
