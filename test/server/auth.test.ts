/**
 * Authentication on a real server (LEASEQUEUE_AUTH_FILE), SECURITY.md
 * "Authentication".
 *
 * Every RPC of the service descriptor is called with a token of each role:
 * the role of the table in docs/api.md "RPCs" gets through, every other is
 * `permission_denied`; no token, an unknown one or a malformed header is
 * `unauthenticated`. The RPCs are taken from the descriptor, so an RPC added
 * later is covered by itself, and one without a role fails here. Tokens
 * limited to queues are refused, RPC by RPC, what lies outside them, and
 * are answered about a job of another queue exactly as about a job that
 * does not exist, on every RPC that takes a job id. Health,
 * reflection, the console's files and the side port stay open.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, createRegistry, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { ServerReflection } from "../../gen/ts/grpc/reflection/v1/reflection_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ROLES, RPC_ROLES, type Role } from "../../src/service/rpc-roles.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { streamOf } from "../helpers/stream-of.js";

type LeaseQueueClient = Client<typeof LeaseQueueService>;

interface Outcome {
  /** undefined: the call (or its first message) succeeded. */
  code?: Code;
  message?: string;
  /** The response, or the first message of a stream. */
  response?: any;
}

/** Calls `method` once, whatever its kind; a stream is read to its first message, then closed. */
async function callOnce(client: LeaseQueueClient, method: DescMethod, request: object, headers: Record<string, string>): Promise<Outcome> {
  const fn = (client as unknown as Record<string, (req: unknown, opts: object) => any>)[method.localName];
  const abort = new AbortController();
  const opts = { headers, signal: abort.signal };
  try {
    if (method.methodKind === "unary") return { response: await fn.call(client, request, opts) };
    const input = method.methodKind === "bidi_streaming" ? streamOf(request) : request;
    const messages = (fn.call(client, input, opts) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
    const first = await messages.next();
    abort.abort();
    await messages.return?.().catch(() => {});
    return { response: first.value };
  } catch (err) {
    const error = ConnectError.from(err);
    return { code: error.code, message: error.rawMessage };
  }
}

const ALL = ["producer", "worker", "operator", "reader"] as Role[];
/** The queue-limited tokens: one per role, limited to the queue "mine". */
const limitedName = (role: Role) => `${role}-mine`;

let dir: string;
let t: TestServer;
let tokens: Record<string, string>;
let grpc: LeaseQueueClient;
/** A job in "mine" and one in "theirs", for the RPCs that name a job. */
const jobs = { mine: "", theirs: "" };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-auth-"));
  const file = writeAuthFile(dir, [
    { name: "admin", roles: ALL },
    ...ROLES.map((role) => ({ name: role, roles: [role] })),
    ...ROLES.map((role) => ({ name: limitedName(role), roles: [role], queues: ["mine", "also-mine"] })),
  ]);
  tokens = file.tokens;
  t = await startTestServer({ "auth-file": file.path });
  grpc = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
  for (const queue of ["mine", "theirs"] as const) {
    const res = await grpc.submit({ queue, task: "seed" }, { headers: bearer(tokens.admin) });
    jobs[queue] = res.job!.id;
    await grpc.createSchedule(
      { schedule: { name: `s-${queue}`, recurrence: { case: "cron", value: "@daily" }, template: { queue, task: "seed" } } },
      { headers: bearer(tokens.admin) },
    );
  }
});

afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("roles", () => {
  it("gives every RPC of the service descriptor a role", () => {
    const missing = LeaseQueueService.methods.filter((m) => RPC_ROLES[m.name] === undefined).map((m) => m.name);
    expect(missing, "RPCs without a role in src/service/rpc-roles.ts").toEqual([]);
  });

  it("are exactly the roles of the RPC table in docs/api.md", () => {
    const byRole = (role: Role) =>
      Object.keys(RPC_ROLES)
        .filter((rpc) => RPC_ROLES[rpc] === role)
        .sort();
    expect(byRole("producer")).toEqual(["Submit", "SubmitBatch"]);
    expect(byRole("worker")).toEqual([
      "Acknowledge",
      "Claim",
      "Complete",
      "Fail",
      "Heartbeat",
      "Release",
      "Snooze",
      "StreamClaims",
      "Work",
    ]);
    expect(byRole("operator")).toEqual([
      "Cancel",
      "CreateSchedule",
      "DeleteSchedule",
      "PauseQueue",
      "PurgeQueue",
      "Redrive",
      "RedriveAll",
      "ResumeQueue",
      "UpdateQueue",
    ]);
    expect(byRole("reader")).toEqual([
      "GetJob",
      "GetQueueActivity",
      "GetStats",
      "ListGroups",
      "ListJobEvents",
      "ListJobs",
      "ListSchedules",
      "WaitJob",
      "WatchEvents",
    ]);
  });

  describe.each(LeaseQueueService.methods.map((m) => [m.name, m] as const))("%s", (_name, method) => {
    it.each(ROLES.map((role) => [role]))("with a %s token", async (role) => {
      const outcome = await callOnce(grpc, method, create(method.input, {}), bearer(tokens[role]));
      if (RPC_ROLES[method.name] === role) {
        expect(outcome.code, outcome.message).not.toBe(Code.PermissionDenied);
        expect(outcome.code, outcome.message).not.toBe(Code.Unauthenticated);
      } else {
        expect(outcome.code, outcome.message).toBe(Code.PermissionDenied);
        expect(outcome.message).toBe(`${method.name} needs the role "${RPC_ROLES[method.name]}"; token "${role}" has ${role}`);
      }
    });

    it("without a token, with an unknown token and with a malformed header", async () => {
      const request = create(method.input, {});
      const cases: Array<[Record<string, string>, string]> = [
        [{}, 'this server requires "Authorization: Bearer <token>"'],
        [bearer("lq_" + "x".repeat(43)), "the bearer token is not known to this server"],
        [{ authorization: `Basic ${Buffer.from("admin:secret").toString("base64")}` }, 'the Authorization header must be "Bearer <token>"'],
        [{ authorization: `Bearer ${tokens.admin} extra` }, 'the Authorization header must be "Bearer <token>"'],
      ];
      for (const [headers, message] of cases) {
        expect(await callOnce(grpc, method, request, headers)).toEqual({ code: Code.Unauthenticated, message });
      }
    });
  });

  it("accepts the scheme in any case and lets a token with every role call everything", async () => {
    expect(await grpc.getStats({}, { headers: { authorization: `bEaReR ${tokens.admin}` } })).toBeDefined();
    for (const method of LeaseQueueService.methods) {
      const outcome = await callOnce(grpc, method, create(method.input, {}), bearer(tokens.admin));
      expect([Code.PermissionDenied, Code.Unauthenticated], `${method.name}: ${outcome.message}`).not.toContain(outcome.code);
    }
  });

  it("lets each role do its work: submit, claim and complete, cancel, read", async () => {
    const as = (name: string) => ({ headers: bearer(tokens[name]) });
    const { job } = await grpc.submit({ queue: "flow", task: "t", payload: { kind: { case: "numberValue", value: 1 } } }, as("producer"));
    const { leases } = await grpc.claim({ queue: "flow", workerId: "w" }, as("worker"));
    expect(leases.map((l) => l.job?.id)).toEqual([job!.id]);
    expect((await grpc.complete({ jobId: job!.id, leaseToken: leases[0].leaseToken }, as("worker"))).job?.state).toBe(4 /* COMPLETED */);
    const { job: second } = await grpc.submit({ queue: "flow", task: "t" }, as("producer"));
    expect((await grpc.cancel({ jobId: second!.id, reason: "not needed" }, as("operator"))).job?.state).toBe(6 /* CANCELLED */);
    expect((await grpc.getJob({ jobId: job!.id }, as("reader"))).job?.state).toBe(4);
    const events = await grpc.listJobEvents({ jobId: job!.id }, as("reader"));
    expect(events.events.map((e) => e.kind)).toEqual([1, 2, 4] /* SUBMITTED, CLAIMED, COMPLETED */);
  });
});

