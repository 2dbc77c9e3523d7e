/**
 * Groups (docs/api.md "Groups") in the service layer: group_key on Submit,
 * SubmitBatch and schedule templates, on Job and JobEvent and as ListJobs'
 * filter; the group rules of UpdateQueue (group_max_running,
 * group_rate_limit, fair, ordered) and QueueStats.config; ListGroups' pages
 * and counts; the leasequeue_queue_groups gauge; and bad input over Connect
 * JSON (as curl sends it) and gRPC, each refusal naming its field.
 *
 * The first part runs the handlers over an in-memory transport on a
 * stand-in store, to hold what the service layer does with the store's
 * answers (page tokens, the page after the last, the mask). The rest runs a
 * real server on a ManualClock, so schedule times are exact.
 */
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import type { Job } from "../../src/domain/job.js";
import { applyConfigUpdate, NO_QUEUE_LIMITS, type QueueConfig } from "../../src/domain/queue-limits.js";
import { createMetrics } from "../../src/metrics/metrics.js";
import { jobHandlers } from "../../src/service/job-handlers.js";
import { queueHandlers } from "../../src/service/queue-handlers.js";
import type { GroupCounts, ListGroupsSpec, ListJobsSpec, QueueCounts, Store } from "../../src/store/store.js";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { EventKind, LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const T0 = Date.UTC(2026, 0, 1, 10, 0, 0);
const SECOND = 1000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Every visible ASCII character (0x21-0x7e) twice over, cut to 128: the longest group key. */
const LONGEST_KEY = (() => {
  const visible = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join("");
  return (visible + visible).slice(0, 128);
})();

/** Group keys the bound refuses, by what is wrong with them. */
const BAD_KEYS: [string, string][] = [
  ["129 characters", "g".repeat(129)],
  ["a space", "customer 42"],
  ["a tab", "customer\t42"],
  ["non-ASCII", "kunde-ä"],
  ["DEL (0x7f)", "customer\u007f"],
];

/** The field a ConnectError's BadRequest names, checked against its message and code. */
function refusedField(err: unknown): string {
  expect(err).toBeInstanceOf(ConnectError);
  const e = ConnectError.from(err);
  expect(e.code, e.message).toBe(Code.InvalidArgument);
  const fields = e.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations.map((v) => v.field));
  expect(fields, e.message).toHaveLength(1);
  expect(e.rawMessage.startsWith(`${fields[0]}: `), e.rawMessage).toBe(true);
  return fields[0];
}

async function refusal(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => {
      throw new Error("expected the call to be refused");
    },
    (err: unknown) => err,
  );
}

// ---------------------------------------------------------------------------
// The handlers on a stand-in store

/** The groups a stand-in store holds, in group_key order, and the specs it was asked with. */
function fakeStore(groups: GroupCounts[], jobs: Job[] = []) {
  const asked = { listGroups: [] as ListGroupsSpec[], listJobs: [] as ListJobsSpec[] };
  let config: QueueConfig = { ...NO_QUEUE_LIMITS };
  const store = {
    listGroups(spec: ListGroupsSpec) {
      asked.listGroups.push(spec);
      return Promise.resolve(groups.filter((g) => g.groupKey > spec.afterKey).slice(0, spec.limit));
    },
    listJobs(spec: ListJobsSpec) {
      asked.listJobs.push(spec);
      const inGroup = (j: Job) => spec.groupKey === undefined || j.groupKey === spec.groupKey;
      const before = (j: Job) => spec.beforeId === undefined || j.id < spec.beforeId;
      return Promise.resolve(jobs.filter((j) => inGroup(j) && before(j)).slice(0, spec.limit));
    },
    updateQueueConfig(_queue: string, update: Parameters<Store["updateQueueConfig"]>[1]) {
      config = applyConfigUpdate(config, update);
      return Promise.resolve(config);
    },
  };
  return { store: store as unknown as Store, asked };
}

function inMemoryClient(store: Store): Client<typeof LeaseQueueService> {
  const clock = new ManualClock(T0);
  const transport = createRouterTransport(({ service }) => {
    service(LeaseQueueService, { ...queueHandlers({ store, clock }), ...jobHandlers({ store, clock }) });
  });
  return createClient(LeaseQueueService, transport);
}

function groupCounts(groupKey: string, queued = 1): GroupCounts {
  return { groupKey, queued, running: 0, retry: 0, oldestPendingTime: queued > 0 ? T0 : null };
}

