/**
 * Authentication on a real server (LEASEQUEUE_AUTH_FILE), SECURITY.md
 * "Authentication".
 *
 * Every RPC of the service descriptor is called with a token of each role:
 * the role of the table in docs/api.md "RPCs" gets through, every other is
 * `permission_denied`; no token, an unknown one or a malformed header is
 * `unauthenticated`. The RPCs are taken from the descriptor, so an RPC added
 * later is covered by itself, and one without a role fails here. Tokens
 * limited to queues are refused, RPC by RPC, what lies outside them. Health,
 * reflection, the console's files and the side port stay open.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

describe("tokens limited to queues", () => {
  const answeredOverOwnQueues = new Set(["GetStats", "ListSchedules"]);
  describe.each(LeaseQueueService.methods.filter((m) => !answeredOverOwnQueues.has(m.name)).map((m) => [m.name, m] as const))(
    "%s",
    (_name, method) => {
      it("refuses another queue, or a job of another queue, and lets its own through", async () => {
        const headers = bearer(tokens[limitedName(RPC_ROLES[method.name])]);
        const theirs = aimedAt(method, "theirs", jobs.theirs);
        expect(theirs, `teach aimedAt which queue ${method.name} touches`).toBeDefined();
        const refused = await callOnce(grpc, method, theirs!, headers);
        expect(codeOf(refused), refused.message).toBe(Code.PermissionDenied);
        const mine = await callOnce(grpc, method, aimedAt(method, "mine", jobs.mine)!, headers);
        expect(codeOf(mine), mine.message).not.toBe(Code.PermissionDenied);
      });
    },
  );

  it("says which queue and which queues the token may use", async () => {
    const res = await t.call("Submit", { queue: "theirs", task: "t" }, bearer(tokens["producer-mine"]));
    expect(res.status).toBe(403);
    expect(res.body.message).toBe('queue: queue "theirs" is not permitted; token "producer-mine" may use only the queues also-mine, mine');
    const job = await t.call("GetJob", { jobId: jobs.theirs }, bearer(tokens["reader-mine"]));
    expect(job.body.message).toBe(
      `job_id: job ${jobs.theirs} is in queue "theirs", which is not permitted; token "reader-mine" may use only the queues also-mine, mine`,
    );
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
    expect(takeover.body.message).toBe(
      'schedule.name: schedule "s-theirs" submits into queue "theirs", which is not permitted; token "operator-mine" may use only the queues also-mine, mine',
    );
  });

  it("refuses each acknowledgement of another queue's job on its own, and applies the others", async () => {
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
    expect(res.results.map((r) => r.status?.code)).toEqual([Code.PermissionDenied, 0]);
    expect(res.results[0].status?.message).toMatch(/^acks\[0\]\.job_id: job .* is in queue "theirs"/);
    expect((await grpc.getJob({ jobId: ids.theirs }, admin)).job?.state).toBe(2 /* RUNNING */);
    expect((await grpc.getJob({ jobId: ids.mine }, admin)).job?.state).toBe(4 /* COMPLETED */);
  });

  it("refuses the acknowledgements of another queue's jobs on a Work stream, in order with the others", async () => {
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
      [b.jobId, Code.PermissionDenied],
      [b.jobId, Code.PermissionDenied],
      [c.jobId, 0],
      [a.jobId, 0],
    ]);
  });
});