describe("every protocol", () => {
  const transports: Array<[string, (url: string) => Transport]> = [
    ["gRPC", (url) => createGrpcTransport({ baseUrl: url })],
    ["gRPC-Web", (url) => createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1" })],
    ["Connect JSON over HTTP/1.1", (url) => createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: false })],
    ["Connect binary over HTTP/2", (url) => createConnectTransport({ baseUrl: url, httpVersion: "2" })],
  ];

  it.each(transports)("%s: refuses a unary call and a stream without a token, and serves them with one", async (_name, transport) => {
    const client = createClient(LeaseQueueService, transport(t.apiUrl));
    const watch = LeaseQueueService.method.watchEvents;
    const stats = LeaseQueueService.method.getStats;
    expect((await callOnce(client, stats, {}, {})).code).toBe(Code.Unauthenticated);
    expect((await callOnce(client, watch, {}, {})).code).toBe(Code.Unauthenticated);
    expect((await callOnce(client, stats, {}, bearer(tokens.worker))).code).toBe(Code.PermissionDenied);
    expect((await callOnce(client, stats, {}, bearer(tokens.reader))).code).toBeUndefined();
    expect((await callOnce(client, watch, {}, bearer(tokens.reader))).code).toBeUndefined();
  });

  it("answers Connect's 401 with a Bearer challenge, and counts refusals by code", async () => {
    const res = await t.call("GetStats", {});
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: "unauthenticated", message: 'this server requires "Authorization: Bearer <token>"' });
    const raw = await fetch(`${t.apiUrl}/leasequeue.v1.LeaseQueueService/GetStats`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(raw.headers.get("www-authenticate")).toBe('Bearer realm="leasequeue"');
    expect((await t.call("Redrive", { jobId: jobs.theirs }, bearer(tokens.reader))).status).toBe(403);
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/leasequeue_rpc_duration_seconds_count\{method="GetStats",code="unauthenticated"\} [1-9]/);
    expect(metrics).toMatch(/leasequeue_rpc_duration_seconds_count\{method="Redrive",code="permission_denied"\} [1-9]/);
  });
});

describe("what stays open", () => {
  it("serves grpc.health.v1 and reflection without a token", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: t.apiUrl }));
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    const reflection = createClient(ServerReflection, createGrpcTransport({ baseUrl: t.apiUrl }));
    for await (const res of reflection.serverReflectionInfo(streamOf({ messageRequest: { case: "listServices" as const, value: "" } }))) {
      expect(res.messageResponse.case).toBe("listServicesResponse");
      break;
    }
  });

  it("serves the console's files and the side port without a token", async () => {
    expect((await fetch(`${t.apiUrl}/`)).status).not.toBe(401);
    expect((await fetch(`${t.metricsUrl}/metrics`)).status).toBe(200);
    expect((await fetch(`${t.metricsUrl}/health/ready`)).status).toBe(200);
  });
});

/**
 * A limited request for `method` aimed at `queue` (and at the job `jobId`
 * there), built from the request's field names, or undefined when the RPC
 * names no queue or job at all. A new RPC whose request names its queue in
 * a way not listed here fails the test below, to be taught here.
 */
function aimedAt(method: DescMethod, queue: string, jobId: string): object | undefined {
  const leaseToken = "x".repeat(43);
  const fill: Record<string, unknown> = {
    queue,
    jobId,
    leaseToken,
    task: "t",
    workerId: "w",
    confirm: queue,
    jobs: [{ queue, task: "t" }],
    acks: [{ jobId, leaseToken, outcome: { case: "release", value: {} } }],
    start: { queue, workerId: "w" },
    // The schedules seeded in beforeAll are "s-mine" and "s-theirs", each submitting into its queue.
    schedule: { name: `s-${queue}`, recurrence: { case: "cron", value: "@daily" }, template: { queue, task: "t" } },
    name: `s-${queue}`,
    // WaitJob answers at once.
    timeout: { seconds: 0n },
  };
  const names = method.input.fields.map((f) => f.localName);
  if (!names.some((n) => ["queue", "jobId", "jobs", "acks", "start", "schedule", "name"].includes(n))) return undefined;
  return create(method.input, Object.fromEntries(names.filter((n) => n in fill).map((n) => [n, fill[n]])) as never);
}

/** The code of the call, or of its only acknowledgement's result (Acknowledge, Work). */
function codeOf(outcome: Outcome): Code | undefined {
  const result = outcome.response?.results?.[0];
  if (outcome.code === undefined && result?.status !== undefined) return result.status.code === 0 ? undefined : result.status.code;
  return outcome.code;
}