function storedJob(id: string, groupKey: string): Job {
  return {
    id,
    queue: "q",
    task: "t",
    groupKey,
    payloadJson: "null",
    priority: 0,
    state: "queued",
    attempts: 0,
    maxAttempts: 3,
    retryBaseDelayMs: 15_000,
    scheduleTime: T0,
    createTime: T0,
    updateTime: T0,
    finishTime: null,
    workerId: null,
    leaseExpireTime: null,
    deliveries: 0,
    lastError: null,
    resultJson: null,
    progressJson: null,
    traceContext: null,
    dependsOn: [],
    dependencyCounts: null,
  };
}

describe("ListGroups' handler on a stand-in store", () => {
  it("asks for one group more than the page, and pages from the last key of the page before", async () => {
    const { store, asked } = fakeStore(["a", "b", "c", "d", "e"].map((k) => groupCounts(k)));
    const client = inMemoryClient(store);
    const first = await client.listGroups({ queue: "q", pageSize: 2 });
    expect(first.groups.map((g) => g.groupKey)).toEqual(["a", "b"]);
    expect(first.nextPageToken).not.toBe("");
    const second = await client.listGroups({ queue: "q", pageSize: 2, pageToken: first.nextPageToken });
    expect(second.groups.map((g) => g.groupKey)).toEqual(["c", "d"]);
    const last = await client.listGroups({ queue: "q", pageSize: 2, pageToken: second.nextPageToken });
    expect(last.groups.map((g) => g.groupKey)).toEqual(["e"]);
    expect(last.nextPageToken).toBe("");
    expect(asked.listGroups).toEqual([
      { queue: "q", afterKey: "", limit: 3 },
      { queue: "q", afterKey: "b", limit: 3 },
      { queue: "q", afterKey: "d", limit: 3 },
    ]);
  });

  it("gives no next page when the store has exactly a page, takes 100 for page_size 0 and 1000 at most", async () => {
    const { store, asked } = fakeStore(["a", "b"].map((k) => groupCounts(k)));
    const client = inMemoryClient(store);
    expect((await client.listGroups({ queue: "q", pageSize: 2 })).nextPageToken).toBe("");
    await client.listGroups({ queue: "q" });
    await client.listGroups({ queue: "q", pageSize: 1000 });
    expect(asked.listGroups.map((s) => s.limit)).toEqual([3, 101, 1001]);
  });

  it("maps the counts, and leaves oldest_pending_time absent for a group with nothing pending", async () => {
    const { store } = fakeStore([
      { groupKey: "busy", queued: 0, running: 3, retry: 0, oldestPendingTime: null },
      { groupKey: "waiting", queued: 2, running: 1, retry: 4, oldestPendingTime: T0 + 1500 },
    ]);
    const [busy, waiting] = (await inMemoryClient(store).listGroups({ queue: "q" })).groups;
    expect(busy).toMatchObject({ groupKey: "busy", queued: 0n, running: 3n, retry: 0n });
    expect(busy.oldestPendingTime).toBeUndefined();
    expect(waiting).toMatchObject({ groupKey: "waiting", queued: 2n, running: 1n, retry: 4n });
    expect(timestampMs(waiting.oldestPendingTime!)).toBe(T0 + 1500);
  });

  it("refuses a missing queue, page_size out of 1..1000, and tokens it did not issue for the queue", async () => {
    const { store, asked } = fakeStore(["a", "b", "c"].map((k) => groupCounts(k)));
    const client = inMemoryClient(store);
    const token = (await client.listGroups({ queue: "q", pageSize: 1 })).nextPageToken;
    const listJobsToken = Buffer.from(JSON.stringify({ b: "a", f: JSON.stringify(["q"]) })).toString("base64url");
    const badKeyToken = Buffer.from(JSON.stringify({ b: "a b", f: JSON.stringify(["q"]), r: "ListGroups" })).toString("base64url");
    const cases: [Parameters<typeof client.listGroups>[0], string][] = [
      [{}, "queue"],
      [{ queue: "bad name" }, "queue"],
      [{ queue: "q", pageSize: 1001 }, "page_size"],
      [{ queue: "q", pageSize: -1 }, "page_size"],
      [{ queue: "q", pageToken: "garbage" }, "page_token"],
      [{ queue: "other", pageToken: token }, "page_token"],
      [{ queue: "q", pageToken: listJobsToken }, "page_token"],
      [{ queue: "q", pageToken: badKeyToken }, "page_token"],
    ];
    const before = asked.listGroups.length;
    for (const [req, field] of cases) expect(refusedField(await refusal(client.listGroups(req))), JSON.stringify(req)).toBe(field);
    expect(asked.listGroups.length).toBe(before);
  });
});

