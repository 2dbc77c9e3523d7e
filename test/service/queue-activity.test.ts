/**
 * GetQueueActivity (docs/api.md "Queue activity") against a real server on
 * a ManualClock, so every minute is exact: the default hour of minutes, the
 * last one holding the current minute; completions, failed attempts, the
 * gauges and the lease waits' percentiles; longer steps over a day; bad
 * windows and steps refused naming the field; and on PostgreSQL a second
 * server sharing the database answers the same.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { BadRequestSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, TEST_ENGINE, type TestServer } from "../helpers/server.js";

const T0 = Date.UTC(2026, 0, 1, 10, 0, 0);
const SECOND = 1000;
const MINUTE = 60 * SECOND;

/** A Timestamp as proto3 JSON writes one on a whole second. */
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function server(clock: ManualClock, flags: Record<string, string> = {}): Promise<TestServer> {
  const t = await startTestServer(flags, { clock, sweepIntervalMs: 60_000 });
  cleanups.push(() => t.close());
  return t;
}

async function ok(t: TestServer, method: string, body: unknown): Promise<any> {
  const res = await t.call(method, body);
  expect(res.status, `${method}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/**
 * someActivity's minute as GetQueueActivity answers it while the fourth job
 * still waits: three leases after 20 s each, in the histogram's bucket
 * (10 s, 30 s], so the estimates interpolate inside it.
 */
const SOME_ACTIVITY_AT_T0 = {
  startTime: iso(T0),
  completed: "2",
  failed: "1",
  queued: "1",
  leased: "3",
  leaseWaitP50: "20s",
  leaseWaitP95: "29s",
};

/** Four jobs at T0; 20 s later three are leased; 10 s after that two complete and one fails for good. */
async function someActivity(t: TestServer, clock: ManualClock): Promise<void> {
  for (let i = 0; i < 4; i++) await ok(t, "Submit", { queue: "emails", task: "welcome.send" });
  clock.advance(20 * SECOND);
  const { leases } = await ok(t, "Claim", { queue: "emails", workerId: "w", maxJobs: 3 });
  expect(leases).toHaveLength(3);
  clock.advance(10 * SECOND);
  await ok(t, "Complete", { jobId: leases[0].job.id, leaseToken: leases[0].leaseToken });
  await ok(t, "Complete", { jobId: leases[1].job.id, leaseToken: leases[1].leaseToken });
  await ok(t, "Fail", { jobId: leases[2].job.id, leaseToken: leases[2].leaseToken, error: "bounced", permanent: true });
}

describe("GetQueueActivity", () => {
  it("answers the last hour in minutes, the last one holding the current minute so far", async () => {
    const clock = new ManualClock(T0);
    const t = await server(clock);
    await someActivity(t, clock);
    const body = await ok(t, "GetQueueActivity", { queue: "emails" });
    expect(body.step).toBe("60s");
    expect(body.points).toHaveLength(60);
    expect(Date.parse(body.points[0].startTime)).toBe(T0 - 59 * MINUTE);
    // Proto3 JSON leaves zeros out: the minutes before T0 are bare start times.
    expect(body.points[58]).toEqual({ startTime: iso(T0 - MINUTE) });
    expect(body.points[59]).toEqual(SOME_ACTIVITY_AT_T0);
  });

  it("sums longer steps and follows the window as the minutes pass", async () => {
    const clock = new ManualClock(T0);
    const t = await server(clock);
    await someActivity(t, clock);
    clock.advance(7 * MINUTE);
    const { leases } = await ok(t, "Claim", { queue: "emails", workerId: "w" });
    const day = await ok(t, "GetQueueActivity", { queue: "emails", window: "86400s", step: "300s" });
    expect(day.step).toBe("300s");
    expect(day.points).toHaveLength(288);
    // Now is 10:07:30: the last step is 10:05-10:10, the one before 10:00-10:05.
    // The gauges at each step's end: one job queued from 10:00 until the claim at 10:07:30, which waited 450 s.
    expect(day.points.slice(-2)).toEqual([
      SOME_ACTIVITY_AT_T0,
      { startTime: iso(T0 + 5 * MINUTE), running: "1", leased: "1", leaseWaitP50: "450s", leaseWaitP95: "585s" },
    ]);
    expect(leases[0].job.state).toBe("JOB_STATE_RUNNING");
  });

  it.each([
    [{ queue: "" }, "queue"],
    [{ queue: "bad name" }, "queue"],
    [{ queue: "emails", window: "30s" }, "window"],
    [{ queue: "emails", window: "90s" }, "window"],
    [{ queue: "emails", window: "90000s" }, "window"],
    [{ queue: "emails", window: "3600.5s" }, "window"],
    [{ queue: "emails", step: "7200s" }, "step"],
    [{ queue: "emails", step: "0s" }, "step"],
    [{ queue: "emails", window: "3600s", step: "420s" }, "window"],
  ])("refuses %j as invalid_argument naming %s", async (body, field) => {
    const t = await server(new ManualClock(T0));
    const res = await t.call("GetQueueActivity", body);
    const context = JSON.stringify(res.body);
    expect(res.status, context).toBe(400);
    expect(res.body.code).toBe("invalid_argument");
    expect(res.body.message.startsWith(`${field}: `), context).toBe(true);
  });

  it("refuses over gRPC too, with a BadRequest naming the field", async () => {
    const t = await server(new ManualClock(T0));
    const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
    const err = await client.getQueueActivity({ queue: "emails", window: { seconds: 90n, nanos: 0 } }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.InvalidArgument);
    expect(err?.rawMessage).toBe("window: must be a whole number of minutes");
    expect(err?.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations.map((v) => v.field))).toEqual(["window"]);
  });

  it.skipIf(TEST_ENGINE !== "postgres")("answers the same from a second server sharing the PostgreSQL database", async () => {
    const clock = new ManualClock(T0);
    const first = await server(clock);
    await someActivity(first, clock);
    const second = await server(clock, first.databaseFlags);
    const request = { queue: "emails", window: "600s" };
    expect(await ok(second, "GetQueueActivity", request)).toEqual(await ok(first, "GetQueueActivity", request));
    // What the second server does shows on the first.
    const { leases } = await ok(second, "Claim", { queue: "emails", workerId: "w2" });
    await ok(second, "Complete", { jobId: leases[0].job.id, leaseToken: leases[0].leaseToken });
    expect((await ok(first, "GetQueueActivity", request)).points.at(-1).completed).toBe("3");
  });
});