/** What a limited token is told about one job (or schedule): the error, or its acknowledgement's result, with the job's id (or the name) written `<id>`. */
interface JobAnswer {
  code: Code;
  message: string;
  /** Each detail's type and its bytes, as the client received them. */
  details: Array<{ type: string; bytes: string }>;
}

/** The bytes of a detail with `id` replaced (the ids and names compared are of one length, so nothing else moves). */
const withoutId = (bytes: Uint8Array, id: string) => Buffer.from(bytes).toString("latin1").replaceAll(id, "<id>");

/**
 * Calls `method` with `request`, a stream read to its end (Work's requests
 * half-close after their one message, and it ends once every result is
 * sent), and answers the error, or the first acknowledgement result's status
 * when the call succeeded.
 */
async function jobAnswer(
  client: LeaseQueueClient,
  method: DescMethod,
  request: object,
  headers: Record<string, string>,
  id: string,
): Promise<JobAnswer> {
  const fn = (client as unknown as Record<string, (req: unknown, opts: object) => any>)[method.localName];
  const results: any[] = [];
  try {
    if (method.methodKind === "unary") {
      results.push(...(((await fn.call(client, request, { headers })) as { results?: any[] }).results ?? []));
    } else {
      const input = method.methodKind === "bidi_streaming" ? streamOf(request) : request;
      for await (const message of fn.call(client, input, { headers }) as AsyncIterable<{ results?: any[] }>) {
        results.push(...(message.results ?? []));
      }
    }
  } catch (err) {
    const error = ConnectError.from(err);
    // Details a client received are the type name and the bytes (never a message of its own).
    const details = error.details.map((d) =>
      "desc" in d ? { type: d.desc.typeName, bytes: "?" } : { type: d.type, bytes: withoutId(d.value, id) },
    );
    return { code: error.code, message: error.rawMessage.replaceAll(id, "<id>"), details };
  }
  expect(results, `${method.name} answered neither an error nor a result`).toHaveLength(1);
  const status = results[0].status;
  return {
    code: status.code as Code,
    message: (status.message as string).replaceAll(id, "<id>"),
    details: (status.details as Array<{ typeUrl: string; value: Uint8Array }>).map((d) => ({
      type: d.typeUrl.replace(/^type\.googleapis\.com\//, ""),
      bytes: withoutId(d.value, id),
    })),
  };
}

/** The transports the answers of a limited token are compared over: gRPC, and Connect JSON (HTTP/2, for Work). */
const ANSWER_TRANSPORTS: Array<[string, (url: string) => Transport]> = [
  ["gRPC", (url) => createGrpcTransport({ baseUrl: url })],
  // A JSON client decodes an acknowledgement result's details (google.protobuf.Any) with their types registered.
  [
    "Connect JSON over HTTP/2",
    (url) =>
      createConnectTransport({
        baseUrl: url,
        httpVersion: "2",
        useBinaryFormat: false,
        jsonOptions: { registry: createRegistry(ErrorInfoSchema) },
      }),
  ],
];

describe("tokens limited to queues", () => {
  const answeredOverOwnQueues = new Set(["GetStats", "ListSchedules"]);
  /**
   * The RPCs whose request names a job (or a schedule to delete) and no
   * queue: a job of another queue is answered as a job that does not exist
   * (in the acknowledgement's result for Acknowledge), a schedule as a name
   * that names no schedule; the describes below hold the two answers equal.
   */
  const answeredAsMissing = new Set([
    "DeleteSchedule",
    "Heartbeat",
    "Complete",
    "Fail",
    "Release",
    "Snooze",
    "Redrive",
    "Cancel",
    "GetJob",
    "ListJobEvents",
    "Acknowledge",
    "WaitJob",
  ]);
  describe.each(LeaseQueueService.methods.filter((m) => !answeredOverOwnQueues.has(m.name)).map((m) => [m.name, m] as const))(
    "%s",
    (_name, method) => {
      it("refuses another queue, answers a job of another queue as no job, and lets its own through", async () => {
        const headers = bearer(tokens[limitedName(RPC_ROLES[method.name])]);
        const theirs = aimedAt(method, "theirs", jobs.theirs);
        expect(theirs, `teach aimedAt which queue ${method.name} touches`).toBeDefined();
        const refused = await callOnce(grpc, method, theirs!, headers);
        expect(codeOf(refused), refused.message).toBe(answeredAsMissing.has(method.name) ? Code.NotFound : Code.PermissionDenied);
        const mine = await callOnce(grpc, method, aimedAt(method, "mine", jobs.mine)!, headers);
        expect(codeOf(mine), mine.message).not.toBe(Code.PermissionDenied);
      });
    },
  );

  it("names the queue it was sent and the token's own queues, and never the queue of a job", async () => {
    const res = await t.call("Submit", { queue: "theirs", task: "t" }, bearer(tokens["producer-mine"]));
    expect(res.status).toBe(403);
    expect(res.body.message).toBe('queue: queue "theirs" is not permitted; token "producer-mine" may use only the queues also-mine, mine');
    const unknown = jobs.theirs.slice(0, -12) + "000000000000";
    const job = await t.call("GetJob", { jobId: jobs.theirs }, bearer(tokens["reader-mine"]));
    const none = await t.call("GetJob", { jobId: unknown }, bearer(tokens["reader-mine"]));
    expect(none.status).toBe(404);
    expect(job.status).toBe(404);
    expect(JSON.stringify(job.body)).not.toContain("theirs");
    // The whole body, the ErrorInfo's bytes (base64 in `value`) included, with the id written `<id>`.
    const withoutIdIn = (body: any, id: string) =>
      JSON.stringify({
        ...body,
        details: body.details.map((d: any) => ({ ...d, value: withoutId(Buffer.from(d.value, "base64"), id) })),
      }).replaceAll(id, "<id>");
    expect(withoutIdIn(job.body, jobs.theirs)).toBe(withoutIdIn(none.body, unknown));
  });

  it("takes an empty queue as `default`, which is not one of its queues", async () => {
    expect((await t.call("Submit", { task: "t" }, bearer(tokens["producer-mine"]))).status).toBe(403);
    expect((await t.call("Claim", { workerId: "w" }, bearer(tokens["worker-mine"]))).status).toBe(403);
  });

  it("refuses each job of a SubmitBatch outside its queues, by index", async () => {
    const res = await t.call(
      "SubmitBatch",
      {
        jobs: [
          { queue: "mine", task: "t" },
          { queue: "theirs", task: "t" },
        ],
      },
      bearer(tokens["producer-mine"]),
    );
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/^jobs\[1\]\.queue: queue "theirs" is not permitted/);
  });

  it("refuses ListJobs and WatchEvents without a queue filter", async () => {
    const headers = bearer(tokens["reader-mine"]);
    for (const name of ["listJobs", "watchEvents"] as const) {
      const outcome = await callOnce(grpc, LeaseQueueService.method[name], {}, headers);
      expect(outcome.code).toBe(Code.PermissionDenied);
      expect(outcome.message).toMatch(/^queue: is required for a token limited to queues/);
    }
  });

  it("answers GetStats over its own queues only", async () => {
    const all = await grpc.getStats({}, { headers: bearer(tokens.reader) });
    expect(all.queues.map((q) => q.queue)).toEqual(expect.arrayContaining(["mine", "theirs"]));
    const mine = await grpc.getStats({}, { headers: bearer(tokens["reader-mine"]) });
    expect(mine.queues.map((q) => q.queue)).toEqual(["mine"]);
    const own = all.queues.find((q) => q.queue === "mine")!;
    expect(mine.total).toMatchObject({ queue: "", queued: own.queued, running: own.running, completed: own.completed });
  });

  it("lists the schedules of its own queues only, and may not take over another queue's schedule by its name", async () => {
    const all = await grpc.listSchedules({}, { headers: bearer(tokens.reader) });
    expect(all.schedules.map((s) => s.name)).toEqual(expect.arrayContaining(["s-theirs"]));
    const mine = await grpc.listSchedules({}, { headers: bearer(tokens["reader-mine"]) });
    expect(mine.schedules.every((s) => s.template?.queue === "mine")).toBe(true);
    expect(mine.schedules.map((s) => s.name)).not.toContain("s-theirs");
    const takeover = await t.call(
      "CreateSchedule",
      { schedule: { name: "s-theirs", cron: "@hourly", template: { queue: "mine", task: "t" } } },
      bearer(tokens["operator-mine"]),
    );
    expect(takeover.status).toBe(403);
    // The name is taken (a create of a free name succeeds), but by which queue is not said.
    expect(takeover.body.message).toBe(
      'schedule.name: schedule "s-theirs" submits into a queue that is not permitted; token "operator-mine" may use only the queues also-mine, mine',
    );
  });

  it("answers each acknowledgement of another queue's job as one of no job, on its own, and applies the others", async () => {
    const admin = { headers: bearer(tokens.admin) };
    const ids: Record<string, string> = {};
    const held: Record<string, string> = {};
    for (const queue of ["mine", "theirs"]) {
      ids[queue] = (await grpc.submit({ queue, task: "ack" }, admin)).job!.id;
      const { leases } = await grpc.claim({ queue, workerId: "w", maxJobs: 100 }, admin);
      held[queue] = leases.find((l) => l.job?.id === ids[queue])!.leaseToken;
    }
    const ack = (queue: string) => ({ jobId: ids[queue], leaseToken: held[queue], outcome: { case: "complete" as const, value: {} } });
    const res = await grpc.acknowledge({ acks: [ack("theirs"), ack("mine")] }, { headers: bearer(tokens["worker-mine"]) });
    expect(res.results.map((r) => r.status?.code)).toEqual([Code.NotFound, 0]);
    expect(res.results[0].status?.message).toBe(`job ${ids.theirs} does not exist`);
    expect((await grpc.getJob({ jobId: ids.theirs }, admin)).job?.state).toBe(2 /* RUNNING */);
    expect((await grpc.getJob({ jobId: ids.mine }, admin)).job?.state).toBe(4 /* COMPLETED */);
  });

  it("answers the acknowledgements of another queue's jobs on a Work stream as ones of no job, in order with the others", async () => {
    const admin = { headers: bearer(tokens.admin) };
    const lease = async (queue: string) => {
      const id = (await grpc.submit({ queue, task: "work" }, admin)).job!.id;
      const { leases } = await grpc.claim({ queue, workerId: "w", maxJobs: 100 }, admin);
      return { jobId: id, leaseToken: leases.find((l) => l.job?.id === id)!.leaseToken };
    };
    const [a, b, c] = [await lease("mine"), await lease("theirs"), await lease("also-mine")];
    const heartbeat = (l: { jobId: string; leaseToken: string }) => ({ ...l, outcome: { case: "heartbeat" as const, value: {} } });
    const complete = (l: { jobId: string; leaseToken: string }) => ({ ...l, outcome: { case: "complete" as const, value: {} } });
    const results: Array<[string, number | undefined]> = [];
    const abort = new AbortController();
    const requests = (async function* () {
      yield { start: { queue: "mine", workerId: "w" }, acks: [heartbeat(a), heartbeat(b)] };
      yield { acks: [complete(b), complete(c), complete(a)] };
      await new Promise((resolve) => abort.signal.addEventListener("abort", resolve));
    })();
    for await (const res of grpc.work(requests, { headers: bearer(tokens["worker-mine"]), signal: abort.signal })) {
      for (const r of res.results) results.push([r.jobId, r.status?.code]);
      if (results.length === 5) break;
    }
    abort.abort();
    expect(results).toEqual([
      [a.jobId, 0],
      [b.jobId, Code.NotFound],
      [b.jobId, Code.NotFound],
      [c.jobId, 0],
      [a.jobId, 0],
    ]);
  });
});