describe("ListJobs' group_key filter on a stand-in store", () => {
  it("passes the filter to the store (empty: any group), and binds the page token to it", async () => {
    const jobs = ["09", "08", "07", "06"].map((n, i) => storedJob(`0190b3c4-0000-7000-8000-0000000000${n}`, i % 2 === 0 ? "even" : "odd"));
    const { store, asked } = fakeStore([], jobs);
    const client = inMemoryClient(store);
    const page = await client.listJobs({ queue: "q", groupKey: "even", pageSize: 1 });
    expect(page.jobs.map((j) => [j.id, j.groupKey])).toEqual([[jobs[0].id, "even"]]);
    const next = await client.listJobs({ queue: "q", groupKey: "even", pageSize: 1, pageToken: page.nextPageToken });
    expect(next.jobs.map((j) => j.id)).toEqual([jobs[2].id]);
    await client.listJobs({ queue: "q" });
    expect(asked.listJobs.map((s) => s.groupKey)).toEqual(["even", "even", undefined]);

    for (const other of [{ queue: "q" }, { queue: "q", groupKey: "odd" }]) {
      expect(refusedField(await refusal(client.listJobs({ ...other, pageToken: page.nextPageToken })))).toBe("page_token");
    }
    // A ListJobs token without a group (and one issued before groups existed) reads as before.
    const plain = await client.listJobs({ queue: "q", pageSize: 1 });
    const legacy = Buffer.from(JSON.stringify({ b: jobs[0].id, f: JSON.stringify(["q", []]) })).toString("base64url");
    expect(plain.nextPageToken).toBe(legacy);
    for (const [, groupKey] of BAD_KEYS) expect(refusedField(await refusal(client.listJobs({ queue: "q", groupKey })))).toBe("group_key");
    // A ListGroups token is not a ListJobs token.
    const groupsToken = Buffer.from(JSON.stringify({ b: "a", f: JSON.stringify(["q", []]), r: "ListGroups" })).toString("base64url");
    expect(refusedField(await refusal(client.listJobs({ queue: "q", pageToken: groupsToken })))).toBe("page_token");
  });
});

describe("UpdateQueue's group rules on a stand-in store", () => {
  it("replaces the fields the mask names, all of them for * or an empty mask", async () => {
    const client = inMemoryClient(fakeStore([]).store);
    const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });
    const set = await client.updateQueue({
      queue: "q",
      config: { groupMaxRunning: 2, groupRateLimit: 30, fair: true, ordered: true, maxRunning: 9 },
      updateMask: mask("group_max_running", "group_rate_limit", "fair", "ordered"),
    });
    expect(set.config).toMatchObject({ maxRunning: 0, groupMaxRunning: 2, groupRateLimit: 30, fair: true, ordered: true });
    const fairOff = await client.updateQueue({ queue: "q", config: { ordered: false }, updateMask: mask("fair") });
    expect(fairOff.config).toMatchObject({ groupMaxRunning: 2, groupRateLimit: 30, fair: false, ordered: true });
    const star = await client.updateQueue({ queue: "q", config: { fair: true }, updateMask: mask("*") });
    expect(star.config).toMatchObject({ maxRunning: 0, groupMaxRunning: 0, groupRateLimit: 0, fair: true, ordered: false });
    expect((await client.updateQueue({ queue: "q" })).config).toBeUndefined();
  });

  it("refuses negative and too large group limits, and unknown paths, listing the valid ones", async () => {
    const client = inMemoryClient(fakeStore([]).store);
    const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });
    for (const groupMaxRunning of [-1, 100_001]) {
      expect(refusedField(await refusal(client.updateQueue({ queue: "q", config: { groupMaxRunning } })))).toBe("config.group_max_running");
    }
    for (const groupRateLimit of [-1, 1_000_001]) {
      expect(refusedField(await refusal(client.updateQueue({ queue: "q", config: { groupRateLimit } })))).toBe("config.group_rate_limit");
    }
    const unknown = await refusal(client.updateQueue({ queue: "q", updateMask: mask("fair", "tenants") }));
    expect(refusedField(unknown)).toBe("update_mask");
    expect(ConnectError.from(unknown).rawMessage).toContain(
      'use max_running, rate_limit, rate_period, group_max_running, group_rate_limit, fair, ordered or "*"',
    );
  });
});

