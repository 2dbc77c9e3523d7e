/**
 * One suite for every worker SDK: the same scenarios against the TypeScript
 * SDK (src/worker), the Python package (clients/python) and the Go package
 * (clients/go), each through a small driver program (drivers/) that
 * registers the same tasks and prints its worker's events as JSON lines.
 * The assertions read what the server recorded (states, results, attempts,
 * deliveries, events), so a behaviour holds in one language only if it
 * holds on the wire.
 *
 * Under CI=true a missing Python grpcio or Go toolchain fails the suite
 * instead of skipping it (external/tools.ts).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { createLeaseQueueClient, JobState, jsonToValue, valueToJson } from "../../src/worker/index.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { moveClockWithHeartbeats } from "../helpers/lease-clock.js";
import { opensslAvailable, writeSelfSignedCert } from "../helpers/tls.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { removeBuilds } from "../external/sdk-builds.js";
import { requireTool, skipUnlessAvailable } from "../external/tools.js";
import { Driver, killDrivers, type DriverCommand, type DriverSettings } from "./driver.js";
import { SDKS } from "./sdks.js";

const TERMINAL = new Set(["JOB_STATE_COMPLETED", "JOB_STATE_DEAD", "JOB_STATE_CANCELLED"]);

async function submit(server: TestServer, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<string> {
  const res = await server.call("Submit", body, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.job.id as string;
}

async function getJob(server: TestServer, id: string, headers: Record<string, string> = {}): Promise<any> {
  const res = await server.call("GetJob", { jobId: id }, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.job;
}

async function eventKinds(server: TestServer, id: string): Promise<string[]> {
  const res = await server.call("ListJobEvents", { jobId: id });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return ((res.body.events ?? []) as Array<{ kind: string }>).map((e) => e.kind);
}

/** Looks at the job (GetJob) until `done(job)` (until()); fails naming the job and with the driver's log after `timeoutMs`. */
async function waitJob(
  server: TestServer,
  id: string,
  driver: Driver | undefined,
  done: (job: any) => boolean = (job) => TERMINAL.has(job.state),
  timeoutMs = 20_000,
  headers: Record<string, string> = {},
): Promise<any> {
  try {
    return await until(
      `job ${id} to be done`,
      async () => {
        const job = await getJob(server, id, headers);
        return done(job) ? job : undefined;
      },
      { timeoutMs, pollMs: 50 },
    );
  } catch (err) {
    throw new Error(
      `${(err as Error).message}; job ${id} is ${JSON.stringify(await getJob(server, id, headers))}\ndriver log:\n${driver?.log ?? ""}`,
      { cause: err },
    );
  }
}

/** Counts of jobs in `queue` by state, from GetStats. */
async function queueCounts(server: TestServer, queue: string): Promise<Record<string, string>> {
  const res = await server.call("GetStats", {});
  expect(res.status).toBe(200);
  return ((res.body.queues ?? []) as Array<Record<string, string>>).find((q) => q.queue === queue) ?? {};
}