describe("a job of a queue the token may not use is answered as a job that does not exist", () => {
  /** Every RPC that takes a job id, from the descriptor: a `job_id` field, or acknowledgements. */
  const takesJobId = LeaseQueueService.methods.filter((m) => m.input.fields.some((f) => f.localName === "jobId" || f.localName === "acks"));
  /**
   * WatchEvents takes `job_id` only as a filter, beside the `queue` filter a
   * limited token must set to one of its own queues: a job of another queue
   * matches no event of that filter, as a job that does not exist matches
   * none (test/dispatch/event-feed.test.ts "filters"), and nothing reads the job.
   */
  const byFilterOnly = new Set(["WatchEvents"]);
  const cases = takesJobId.filter((m) => !byFilterOnly.has(m.name));

  it("covers every RPC that takes a job id", () => {
    expect(takesJobId.map((m) => m.name).sort()).toEqual([
      "Acknowledge",
      "Cancel",
      "Claim",
      "Complete",
      "Fail",
      "GetJob",
      "Heartbeat",
      "ListJobEvents",
      "Redrive",
      "Release",
      "Snooze",
      "WaitJob",
      "WatchEvents",
      "Work",
    ]);
  });

  /** A request of `method` about the job `jobId` (a Claim and a Work stream on "also-mine", one of the token's queues). */
  function about(method: DescMethod, jobId: string): object {
    const leaseToken = "x".repeat(43);
    const ack = { jobId, leaseToken, outcome: { case: "complete", value: {} } };
    const fill: Record<string, unknown> = {
      jobId,
      leaseToken,
      acks: [ack],
      queue: "also-mine",
      workerId: "w",
      start: { queue: "also-mine", workerId: "w" },
      timeout: { seconds: 0n },
    };
    const names = method.input.fields.map((f) => f.localName);
    return create(method.input, Object.fromEntries(names.filter((n) => n in fill).map((n) => [n, fill[n]])) as never);
  }

  describe.each(ANSWER_TRANSPORTS)("over %s", (_transport, transport) => {
    it.each(cases.map((m) => [m.name, m] as const))("%s", async (_name, method) => {
      const client = createClient(LeaseQueueService, transport(t.apiUrl));
      const headers = bearer(tokens[limitedName(RPC_ROLES[method.name])]);
      // A well-formed id of the same length that names no job.
      const unknown = jobs.theirs.slice(0, -12) + "000000000000";
      expect((await grpc.getJob({ jobId: jobs.theirs }, { headers: bearer(tokens.admin) })).job?.queue).toBe("theirs");
      const forUnknown = await jobAnswer(client, method, about(method, unknown), headers, unknown);
      // The answer for an id that names no job, as docs/api.md "Errors" has it (in an acknowledgement's result too).
      expect(forUnknown).toMatchObject({ code: Code.NotFound, message: "job <id> does not exist" });
      expect(forUnknown.details.map((d) => d.type)).toEqual(["google.rpc.ErrorInfo"]);
      expect(forUnknown.details[0].bytes).toContain("JOB_NOT_FOUND");
      const forTheirs = await jobAnswer(client, method, about(method, jobs.theirs), headers, jobs.theirs);
      expect(forTheirs).toEqual(forUnknown);
    });
  });
});