describe("leasequeue_queue_groups", () => {
  it("counts the pending groups of each queue that has group rules, and of no other", async () => {
    const counts = (queue: string, config: Partial<QueueConfig>): QueueCounts => ({
      queue,
      counts: { queued: 1, running: 0, retry: 0, completed: 0, dead: 0, cancelled: 0, waiting: 0 },
      oldestPendingSince: T0,
      paused: false,
      config: { ...NO_QUEUE_LIMITS, ...config },
    });
    const asked: string[] = [];
    const store = {
      queueCounts: () =>
        Promise.resolve([
          counts("fair", { fair: true }),
          counts("ordered", { ordered: true }),
          counts("capped", { groupMaxRunning: 2 }),
          counts("plain", { maxRunning: 5 }),
        ]),
      countPendingGroups: (queue: string) => {
        asked.push(queue);
        return Promise.resolve(({ fair: 3, ordered: 1, capped: 0 } as Record<string, number>)[queue] ?? -1);
      },
      clockOffsetMs: () => 0,
      onCommitted: () => () => {},
      onWriteOutcome: () => () => {},
    } as unknown as Store;
    const metrics = createMetrics(store, new ManualClock(T0));
    cleanups.push(() => metrics.close());
    const text = await metrics.registry.metrics();
    const lines = text.split("\n").filter((l) => l.startsWith("leasequeue_queue_groups{"));
    expect(lines.sort()).toEqual([
      'leasequeue_queue_groups{queue="capped"} 0',
      'leasequeue_queue_groups{queue="fair"} 3',
      'leasequeue_queue_groups{queue="ordered"} 1',
    ]);
    expect(asked.sort()).toEqual(["capped", "fair", "ordered"]);
  });
});

// ---------------------------------------------------------------------------
// A real server

async function server(clock = new ManualClock(T0)): Promise<TestServer & { clock: ManualClock }> {
  const t = await startTestServer({}, { clock, sweepIntervalMs: 60_000 });
  cleanups.push(() => t.close());
  return Object.assign(t, { clock });
}

function grpcClient(t: TestServer): Client<typeof LeaseQueueService> {
  return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
}