/** Every job of `queue` (BASIC view), all pages. */
async function listJobs(server: TestServer, queue: string): Promise<any[]> {
  const jobs: any[] = [];
  let pageToken = "";
  do {
    const res = await server.call("ListJobs", { queue, pageSize: 500, pageToken, view: "JOB_VIEW_BASIC" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    jobs.push(...(res.body.jobs ?? []));
    pageToken = res.body.nextPageToken ?? "";
  } while (pageToken !== "");
  return jobs;
}

/** Job ids the driver ran a handler for more than once. */
function ranTwice(driver: Driver): string[] {
  const seen = new Set<string>();
  const twice: string[] = [];
  for (const e of driver.all("run")) {
    if (seen.has(e.job!)) twice.push(e.job!);
    seen.add(e.job!);
  }
  return twice;
}

describe.each(SDKS)("the $name SDK", (sdk) => {
  const skip = skipUnlessAvailable(sdk.available);
  let command: DriverCommand;
  let server: TestServer;
  /** One worker for the scenarios that need nothing of their own, on `queue`. */
  let worker: Driver | undefined;
  const queue = `conf-${sdk.name}`;
  /** Where the tests create the files that let a "hold" handler finish. */
  let gates: string;

  afterEach(() => killDrivers([worker]));

  beforeAll(async () => {
    if (skip) return;
    requireTool(sdk.available, sdk.tools);
    command = await sdk.prepare();
    gates = mkdtempSync(join(tmpdir(), "leasequeue-conformance-gates-"));
    server = await startTestServer();
    worker = new Driver(command, { url: server.apiUrl, queue, concurrency: 4, leaseSeconds: 10 }, `${sdk.name}-conformance`);
    await worker.waitFor("connected");
  }, 320_000);

  afterAll(async () => {
    if (worker !== undefined && worker.child.exitCode === null) await worker.stop();
    await server?.close();
    if (gates !== undefined) rmSync(gates, { recursive: true, force: true });
    removeBuilds();
  });

  it.skipIf(skip)("completes a job with the handler's return value as its result", { timeout: 60_000 }, async () => {
    const id = await submit(server, { queue, task: "echo", payload: { invoice: "inv_481", lines: [1, 2] } });
    const job = await waitJob(server, id, worker);
    expect(job).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1, result: { echo: { invoice: "inv_481", lines: [1, 2] } } });
    expect(await eventKinds(server, id)).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED", "EVENT_KIND_COMPLETED"]);
  });

  it.skipIf(skip)("retries a handler that raises, then dead-letters the job with the error text", { timeout: 60_000 }, async () => {
    const id = await submit(server, {
      queue,
      task: "fail",
      payload: { message: "upstream said 503" },
      maxAttempts: 2,
      retryBaseDelay: "0.1s",
    });
    const job = await waitJob(server, id, worker);
    expect(job).toMatchObject({ state: "JOB_STATE_DEAD", attempts: 2, deliveries: 2, lastError: "upstream said 503" });
    expect(await eventKinds(server, id)).toEqual([
      "EVENT_KIND_SUBMITTED",
      "EVENT_KIND_CLAIMED",
      "EVENT_KIND_FAILED",
      "EVENT_KIND_CLAIMED",
      "EVENT_KIND_DEAD_LETTERED",
    ]);
  });

  it.skipIf(skip)("dead-letters at once on a permanent failure, with attempts left", { timeout: 60_000 }, async () => {
    const id = await submit(server, { queue, task: "permanent", payload: { message: "account deleted" }, maxAttempts: 5 });
    const job = await waitJob(server, id, worker);
    expect(job).toMatchObject({ state: "JOB_STATE_DEAD", attempts: 1, maxAttempts: 5, lastError: "account deleted" });
  });

  it.skipIf(skip)(
    "snoozes a job: queued again after the delay with the attempt refunded, then delivered again",
    { timeout: 30_000 },
    async () => {
      const id = await submit(server, { queue, task: "snooze", payload: { seconds: 2 } });
      await worker!.waitFor("snoozed", 1, (e) => e.job === id);
      const snoozed = await getJob(server, id);
      expect(snoozed).toMatchObject({ state: "JOB_STATE_QUEUED", deliveries: 1 });
      expect(snoozed.attempts ?? 0).toBe(0); // refunded (proto3 JSON omits zeros)
      const due = Date.parse(snoozed.scheduleTime);
      const delayMs = due - Date.parse(snoozed.updateTime);
      expect(delayMs).toBeGreaterThanOrEqual(1_900);
      expect(delayMs).toBeLessThanOrEqual(2_100);
      // Once due it comes back to the worker's stream, with nothing else submitted to wake the queue, and not before.
      const job = await waitJob(server, id, worker);
      expect(job).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1, deliveries: 2, result: { attempts: 1, deliveries: 2 } });
      const events = (await server.call("ListJobEvents", { jobId: id })).body.events as Array<{ kind: string; eventTime: string }>;
      expect(events.map((e) => e.kind)).toEqual([
        "EVENT_KIND_SUBMITTED",
        "EVENT_KIND_CLAIMED",
        "EVENT_KIND_SNOOZED",
        "EVENT_KIND_CLAIMED",
        "EVENT_KIND_COMPLETED",
      ]);
      const reclaimed = events[3];
      expect(Date.parse(reclaimed.eventTime)).toBeGreaterThanOrEqual(due);

      // With no delay it comes straight back, and its second delivery is its first attempt again.
      const again = await submit(server, { queue, task: "snooze", payload: { seconds: 0 } });
      expect(await waitJob(server, again, worker)).toMatchObject({
        state: "JOB_STATE_COMPLETED",
        attempts: 1,
        deliveries: 2,
        result: { attempts: 1, deliveries: 2 },
      });
    },
  );

  it.skipIf(skip)(
    "stops a handler whose job is cancelled while it runs, sends no outcome for it, and goes on",
    { timeout: 60_000 },
    async () => {
      // A "hold" handler whose file never comes: only the cancellation ends it.
      const id = await submit(server, { queue, task: "hold", payload: { file: join(gates, `${sdk.name}-never`) } });
      await worker!.waitFor("run", 1, (e) => e.job === id);
      const cancelled = await server.call("Cancel", { jobId: id, reason: "no longer needed", includeRunning: true });
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
      expect(cancelled.body.job.state).toBe("JOB_STATE_CANCELLED");
      await worker!.waitFor("cancelled", 1, (e) => e.job === id);
      // The worker goes on: a job submitted now is completed.
      const next = await submit(server, { queue, task: "echo", payload: "after the cancel" });
      expect(await waitJob(server, next, worker)).toMatchObject({ state: "JOB_STATE_COMPLETED" });
      // No outcome was sent for the cancelled job (one would have been refused: lease-lost), and it stays cancelled.
      const outcomes = new Set(["completed", "failed", "released", "snoozed", "lease-lost", "error"]);
      expect(worker!.events.filter((e) => e.job === id && outcomes.has(e.event))).toEqual([]);
      // (A heartbeat may have been stored while the handler ran, on a slow machine.)
      const kinds = (await eventKinds(server, id)).filter((k) => k !== "EVENT_KIND_HEARTBEAT");
      expect(kinds).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED", "EVENT_KIND_CANCELLED"]);
    },
  );

  it.skipIf(skip)("shows the handler's progress in GetJob while the job runs", { timeout: 60_000 }, async () => {
    const progress = { step: "render", percent: 50 };
    // The handler reports it, then runs until the test has seen it.
    const release = join(gates, `${sdk.name}-progress`);
    const id = await submit(server, { queue, task: "hold", payload: { progress, file: release } });
    const running = await waitJob(server, id, worker, (job) => job.progress !== undefined);
    expect(running).toMatchObject({ state: "JOB_STATE_RUNNING", progress });
    writeFileSync(release, "");
    const job = await waitJob(server, id, worker);
    expect(job).toMatchObject({ state: "JOB_STATE_COMPLETED", progress, result: { reported: progress } });
  });

  it.skipIf(skip)(
    "gives a handler its dependencies' ids, states, results and errors, decoded as typed values; the first 100 with a truncation flag",
    { timeout: 60_000 },
    async () => {
      // A job that completes, one that fails for good, and a "deps" job that waits for both and runs anyway.
      const graph = await server.call("SubmitBatch", {
        jobs: [
          { queue, task: "echo", payload: { n: 1 }, ref: "a" },
          { queue, task: "permanent", payload: { message: "account deleted" }, ref: "b" },
          { queue, task: "deps", dependsOnRefs: ["a", "b"], onDependencyFailure: "DEPENDENCY_FAILURE_POLICY_IGNORE" },
        ],
      });
      expect(graph.status, JSON.stringify(graph.body)).toBe(200);
      const [a, b, merge] = (graph.body.results as Array<{ job: { id: string } }>).map((r) => r.job.id);
      expect(await waitJob(server, merge, worker)).toMatchObject({
        state: "JOB_STATE_COMPLETED",
        result: {
          truncated: false,
          dependencies: [
            { id: a, state: "COMPLETED", result: { echo: { n: 1 } }, lastError: "" },
            { id: b, state: "DEAD", result: null, lastError: "account deleted" },
          ],
          decoded: [1],
        },
      });

      // 101 dependencies: the lease carries the first 100, in dependsOn order, and says there are more.
      const refs = Array.from({ length: 101 }, (_, i) => `d${i}`);
      const many = await server.call("SubmitBatch", {
        jobs: [...refs.map((ref) => ({ queue, task: "noop", ref })), { queue, task: "deps", dependsOnRefs: refs }],
        view: "JOB_VIEW_BASIC",
      });
      expect(many.status, JSON.stringify(many.body)).toBe(200);
      const ids = (many.body.results as Array<{ job: { id: string } }>).map((r) => r.job.id);
      const job = await waitJob(server, ids[101], worker);
      expect(job.state).toBe("JOB_STATE_COMPLETED");
      expect(job.result.truncated).toBe(true);
      expect(job.result.dependencies).toEqual(ids.slice(0, 100).map((id) => ({ id, state: "COMPLETED", result: null, lastError: "" })));
      expect(job.result.decoded).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "drains on SIGTERM: a handler held through twice its lease by the server's clock finishes and is completed, nothing new is taken",
    { timeout: 90_000 },
    async () => {
      // The server's clock moves three quarters of a lease each time it applies the held lease's heartbeat
      // (test/helpers/lease-clock.ts), and its sweeper runs every 50 ms: the handler runs on through the drain
      // until that clock has passed twice the lease, so a heartbeat the draining worker did not send, or the
      // server did not apply, would expire it. The worker's own deadline is real time: a 3 s lease leaves each
      // heartbeat 2 s to be answered.
      const LEASE_SECONDS = 3;
      const clock = new ManualClock(Date.now());
      const own = await startTestServer({}, { clock, sweepIntervalMs: 50 });
      const drainQueue = `${queue}-drain`;
      const release = join(gates, `${sdk.name}-drain`);
      try {
        const draining = new Driver(
          command,
          { url: own.apiUrl, queue: drainQueue, concurrency: 1, leaseSeconds: LEASE_SECONDS, drainSeconds: 60 },
          `${sdk.name}-drain`,
        );
        await draining.waitFor("connected");
        const id = await submit(own, { queue: drainQueue, task: "hold", payload: { file: release } });
        await draining.waitFor("run", 1, (e) => e.job === id);
        draining.child.kill("SIGTERM");
        // Submitted once the worker says it takes no new work: it stays queued.
        await draining.waitFor("stopping");
        const later = await submit(own, { queue: drainQueue, task: "echo", payload: 1 });
        const rounds = moveClockWithHeartbeats(clock, own.server.store, [id], LEASE_SECONDS * 750);
        await rounds.reached(3);
        rounds.stop();
        // The drain waited for the handler: the driver runs until the handler may finish.
        expect(draining.child.exitCode, draining.log).toBeNull();
        writeFileSync(release, "");
        expect(await draining.exited, draining.log).toBe(0);
        const job = await getJob(own, id);
        expect(job, draining.log).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1, deliveries: 1, result: { reported: null } });
        expect(await eventKinds(own, id)).not.toContain("EVENT_KIND_LEASE_EXPIRED");
        const untouched = await getJob(own, later);
        expect(untouched.state).toBe("JOB_STATE_QUEUED");
        expect(untouched.deliveries ?? 0).toBe(0);
      } finally {
        await own.close();
      }
    },
  );

  it.skipIf(skip)(
    "reconnects after a server restart mid-run: nothing lost, nothing acknowledged twice",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "leasequeue-conformance-restart-"));
      const db = join(dir, "jobs.db");
      let first: TestServer | undefined = await startTestServer({ db });
      let second: TestServer | undefined;
      const restartQueue = `${queue}-restart`;
      try {
        const jobs = Array.from({ length: 300 }, (_, i) => ({ queue: restartQueue, task: "sleep", payload: { seconds: 0.02, i } }));
        const res = await first.call("SubmitBatch", { jobs: jobs.slice(0, 150) });
        expect(res.status).toBe(200);
        // A 10 s lease: the held leases outlive the restart and the reconnect on any machine's pace (a lease lost
        // there would run its job twice); one on the wire when the connection closed comes back 10 s later.
        const driver = new Driver(
          command,
          { url: first.apiUrl, queue: restartQueue, concurrency: 8, leaseSeconds: 10 },
          `${sdk.name}-restart`,
        );
        await driver.waitFor("completed", 50, () => true, 30_000);

        const port = new URL(first.apiUrl).port;
        await first.close();
        first = undefined;
        second = await startTestServer({ db, port });
        expect((await second.call("SubmitBatch", { jobs: jobs.slice(150) })).status).toBe(200);
        await driver.waitFor("connected", 2, () => true, 30_000);

        const restarted = second;
        await until("all 300 completed", async () => Number((await queueCounts(restarted, restartQueue)).completed ?? 0) >= 300, {
          timeoutMs: 60_000,
          pollMs: 100,
        }).catch((err: Error) => {
          throw new Error(`${err.message}\n${driver.log}`, { cause: err });
        });
        expect(await driver.stop()).toBe(0);
        const stored = await listJobs(second, restartQueue);
        expect(stored).toHaveLength(300);
        // A lease the server had claimed but not sent when it shut down went back to the queue (a
        // second delivery, its attempt refunded); one on the wire when the connection closed came back
        // after its lease expired (a second attempt). Either way its handler ran once.
        const wrong = stored.filter((j) => j.state !== "JOB_STATE_COMPLETED");
        const seen = (id: string) => JSON.stringify(driver.events.filter((e) => e.job === id));
        expect(wrong, `${wrong.map((j) => seen(j.id as string)).join("\n")}\n${driver.log}`).toEqual([]);
        expect(ranTwice(driver), driver.log).toEqual([]);
        expect(new Set(driver.all("run").map((e) => e.job)).size).toBe(300);
        // Each job's timeline has one completion: a resent outcome the first send applied was refused, not applied again.
        const completions = new Map<string, number>();
        for (const job of stored)
          completions.set(
            job.id as string,
            (await eventKinds(second, job.id as string)).filter((k) => k === "EVENT_KIND_COMPLETED").length,
          );
        expect([...completions.values()].every((n) => n === 1)).toBe(true);
      } finally {
        await first?.close();
        await second?.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );

  it.skipIf(skip)(
    "stops with the server's refusal when it cannot succeed on retry: a token limited to another queue, no token",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "leasequeue-conformance-auth-"));
      const file = writeAuthFile(dir, [
        { name: "producer", roles: ["producer", "reader"] },
        { name: "emails-workers", roles: ["worker", "reader"], queues: ["emails"] },
      ]);
      const secured = await startTestServer({ "auth-file": file.path });
      const authQueue = `${queue}-auth`;
      try {
        const id = await submit(secured, { queue: authQueue, task: "echo", payload: "hello" }, bearer(file.tokens.producer));
        const token = file.tokens["emails-workers"];
        const refusals: Array<[DriverSettings["token"], string, RegExp]> = [
          [token, "permission_denied", new RegExp(`^start\\.queue: queue "${authQueue}" is not permitted; token "emails-workers"`)],
          [undefined, "unauthenticated", /^this server requires "Authorization: Bearer <token>"/],
        ];
        for (const [given, code, message] of refusals) {
          const driver = new Driver(command, { url: secured.apiUrl, queue: authQueue, token: given }, `${sdk.name}-refused`);
          // The worker ends with the server's error (code and message), and the driver exits.
          const [ended] = await driver.waitFor("ended");
          expect(ended, driver.log).toMatchObject({ code, message: expect.stringMatching(message) });
          expect(await driver.exited, driver.log).toBe(1);
          // Said once as an error, and not retried: no reconnect, nothing leased.
          expect(driver.all("error"), driver.log).toEqual([expect.objectContaining({ code, message: ended.message })]);
          expect(driver.all("disconnected")).toEqual([]);
          expect(driver.all("connected")).toEqual([]);
          expect(driver.all("run")).toEqual([]);
          expect(driver.log + JSON.stringify(driver.events)).not.toContain(token);
        }
        expect((await getJob(secured, id, bearer(file.tokens.producer))).state).toBe("JOB_STATE_QUEUED");
      } finally {
        await secured.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it.skipIf(skip)("names itself <sdk>-<host>-<pid> without a worker id (ts-, py-, go-)", { timeout: 60_000 }, async () => {
    const idQueue = `${queue}-default-id`;
    const driver = new Driver(command, { url: server.apiUrl, queue: idQueue }, "");
    const [ready] = await driver.waitFor("ready");
    const id = await submit(server, { queue: idQueue, task: "echo", payload: "who" });
    expect(await waitJob(server, id, driver)).toMatchObject({ state: "JOB_STATE_COMPLETED" });
    const prefix = { typescript: "ts", python: "py", go: "go" }[sdk.name];
    const events = (await server.call("ListJobEvents", { jobId: id })).body.events as Array<{ kind: string; workerId?: string }>;
    const claimed = events.find((e) => e.kind === "EVENT_KIND_CLAIMED");
    expect(claimed?.workerId).toBe(`${prefix}-${hostname()}-${ready.pid}`.slice(0, 128));
    expect(await driver.stop()).toBe(0);
  });

  it.skipIf(skip)("works over TLS with a private CA", { timeout: 60_000 }, async () => {
    requireTool(opensslAvailable(), "openssl");
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-conformance-tls-"));
    const { certPath, keyPath } = writeSelfSignedCert(dir);
    const secure = await startTestServer({ "tls-cert": certPath, "tls-key": keyPath });
    try {
      expect(secure.apiUrl).toMatch(/^https:/);
      const tlsQueue = `${queue}-tls`;
      const client = createLeaseQueueClient({ url: secure.apiUrl, nodeOptions: { ca: readFileSync(certPath) } });
      const driver = new Driver(command, { url: secure.apiUrl, queue: tlsQueue, caFile: certPath }, `${sdk.name}-tls`);
      const { job } = await client.submit({ queue: tlsQueue, task: "echo", payload: jsonToValue("over tls") });
      const stored = await until(
        "the job completed over TLS",
        async () => {
          const got = (await client.getJob({ jobId: job!.id })).job!;
          return got.state === JobState.COMPLETED ? got : undefined;
        },
        { timeoutMs: 20_000, pollMs: 50 },
      ).catch((err: Error) => {
        throw new Error(`${err.message}\n${driver.log}`, { cause: err });
      });
      expect(stored.state, driver.log).toBe(JobState.COMPLETED);
      expect(valueToJson(stored.result)).toEqual({ echo: "over tls" });
      expect(await driver.stop()).toBe(0);
    } finally {
      await secure.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(skip)(
    "runs 5,000 jobs at concurrency 64, each exactly once",
    async () => {
      const bulkQueue = `${queue}-bulk`;
      for (let i = 0; i < 5000; i += 500) {
        const jobs = Array.from({ length: 500 }, (_, k) => ({ queue: bulkQueue, task: "noop", payload: { i: i + k } }));
        expect((await server.call("SubmitBatch", { jobs, view: "JOB_VIEW_BASIC" })).status).toBe(200);
      }
      // How fast is bench/sdks.mjs's to measure; here, that each runs once.
      const bulk = new Driver(command, { url: server.apiUrl, queue: bulkQueue, concurrency: 64, leaseSeconds: 30 }, `${sdk.name}-bulk`);
      await bulk.waitFor("completed", 5000, () => true, 90_000);
      expect(await bulk.stop()).toBe(0);
      expect(await queueCounts(server, bulkQueue)).toMatchObject({ completed: "5000" });
      expect(bulk.all("run")).toHaveLength(5000);
      expect(ranTwice(bulk)).toEqual([]);
      const stored = await listJobs(server, bulkQueue);
      expect(stored.filter((j) => j.deliveries !== 1)).toEqual([]);
    },
    120_000,
  );
});
