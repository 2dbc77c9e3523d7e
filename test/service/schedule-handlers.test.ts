/**
 * Schedules (docs/api.md "Schedules") against a real server on a manual
 * clock: CreateSchedule, ListSchedules and DeleteSchedule over Connect JSON
 * (as curl sends them) and gRPC; a due run submits its job with a SCHEDULED
 * event first; replacing and pausing; a schedule survives a restart, and the
 * run missed while the server was down is submitted when it starts; bad input
 * is refused naming the field.
 *
 * Runs are made due without waiting: the clock moves past the next run,
 * and a CreateSchedule (which re-arms the server's timer) or a start lets
 * the server fire; the test waits for the SCHEDULED event on WatchEvents.
 */
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/app.js";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { EventKind, LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const T0 = Date.parse("2026-01-01T10:00:00Z");
const MINUTE = 60_000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(clock = new ManualClock(T0)): Promise<TestServer & { clock: ManualClock }> {
  const t = await startTestServer({}, { clock, sweepIntervalMs: 60_000 });
  cleanups.push(() => t.close());
  return Object.assign(t, { clock });
}

async function ok(t: TestServer, method: string, body: unknown) {
  const res = await t.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

function grpcClient(t: TestServer): Client<typeof LeaseQueueService> {
  return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
}

/** Resolves with the first SCHEDULED event the server streams (replayed from the start of its history). */
function nextScheduledEvent(t: TestServer) {
  const abort = new AbortController();
  cleanups.push(() => abort.abort());
  return (async () => {
    for await (const m of t.client.watchEvents({ afterSequence: 0n }, { signal: abort.signal })) {
      if (m.event?.kind === EventKind.SCHEDULED) {
        abort.abort();
        return m.event;
      }
    }
    throw new Error("WatchEvents ended");
  })().catch((err: unknown) => {
    if (abort.signal.aborted && !(err instanceof Error && err.message === "WatchEvents ended")) return undefined;
    throw err;
  });
}

const nightly = {
  name: "nightly-report",
  cron: "0 3 * * *",
  timezone: "Europe/Berlin",
  template: { queue: "reports", task: "report.build", payload: { kind: "daily" } },
};

describe("schedules over Connect JSON", () => {
  it("creates a schedule with defaults applied and its next run, lists it, and deletes it", async () => {
    const t = await server();
    const created = await ok(t, "CreateSchedule", { schedule: nightly });
    expect(created).toEqual({
      schedule: {
        name: "nightly-report",
        cron: "0 3 * * *",
        timezone: "Europe/Berlin",
        template: { queue: "reports", task: "report.build", payload: { kind: "daily" }, maxAttempts: 3, retryBaseDelay: "15s" },
        // 03:00 in Berlin in winter is 02:00 UTC.
        nextRunTime: "2026-01-02T02:00:00Z",
      },
    });
    await ok(t, "CreateSchedule", { schedule: { name: "every-5m", interval: "300s", template: { task: "ping" } } });
    const listed = await ok(t, "ListSchedules", {});
    expect(listed.schedules.map((s: any) => [s.name, s.nextRunTime, s.template.queue, s.timezone])).toEqual([
      ["every-5m", "2026-01-01T10:05:00Z", "default", "UTC"],
      ["nightly-report", "2026-01-02T02:00:00Z", "reports", "Europe/Berlin"],
    ]);
    expect(await ok(t, "DeleteSchedule", { name: "every-5m" })).toEqual({});
    expect((await ok(t, "ListSchedules", {})).schedules.map((s: any) => s.name)).toEqual(["nightly-report"]);
    const again = await t.call("DeleteSchedule", { name: "every-5m" });
    expect(again.status).toBe(404);
    expect(again.body.code).toBe("not_found");
    expect(again.body.message).toBe('schedule "every-5m" does not exist');
    expect(again.body.details[0].debug).toMatchObject({
      reason: "SCHEDULE_NOT_FOUND",
      domain: "leasequeue",
      metadata: { name: "every-5m" },
    });
  });

  it("replaces a schedule of the same name; paused, it has no next run and submits nothing", async () => {
    const t = await server();
    await ok(t, "CreateSchedule", { schedule: nightly });
    const paused = await ok(t, "CreateSchedule", { schedule: { ...nightly, paused: true } });
    expect(paused.schedule.paused).toBe(true);
    expect(paused.schedule.nextRunTime).toBeUndefined();
    const replaced = await ok(t, "CreateSchedule", { schedule: { ...nightly, cron: "@hourly", timezone: "" } });
    expect(replaced.schedule).toMatchObject({ cron: "@hourly", timezone: "UTC", nextRunTime: "2026-01-01T11:00:00Z" });
    expect((await ok(t, "ListSchedules", {})).schedules).toHaveLength(1);
  });

  it("submits the template when a run is due: SCHEDULED, then SUBMITTED, under the run's idempotency key", async () => {
    const t = await server();
    await ok(t, "CreateSchedule", { schedule: { name: "every-minute", cron: "* * * * *", template: { queue: "pings", task: "ping" } } });
    const scheduled = nextScheduledEvent(t);
    t.clock.set(T0 + MINUTE);
    // Any schedule change re-arms the server's timer: the run due now fires.
    await ok(t, "CreateSchedule", { schedule: { name: "other", interval: "3600s", template: { task: "noop" } } });
    const event = (await scheduled)!;
    expect(event.queue).toBe("pings");
    expect(event.message).toBe("schedule every-minute, run 2026-01-01T10:01:00.000Z");
    const events = await ok(t, "ListJobEvents", { jobId: event.jobId });
    expect(events.events.map((e: any) => e.kind)).toEqual(["EVENT_KIND_SCHEDULED", "EVENT_KIND_SUBMITTED"]);
    const job = (await ok(t, "GetJob", { jobId: event.jobId })).job;
    expect(job).toMatchObject({ queue: "pings", task: "ping", state: "JOB_STATE_QUEUED", scheduleTime: "2026-01-01T10:01:00Z" });
    // The key docs/api.md "Schedules" names finds the run's job.
    const replay = await ok(t, "Submit", {
      queue: "pings",
      task: "ping",
      scheduleTime: "2026-01-01T10:01:00Z",
      idempotencyKey: "schedule:every-minute:2026-01-01T10:01:00.000Z",
    });
    expect(replay).toMatchObject({ job: { id: event.jobId }, deduplicated: true });
    const [schedule] = (await ok(t, "ListSchedules", {})).schedules.filter((s: any) => s.name === "every-minute");
    expect(schedule).toMatchObject({ lastRunTime: "2026-01-01T10:01:00Z", nextRunTime: "2026-01-01T10:02:00Z" });
  });

  it("keeps schedules across a restart, and submits the latest run missed while the server was down", async () => {
    const clock = new ManualClock(T0);
    const t = await startTestServer({}, { clock, sweepIntervalMs: 60_000 });
    // Runs after the restarted server closed (cleanups run in reverse): it drops the database.
    cleanups.push(() => t.close());
    await ok(t, "CreateSchedule", { schedule: { name: "hourly", interval: "3600s", template: { queue: "reports", task: "report" } } });
    await t.server.close();
    // Down for three and a half hours: three runs missed.
    clock.set(T0 + 210 * MINUTE);
    const restarted = await startServer(t.config, { log: silentLogger, clock, databaseClock: clock, sweepIntervalMs: 60_000 });
    cleanups.push(() => restarted.close());
    const again: TestServer = {
      ...t,
      apiUrl: restarted.apiUrl,
      client: createClient(LeaseQueueService, createGrpcTransport({ baseUrl: restarted.apiUrl })),
    };
    const event = (await nextScheduledEvent(again))!;
    expect(event.message).toBe("schedule hourly, run 2026-01-01T13:00:00.000Z");
    const grpc = grpcClient(again);
    const jobs = await grpc.listJobs({ queue: "reports" });
    expect(jobs.jobs.map((j) => j.id)).toEqual([event.jobId]);
    const { schedules } = await grpc.listSchedules({});
    expect(schedules.map((s) => [s.name, s.lastRunTime?.seconds, s.nextRunTime?.seconds])).toEqual([
      ["hourly", BigInt((T0 + 180 * MINUTE) / 1000), BigInt((T0 + 240 * MINUTE) / 1000)],
    ]);
  });
});

/** A CreateSchedule with one thing wrong, the field it must name, and the code (invalid_argument unless said). */
const BAD_SCHEDULES: Array<[what: string, schedule: unknown, field: string]> = [
  ["no schedule", undefined, "schedule"],
  ["no name", { ...nightly, name: "" }, "schedule.name"],
  ["a name that is not a queue-like name", { ...nightly, name: "nightly report" }, "schedule.name"],
  ["neither cron nor interval", { name: "n", template: nightly.template }, "schedule.cron"],
  ["an empty cron", { ...nightly, cron: " " }, "schedule.cron"],
  ["a minute out of range", { ...nightly, cron: "61 * * * *" }, "schedule.cron"],
  ["six fields", { ...nightly, cron: "0 0 3 * * *" }, "schedule.cron"],
  ["four fields", { ...nightly, cron: "0 3 * *" }, "schedule.cron"],
  ["@reboot", { ...nightly, cron: "@reboot" }, "schedule.cron"],
  ["a cron that never matches", { ...nightly, cron: "0 0 30 2 *" }, "schedule.cron"],
  ["a cron too long", { ...nightly, cron: `0 3 * * ${"1,".repeat(200)}2` }, "schedule.cron"],
  ["an interval under 1s", { name: "n", interval: "0.5s", template: nightly.template }, "schedule.interval"],
  ["an interval over 366 days", { name: "n", interval: `${367 * 86400}s`, template: nightly.template }, "schedule.interval"],
  ["a negative interval", { name: "n", interval: "-60s", template: nightly.template }, "schedule.interval"],
  ["an unknown time zone", { ...nightly, timezone: "Mars/Olympus_Mons" }, "schedule.timezone"],
  ["an offset instead of a zone", { ...nightly, timezone: "+01:00" }, "schedule.timezone"],
  ["no template", { name: "n", cron: "@daily" }, "schedule.template"],
  ["a template without a task", { ...nightly, template: { queue: "reports" } }, "schedule.template.task"],
  ["a template with a bad queue", { ...nightly, template: { queue: "bad queue", task: "t" } }, "schedule.template.queue"],
  ["a template with an idempotency key", { ...nightly, template: { task: "t", idempotencyKey: "k" } }, "schedule.template.idempotency_key"],
  [
    "a template with a schedule_time",
    { ...nightly, template: { task: "t", scheduleTime: "2026-01-02T00:00:00Z" } },
    "schedule.template.schedule_time",
  ],
  ["a template delay over 30 days", { ...nightly, template: { task: "t", delay: `${31 * 86400}s` } }, "schedule.template.delay"],
  ["a template priority out of range", { ...nightly, template: { task: "t", priority: 101 } }, "schedule.template.priority"],
  ["a template max_attempts out of range", { ...nightly, template: { task: "t", maxAttempts: 101 } }, "schedule.template.max_attempts"],
];

describe("bad schedules", () => {
  it.each(BAD_SCHEDULES)("over Connect JSON: %s is invalid_argument naming the field", async (_what, schedule, field) => {
    const t = await server();
    const res = await t.call("CreateSchedule", schedule === undefined ? {} : { schedule });
    const context = JSON.stringify(res.body);
    expect(res.status, context).toBe(400);
    expect(res.body.code, context).toBe("invalid_argument");
    expect(res.body.message, context).toMatch(new RegExp(`^${field.replaceAll(".", "\\.")}: `));
    expect(res.body.details.find((d: any) => d.type === "google.rpc.BadRequest").debug, context).toEqual({
      fieldViolations: [{ field, description: expect.any(String) }],
    });
    // Nothing was stored.
    expect((await ok(t, "ListSchedules", {})).schedules).toBeUndefined();
  });

  it("over gRPC: the same refusals, with the field in the BadRequest detail", async () => {
    const t = await server();
    const grpc = grpcClient(t);
    const cases: Array<[Parameters<typeof grpc.createSchedule>[0], string]> = [
      [{}, "schedule"],
      [{ schedule: { name: "n", recurrence: { case: "cron", value: "61 * * * *" }, template: { task: "t" } } }, "schedule.cron"],
      [
        { schedule: { name: "n", recurrence: { case: "interval", value: { seconds: 0n, nanos: 500_000_000 } }, template: { task: "t" } } },
        "schedule.interval",
      ],
      [
        { schedule: { name: "n", recurrence: { case: "cron", value: "@daily" }, timezone: "Nowhere/Atlantis", template: { task: "t" } } },
        "schedule.timezone",
      ],
      [
        { schedule: { name: "n", recurrence: { case: "cron", value: "@daily" }, template: { task: "t", idempotencyKey: "k" } } },
        "schedule.template.idempotency_key",
      ],
      [
        { schedule: { name: "n", recurrence: { case: "cron", value: "@daily" }, template: { queue: "no spaces", task: "t" } } },
        "schedule.template.queue",
      ],
    ];
    for (const [request, field] of cases) {
      const err = await grpc.createSchedule(request).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, field).toBe(Code.InvalidArgument);
      expect(err?.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field)).toEqual([field]);
    }
    const missing = await grpc.deleteSchedule({ name: "nope" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(missing?.code).toBe(Code.NotFound);
    expect(missing?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("SCHEDULE_NOT_FOUND");
    const unnamed = await grpc.deleteSchedule({ name: "" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(unnamed?.code).toBe(Code.InvalidArgument);
    expect(unnamed?.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field)).toEqual(["name"]);
    expect((await grpc.listSchedules({})).schedules).toEqual([]);
  });

  it("refuses both cron and interval in one JSON request, and an unknown field", async () => {
    const t = await server();
    const both = await t.call("CreateSchedule", { schedule: { ...nightly, interval: "60s" } });
    expect(both.status).toBe(400);
    expect(both.body.code).toBe("invalid_argument");
    const unknown = await t.call("CreateSchedule", { schedule: { ...nightly, every: "60s" } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe("invalid_argument");
  });
});