async function ok(t: TestServer, method: string, body: unknown): Promise<any> {
  const res = await t.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/** 400 invalid_argument over Connect JSON, the message and a BadRequest naming exactly `field`. */
async function expectInvalid(t: TestServer, method: string, body: unknown, field: string): Promise<string> {
  const res = await t.call(method, body);
  const context = `${method} ${JSON.stringify(body).slice(0, 200)}: ${JSON.stringify(res.body)}`;
  expect(res.status, context).toBe(400);
  expect(res.body.code, context).toBe("invalid_argument");
  expect(res.body.message.startsWith(`${field}: `), context).toBe(true);
  const violations = (res.body.details ?? []).find((d: any) => d.type === "google.rpc.BadRequest")?.debug?.fieldViolations;
  expect(violations, context).toEqual([{ field, description: expect.any(String) }]);
  return res.body.message as string;
}

/** Milliseconds of a proto3 JSON Timestamp, or undefined when absent. */
const ms = (timestamp: string | undefined) => (timestamp === undefined ? undefined : Date.parse(timestamp));

async function jobCount(t: TestServer): Promise<number> {
  const total = (await ok(t, "GetStats", {})).total ?? {};
  return ["queued", "running", "retry", "completed", "dead", "cancelled"].reduce((n, k) => n + Number(total[k] ?? 0), 0);
}

describe("bad input", () => {
  it.each(BAD_KEYS)(
    "refuses a group key with %s in Submit, SubmitBatch, a schedule template and ListJobs (Connect JSON)",
    async (_, groupKey) => {
      const t = await server();
      const good = { queue: "g", task: "t" };
      await expectInvalid(t, "Submit", { ...good, groupKey }, "group_key");
      await expectInvalid(t, "SubmitBatch", { jobs: [good, { ...good, groupKey }, good] }, "jobs[1].group_key");
      const schedule = { name: "nightly", cron: "@daily", template: { ...good, groupKey } };
      await expectInvalid(t, "CreateSchedule", { schedule }, "schedule.template.group_key");
      await expectInvalid(t, "ListJobs", { queue: "g", groupKey }, "group_key");
      expect(await jobCount(t)).toBe(0);
      expect((await ok(t, "ListSchedules", {})).schedules ?? []).toEqual([]);
    },
  );

  it("refuses bad group rules and unknown mask paths in UpdateQueue, and configures nothing (Connect JSON)", async () => {
    const t = await server();
    for (const groupMaxRunning of [-1, 100_001]) {
      const message = await expectInvalid(t, "UpdateQueue", { queue: "g", config: { groupMaxRunning } }, "config.group_max_running");
      expect(message).toMatch(/between 0 and 100000/);
    }
    for (const groupRateLimit of [-1, 1_000_001]) {
      const message = await expectInvalid(t, "UpdateQueue", { queue: "g", config: { groupRateLimit } }, "config.group_rate_limit");
      expect(message).toMatch(/between 0 and 1000000/);
    }
    const unknown = await expectInvalid(
      t,
      "UpdateQueue",
      { queue: "g", config: { fair: true }, updateMask: "fair,tenants" },
      "update_mask",
    );
    expect(unknown).toContain('"tenants"');
    expect(unknown).toContain("max_running, rate_limit, rate_period, group_max_running, group_rate_limit, fair, ordered");
    expect((await ok(t, "GetStats", {})).queues).toBeUndefined();
  });

  it("refuses ListGroups without a queue, with page_size 1001 or a token it did not issue (Connect JSON)", async () => {
    const t = await server();
    expect(await expectInvalid(t, "ListGroups", {}, "queue")).toBe("queue: is required");
    await expectInvalid(t, "ListGroups", { queue: "bad name" }, "queue");
    await expectInvalid(t, "ListGroups", { queue: "g", pageSize: 1001 }, "page_size");
    await expectInvalid(t, "ListGroups", { queue: "g", pageSize: -1 }, "page_size");
    await expectInvalid(t, "ListGroups", { queue: "g", pageToken: "garbage" }, "page_token");
    await ok(t, "SubmitBatch", { jobs: ["a", "b", "c"].map((groupKey) => ({ queue: "g", task: "t", groupKey })) });
    const { nextPageToken } = await ok(t, "ListGroups", { queue: "g", pageSize: 1 });
    expect(nextPageToken).toEqual(expect.any(String));
    await expectInvalid(t, "ListGroups", { queue: "other", pageToken: nextPageToken }, "page_token");
    await expectInvalid(t, "ListJobs", { queue: "g", pageToken: nextPageToken }, "page_token");
    const jobsToken = (await ok(t, "ListJobs", { queue: "g", pageSize: 1 })).nextPageToken;
    await expectInvalid(t, "ListGroups", { queue: "g", pageToken: jobsToken }, "page_token");
  });

  it("refuses the same over gRPC, with a BadRequest naming the field", async () => {
    const t = await server();
    const client = grpcClient(t);
    const good = { queue: "g", task: "t" };
    const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });
    const cases: [string, () => Promise<unknown>][] = [
      ["group_key", () => client.submit({ ...good, groupKey: "g".repeat(129) })],
      ["group_key", () => client.submit({ ...good, groupKey: "customer 42" })],
      ["jobs[1].group_key", () => client.submitBatch({ jobs: [good, { ...good, groupKey: "g".repeat(129) }] })],
      ["jobs[1].group_key", () => client.submitBatch({ jobs: [good, { ...good, groupKey: "a b" }] })],
      [
        "schedule.template.group_key",
        () =>
          client.createSchedule({
            schedule: { name: "nightly", recurrence: { case: "cron", value: "@daily" }, template: { ...good, groupKey: "a b" } },
          }),
      ],
      ["group_key", () => client.listJobs({ queue: "g", groupKey: "g".repeat(129) })],
      ["config.group_max_running", () => client.updateQueue({ queue: "g", config: { groupMaxRunning: -1 } })],
      ["config.group_rate_limit", () => client.updateQueue({ queue: "g", config: { groupRateLimit: 1_000_001 } })],
      // Binary masks carry the proto's field names: camelCase is an unknown path.
      ["update_mask", () => client.updateQueue({ queue: "g", config: { fair: true }, updateMask: mask("groupMaxRunning") })],
      ["update_mask", () => client.updateQueue({ queue: "g", updateMask: mask("ordered", "tenants") })],
      ["queue", () => client.listGroups({})],
      ["page_size", () => client.listGroups({ queue: "g", pageSize: 1001 })],
      ["page_token", () => client.listGroups({ queue: "g", pageToken: "garbage" })],
    ];
    for (const [field, call] of cases) expect(refusedField(await refusal(call()))).toBe(field);
    expect(await jobCount(t)).toBe(0);
  });
});