describe("a schedule of a queue the token may not use", () => {
  it.each(ANSWER_TRANSPORTS)("is answered to DeleteSchedule as a name that names no schedule, over %s", async (_transport, transport) => {
    const client = createClient(LeaseQueueService, transport(t.apiUrl));
    const headers = bearer(tokens["operator-mine"]);
    const method = LeaseQueueService.method.deleteSchedule;
    const unknown = "s-nobody"; // as long as "s-theirs"
    expect(
      (await grpc.listSchedules({}, { headers: bearer(tokens.admin) })).schedules.find((s) => s.name === "s-theirs")?.template?.queue,
    ).toBe("theirs");
    const forUnknown = await jobAnswer(client, method, { name: unknown }, headers, unknown);
    // docs/api.md "Errors": a name that names no schedule.
    expect(forUnknown).toMatchObject({ code: Code.NotFound, message: 'schedule "<id>" does not exist' });
    expect(forUnknown.details.map((d) => d.type)).toEqual(["google.rpc.ErrorInfo"]);
    expect(forUnknown.details[0].bytes).toContain("SCHEDULE_NOT_FOUND");
    expect(await jobAnswer(client, method, { name: "s-theirs" }, headers, "s-theirs")).toEqual(forUnknown);
    expect((await grpc.listSchedules({}, { headers: bearer(tokens.admin) })).schedules.map((s) => s.name)).toContain("s-theirs");
  });
});