describe("group_key on jobs and events", () => {
  it("is stored at submit and shown by Submit, SubmitBatch, GetJob, ListJobs (filtered by it), ListJobEvents and leases", async () => {
    const t = await server();
    const { job } = await ok(t, "Submit", { queue: "g", task: "t", groupKey: "customer-42" });
    expect(job.groupKey).toBe("customer-42");
    const ungrouped = (await ok(t, "Submit", { queue: "g", task: "t" })).job;
    expect(ungrouped.groupKey).toBeUndefined();
    const { results } = await ok(t, "SubmitBatch", {
      jobs: [
        { queue: "g", task: "t", groupKey: "customer-7" },
        { queue: "g", task: "t", groupKey: LONGEST_KEY },
        { queue: "g", task: "t", groupKey: "customer-42" },
      ],
      view: "JOB_VIEW_BASIC",
    });
    expect(results.map((r: any) => r.job.groupKey)).toEqual(["customer-7", LONGEST_KEY, "customer-42"]);
    const last = results[2].job;

    expect((await ok(t, "GetJob", { jobId: job.id })).job.groupKey).toBe("customer-42");
    expect((await ok(t, "GetJob", { jobId: results[1].job.id })).job.groupKey).toBe(LONGEST_KEY);

    // Newest first, only the group's jobs, paged within the filter.
    const listed = await ok(t, "ListJobs", { queue: "g", groupKey: "customer-42" });
    expect(listed.jobs.map((j: any) => j.id)).toEqual([last.id, job.id]);
    expect(listed.jobs.every((j: any) => j.groupKey === "customer-42")).toBe(true);
    const first = await ok(t, "ListJobs", { queue: "g", groupKey: "customer-42", pageSize: 1 });
    expect(first.jobs.map((j: any) => j.id)).toEqual([last.id]);
    const second = await ok(t, "ListJobs", { queue: "g", groupKey: "customer-42", pageSize: 1, pageToken: first.nextPageToken });
    expect(second.jobs.map((j: any) => j.id)).toEqual([job.id]);
    expect(second.nextPageToken ?? "").toBe("");
    await expectInvalid(t, "ListJobs", { queue: "g", groupKey: "customer-7", pageToken: first.nextPageToken }, "page_token");
    await expectInvalid(t, "ListJobs", { queue: "g", pageToken: first.nextPageToken }, "page_token");
    expect((await ok(t, "ListJobs", { queue: "g" })).jobs).toHaveLength(5);
    expect((await ok(t, "ListJobs", { queue: "g", groupKey: "nobody" })).jobs ?? []).toEqual([]);

    const { events } = await ok(t, "ListJobEvents", { jobId: job.id });
    expect(events[0]).toMatchObject({ kind: "EVENT_KIND_SUBMITTED", groupKey: "customer-42" });
    expect((await ok(t, "ListJobEvents", { jobId: ungrouped.id })).events[0].groupKey).toBeUndefined();

    // Leases carry it, as JSON and as binary (the server's own Lease encoder) over gRPC.
    const byId = new Map([job, ungrouped, ...results.map((r: any) => r.job)].map((j: any) => [j.id, j.groupKey ?? ""]));
    const json = await ok(t, "Claim", { queue: "g", workerId: "w", maxJobs: 2 });
    const binary = await grpcClient(t).claim({ queue: "g", workerId: "w", maxJobs: 3 });
    const leased = [
      ...json.leases.map((l: any) => [l.job.id, l.job.groupKey ?? ""]),
      ...binary.leases.map((l) => [l.job!.id, l.job!.groupKey]),
    ];
    expect(leased).toHaveLength(5);
    for (const [id, groupKey] of leased) expect(groupKey, id).toBe(byId.get(id));
  });

  it("is on every event WatchEvents streams, over Connect JSON and gRPC", async () => {
    const t = await server();
    await ok(t, "SubmitBatch", {
      jobs: [
        { queue: "w", task: "t", groupKey: "tenant-a" },
        { queue: "w", task: "t" },
        { queue: "w", task: "t", groupKey: "tenant-b" },
      ],
    });
    const lease = (await ok(t, "Claim", { queue: "w", workerId: "w" })).leases[0];
    await ok(t, "Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken });

    for (const client of [t.client, grpcClient(t)]) {
      const abort = new AbortController();
      cleanups.push(() => abort.abort());
      const seen: { jobId: string; kind: EventKind; groupKey: string }[] = [];
      try {
        for await (const m of client.watchEvents({ queue: "w", afterSequence: 0n }, { signal: abort.signal })) {
          if (m.event === undefined) continue;
          seen.push({ jobId: m.event.jobId, kind: m.event.kind, groupKey: m.event.groupKey });
          if (seen.length === 5) abort.abort();
        }
      } catch (err) {
        if (!abort.signal.aborted) throw err;
      }
      expect(seen.map((e) => e.kind)).toEqual([
        EventKind.SUBMITTED,
        EventKind.SUBMITTED,
        EventKind.SUBMITTED,
        EventKind.CLAIMED,
        EventKind.COMPLETED,
      ]);
      expect(seen.slice(0, 3).map((e) => e.groupKey)).toEqual(["tenant-a", "", "tenant-b"]);
      for (const e of seen.slice(3)) expect(e.groupKey).toBe(lease.job.groupKey ?? "");
    }
  });

  it("a schedule's template carries it, and CreateSchedule and ListSchedules show it", async () => {
    const t = await server();
    const template = { queue: "s", task: "digest.send", groupKey: "tenant-9" };
    const created = await ok(t, "CreateSchedule", { schedule: { name: "digest", interval: "3600s", template } });
    expect(created.schedule.template).toMatchObject(template);
    const { schedules } = await ok(t, "ListSchedules", {});
    expect(schedules.map((s: any) => s.template.groupKey)).toEqual(["tenant-9"]);
    const plain = await ok(t, "CreateSchedule", { schedule: { name: "plain", interval: "3600s", template: { queue: "s", task: "t" } } });
    expect(plain.schedule.template.groupKey).toBeUndefined();
  });
});

describe("ListGroups", () => {
  /**
   * Groups a..e of queue "lg" in every state: a (2 queued), b (1 in retry
   * until T0 + 30 s), c (1 running), d (1 queued, delayed to T0 + 60 s), e (1
   * queued); f has only a completed job and there is a job without a group:
   * neither is listed.
   */
  async function fiveGroups(t: TestServer): Promise<void> {
    await ok(t, "SubmitBatch", {
      jobs: [
        { queue: "lg", task: "t", groupKey: "a" },
        { queue: "lg", task: "t", groupKey: "a" },
        { queue: "lg", task: "t", groupKey: "b", priority: 5 },
        { queue: "lg", task: "t", groupKey: "c", priority: 10 },
        { queue: "lg", task: "t", groupKey: "d", delay: "60s" },
        { queue: "lg", task: "t", groupKey: "e" },
        { queue: "lg", task: "t", groupKey: "f", priority: 20 },
        { queue: "lg", task: "t" },
        { queue: "elsewhere", task: "t", groupKey: "a" },
      ],
    });
    const claimOne = async () => (await ok(t, "Claim", { queue: "lg", workerId: "w" })).leases[0];
    const f = await claimOne();
    expect(f.job.groupKey).toBe("f");
    await ok(t, "Complete", { jobId: f.job.id, leaseToken: f.leaseToken });
    expect((await claimOne()).job.groupKey).toBe("c");
    const b = await claimOne();
    expect(b.job.groupKey).toBe("b");
    await ok(t, "Fail", { jobId: b.job.id, leaseToken: b.leaseToken, error: "busy", retryDelay: "30s" });
  }

  it("pages the queue's groups with unfinished jobs in group_key order, two at a time, with their counts (Connect JSON)", async () => {
    const t = await server();
    await fiveGroups(t);
    const page = async (pageToken = "") => ok(t, "ListGroups", { queue: "lg", pageSize: 2, pageToken });
    const norm = (groups: any[]) => groups.map((g) => ({ ...g, oldestPendingTime: ms(g.oldestPendingTime) }));

    const first = await page();
    expect(norm(first.groups)).toEqual([
      { groupKey: "a", queued: "2", oldestPendingTime: T0 },
      { groupKey: "b", retry: "1", oldestPendingTime: T0 + 30 * SECOND },
    ]);
    const second = await page(first.nextPageToken);
    expect(norm(second.groups)).toEqual([
      { groupKey: "c", running: "1", oldestPendingTime: undefined },
      { groupKey: "d", queued: "1", oldestPendingTime: T0 + 60 * SECOND },
    ]);
    const third = await page(second.nextPageToken);
    expect(norm(third.groups)).toEqual([{ groupKey: "e", queued: "1", oldestPendingTime: T0 }]);
    expect(third.nextPageToken ?? "").toBe("");

    // page_size 0 means 100: all five at once, no next page.
    const all = await ok(t, "ListGroups", { queue: "lg" });
    expect(all.groups.map((g: any) => g.groupKey)).toEqual(["a", "b", "c", "d", "e"]);
    expect(all.nextPageToken ?? "").toBe("");
    expect((await ok(t, "ListGroups", { queue: "elsewhere" })).groups.map((g: any) => g.groupKey)).toEqual(["a"]);
    expect((await ok(t, "ListGroups", { queue: "empty" })).groups ?? []).toEqual([]);
  });

  it("answers the same over gRPC, with oldest_pending_time absent for a group with nothing pending", async () => {
    const t = await server();
    await fiveGroups(t);
    const client = grpcClient(t);
    const keys: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const res = await client.listGroups({ queue: "lg", pageSize: 2, pageToken });
      keys.push(...res.groups.map((g) => g.groupKey));
      pageToken = res.nextPageToken;
      pages++;
    } while (pageToken !== "");
    expect([pages, keys]).toEqual([3, ["a", "b", "c", "d", "e"]]);
    const { groups } = await client.listGroups({ queue: "lg" });
    const c = groups.find((g) => g.groupKey === "c")!;
    expect(c).toMatchObject({ queued: 0n, running: 1n, retry: 0n });
    expect(c.oldestPendingTime).toBeUndefined();
    const b = groups.find((g) => g.groupKey === "b")!;
    expect(timestampMs(b.oldestPendingTime!)).toBe(T0 + 30 * SECOND);
  });
});

describe("UpdateQueue's group rules", () => {
  it("sets the four fields, answers them, and GetStats shows them in QueueStats.config (Connect JSON)", async () => {
    const t = await server();
    const rules = { groupMaxRunning: 2, groupRateLimit: 30, fair: true, ordered: true };
    const set = await ok(t, "UpdateQueue", {
      queue: "rules",
      config: { ...rules, ratePeriod: "60s", maxRunning: 7 },
      updateMask: "groupMaxRunning,groupRateLimit,fair,ordered,ratePeriod",
    });
    expect(set).toEqual({ config: { ...rules, ratePeriod: "60s" } });
    const stats = async () => (await ok(t, "GetStats", {})).queues?.find((q: any) => q.queue === "rules")?.config;
    expect(await stats()).toEqual({ ...rules, ratePeriod: "60s" });

    // The mask keeps the fields it leaves out; a queue with only a group rule still shows its config.
    expect(await ok(t, "UpdateQueue", { queue: "rules", config: { fair: false, ordered: false }, updateMask: "fair" })).toEqual({
      config: { groupMaxRunning: 2, groupRateLimit: 30, ordered: true, ratePeriod: "60s" },
    });
    expect(await ok(t, "UpdateQueue", { queue: "rules", config: { fair: true }, updateMask: "*" })).toEqual({
      config: { fair: true, ratePeriod: "1s" },
    });
    expect(await stats()).toEqual({ fair: true, ratePeriod: "1s" });
    expect(await ok(t, "UpdateQueue", { queue: "rules" })).toEqual({});
    expect(await stats()).toBeUndefined();
  });

  it("sets them over gRPC by snake_case paths, and the gauge counts the queue's pending groups", async () => {
    const t = await server();
    const client = grpcClient(t);
    const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });
    const answered = await client.updateQueue({
      queue: "grpc-rules",
      config: { groupMaxRunning: 3, groupRateLimit: 5, fair: true, ordered: true },
      updateMask: mask("group_max_running", "group_rate_limit", "fair", "ordered"),
    });
    expect(answered.config).toMatchObject({
      maxRunning: 0,
      rateLimit: 0,
      groupMaxRunning: 3,
      groupRateLimit: 5,
      fair: true,
      ordered: true,
    });
    const stats = await client.getStats({});
    expect(stats.queues.find((q) => q.queue === "grpc-rules")?.config).toMatchObject({ groupMaxRunning: 3, fair: true, ordered: true });

    await client.submitBatch({
      jobs: [
        { queue: "grpc-rules", task: "t", groupKey: "x" },
        { queue: "grpc-rules", task: "t", groupKey: "y" },
        { queue: "grpc-rules", task: "t", groupKey: "y" },
        { queue: "grpc-rules", task: "t" },
        { queue: "no-rules", task: "t", groupKey: "z" },
      ],
    });
    const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/^leasequeue_queue_groups\{queue="grpc-rules"\} 2$/m);
    expect(text).not.toMatch(/^leasequeue_queue_groups\{queue="no-rules"\}/m);
  });
});
