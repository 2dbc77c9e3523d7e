/**
 * Scenarios shared by the example-worker tests (python-worker.test.ts,
 * go-worker.test.ts): each runs the example as a child process against an
 * in-process server, the way a user runs it against `npm start`, and asserts
 * what the server recorded (job states, results, events with the worker id).
 *
 * The examples implement demo tasks (examples/python-worker/worker.py,
 * examples/go-worker/main.go): demo.add {a, b} -> {sum} (a non-number is a
 * permanent error), demo.sleep {seconds}, demo.flaky {succeedOnAttempt}
 * (a transient error until that attempt).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { REPO_ROOT } from "./tools.js";

export interface WorkerCommand {
  file: string;
  args: string[];
  /** Added to the environment (after the LEASEQUEUE_* settings of a scenario). */
  env?: Record<string, string>;
}

export interface RunningWorker {
  child: ChildProcess;
  /** Everything written to stderr so far (the examples log there). */
  stderr(): string;
  /** Resolves once stderr matches `pattern`; rejects on exit or timeout. */
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code (null if killed by a signal). */
  exited: Promise<number | null>;
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Kills workers a failed test left running. */
export function killWorkers(): void {
  for (const child of live) child.kill("SIGKILL");
  live.clear();
}

export function startWorker(cmd: WorkerCommand, env: Record<string, string>): RunningWorker {
  const child = spawn(cmd.file, cmd.args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, ...cmd.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  let err = "";
  let out = "";
  const listeners = new Set<() => void>();
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
    for (const l of listeners) l();
  });
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => {
      live.delete(child);
      for (const l of listeners) l();
      resolve(code);
    });
  });
  return {
    child,
    stderr: () => err + (out ? `\n[stdout]\n${out}` : ""),
    exited,
    waitForLog(pattern, timeoutMs = 15_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (pattern.test(err)) done(resolve);
          else if (child.exitCode !== null || child.signalCode !== null)
            done(() => reject(new Error(`worker exited before logging ${pattern}:\n${err}`)));
        };
        const timer = setTimeout(
          () => done(() => reject(new Error(`no ${pattern} in the worker log after ${timeoutMs} ms:\n${err}`))),
          timeoutMs,
        );
        const done = (f: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          f();
        };
        listeners.add(check);
        check();
      });
    },
  };
}

/** Resolves with the exit code, or fails the test after `timeoutMs`. */
async function exitWithin(worker: RunningWorker, timeoutMs: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`worker still running after ${timeoutMs} ms:\n${worker.stderr()}`)), timeoutMs);
  });
  try {
    return await Promise.race([worker.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function submit(server: TestServer, body: Record<string, unknown>): Promise<string> {
  const res = await server.call("Submit", body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.job.id as string;
}

async function getJob(server: TestServer, id: string): Promise<any> {
  const res = await server.call("GetJob", { jobId: id });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.job;
}

async function events(server: TestServer, id: string): Promise<any[]> {
  const res = await server.call("ListJobEvents", { jobId: id });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.events ?? [];
}

const TERMINAL = new Set(["JOB_STATE_COMPLETED", "JOB_STATE_DEAD", "JOB_STATE_CANCELLED"]);

/** Polls until every job is in a final state; returns them by id. */
async function waitFinished(server: TestServer, ids: string[], worker: RunningWorker, timeoutMs = 30_000): Promise<Map<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const jobs = new Map<string, any>();
    for (const id of ids) jobs.set(id, await getJob(server, id));
    if ([...jobs.values()].every((j) => TERMINAL.has(j.state))) return jobs;
    if (Date.now() > deadline || worker.child.exitCode !== null) {
      const states = [...jobs.values()].map((j) => `${j.task} ${j.state} attempts=${j.attempts}`).join("\n");
      throw new Error(`jobs not finished:\n${states}\nworker log:\n${worker.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitState(server: TestServer, id: string, state: string, worker: RunningWorker, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await getJob(server, id)).state !== state) {
    if (Date.now() > deadline) throw new Error(`job ${id} never reached ${state}:\n${worker.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function kinds(evs: any[]): string[] {
  return evs.map((e) => e.kind);
}

function workerEnv(server: TestServer, queue: string, workerId: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    LEASEQUEUE_URL: server.apiUrl, // http://127.0.0.1:PORT (h2c)
    LEASEQUEUE_QUEUE: queue,
    LEASEQUEUE_WORKER_ID: workerId,
    ...extra,
  };
}

/**
 * Jobs of every outcome through one worker: results, a permanent failure
 * dead-lettered after one attempt, a transient failure retried to success, a
 * 4 s job kept alive by heartbeats on a 2 s lease. Then SIGTERM: exit 0.
 */
export async function endToEnd(server: TestServer, cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-e2e`;
  const workerId = `${lang}-worker-e2e`;

  // Submitted before the worker runs, and after it has subscribed.
  const adds: string[] = [];
  for (let i = 0; i < 4; i++) adds.push(await submit(server, { queue, task: "demo.add", payload: { a: i, b: 10 } }));

  const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "3", LEASEQUEUE_LEASE_SECONDS: "2" }));
  await worker.waitForLog(/claimed job/);

  const bad = await submit(server, { queue, task: "demo.add", payload: { a: "x", b: 1 }, maxAttempts: 3 });
  const flaky = await submit(server, { queue, task: "demo.flaky", payload: { succeedOnAttempt: 2 }, retryBaseDelay: "0.2s" });
  const slow = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 4 } });
  for (let i = 4; i < 6; i++) adds.push(await submit(server, { queue, task: "demo.add", payload: { a: i, b: 10 } }));

  const jobs = await waitFinished(server, [...adds, bad, flaky, slow], worker);

  adds.forEach((id, i) => {
    const job = jobs.get(id);
    expect(job, worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1, deliveries: 1, result: { sum: i + 10 } });
  });

  // A ValueError / ErrPermanent: dead-lettered at once, budget not spent.
  expect(jobs.get(bad)).toMatchObject({ state: "JOB_STATE_DEAD", attempts: 1, maxAttempts: 3 });
  expect(jobs.get(bad).lastError).toMatch(/needs numbers a and b/);
  expect(kinds(await events(server, bad))).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED", "EVENT_KIND_DEAD_LETTERED"]);

  // Any other error: retried with backoff, then completed on attempt 2.
  expect(jobs.get(flaky)).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 2, deliveries: 2, result: { attempt: 2 } });
  expect(jobs.get(flaky).lastError).toMatch(/transient failure on attempt 1/);
  expect(kinds(await events(server, flaky))).toEqual([
    "EVENT_KIND_SUBMITTED",
    "EVENT_KIND_CLAIMED",
    "EVENT_KIND_FAILED",
    "EVENT_KIND_CLAIMED",
    "EVENT_KIND_COMPLETED",
  ]);

  // 4 s of work on a 2 s lease: heartbeats every ~0.67 s keep it; one delivery. The server
  // applies every one (the metric counts them) and stores the lease's first (the heartbeat policy).
  expect(jobs.get(slow)).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1, deliveries: 1, result: { slept: 4 } });
  const slowKinds = kinds(await events(server, slow));
  expect(slowKinds).not.toContain("EVENT_KIND_LEASE_EXPIRED");
  expect(slowKinds.filter((k) => k === "EVENT_KIND_HEARTBEAT")).toHaveLength(1);
  expect(await heartbeatsApplied(server, queue)).toBeGreaterThanOrEqual(3);

  // Every claim, heartbeat and outcome was recorded under the worker's id.
  for (const id of [...adds, bad, flaky, slow]) {
    for (const e of await events(server, id)) {
      if (e.kind !== "EVENT_KIND_SUBMITTED") expect(e.workerId, `${e.kind} of ${id}`).toBe(workerId);
    }
  }

  worker.child.kill("SIGTERM");
  expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);
  expect(worker.stderr()).toMatch(/stopping \(SIGTERM\)/);
  expect(worker.stderr()).toMatch(/stopped/);
}

/**
 * SIGTERM during a job: the worker takes no new work, finishes the running
 * job (heartbeating past its lease), then exits 0. A job submitted after the
 * signal stays queued.
 */
export async function drainOnSigterm(server: TestServer, cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-drain`;
  const workerId = `${lang}-worker-drain`;
  const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "1", LEASEQUEUE_LEASE_SECONDS: "2" }));
  const running = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 3 } });
  await waitState(server, running, "JOB_STATE_RUNNING", worker);
  // RUNNING on the server is not yet running in the worker: a lease still in
  // transit when the signal lands is released instead (the right thing, but
  // not what this scenario is about).
  await worker.waitForLog(new RegExp(`claimed job ${running}`));

  worker.child.kill("SIGTERM");
  await worker.waitForLog(/stopping \(SIGTERM\): taking no new work, finishing 1 running job/);
  // With max_in_flight 1 the server cannot push it while the first job runs,
  // and the stream is cancelled before that one completes.
  const later = await submit(server, { queue, task: "demo.add", payload: { a: 1, b: 2 } });

  expect(await exitWithin(worker, 15_000), worker.stderr()).toBe(0);
  const done = await getJob(server, running);
  expect(done, worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", deliveries: 1, result: { slept: 3 } });
  const doneKinds = kinds(await events(server, running));
  expect(doneKinds).not.toContain("EVENT_KIND_LEASE_EXPIRED");
  expect(doneKinds).toContain("EVENT_KIND_HEARTBEAT");
  const untouched = await getJob(server, later);
  expect(untouched.state).toBe("JOB_STATE_QUEUED");
  expect(untouched.deliveries ?? 0).toBe(0); // proto3 JSON omits zeros
}

/**
 * A job that outlasts LEASEQUEUE_SHUTDOWN_SECONDS is failed with retry_delay
 * 0 (RETRY, eligible now) instead of waiting for its lease to expire.
 */
export async function shutdownGraceFailsLeftovers(server: TestServer, cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-grace`;
  const workerId = `${lang}-worker-grace`;
  const worker = startWorker(
    cmd,
    workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "1", LEASEQUEUE_LEASE_SECONDS: "60", LEASEQUEUE_SHUTDOWN_SECONDS: "0.5" }),
  );
  const id = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 60 } });
  await waitState(server, id, "JOB_STATE_RUNNING", worker);
  await worker.waitForLog(new RegExp(`claimed job ${id}`)); // running in the worker, not only leased

  const signalled = Date.now();
  worker.child.kill("SIGTERM");
  expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);
  expect(Date.now() - signalled).toBeLessThan(5_000);

  const job = await getJob(server, id);
  expect(job, worker.stderr()).toMatchObject({
    state: "JOB_STATE_RETRY",
    attempts: 1,
    lastError: "worker shut down before the job finished",
  });
  expect(Date.parse(job.scheduleTime)).toBeLessThanOrEqual(Date.now());
  const last = (await events(server, id)).at(-1);
  expect(last).toMatchObject({ kind: "EVENT_KIND_FAILED", workerId });
}

/**
 * LEASEQUEUE_MAX_JOBS: the worker asks for no more than it will take
 * (max_in_flight 2 here, not its concurrency 4), finishes those jobs and
 * exits 0 by itself; a third job stays queued. The jobs take 1 s or more so
 * that neither is acknowledged before both leases have arrived and the stream
 * is cancelled: an acknowledgment frees a slot, and a lease the server pushes
 * into a stream that is being cancelled stays owned until it expires
 * (docs/api.md "StreamClaims: pushed leases"), which a test of "stays queued"
 * must not race with.
 */
export async function maxJobsThenExit(server: TestServer, cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-max-jobs`;
  const workerId = `${lang}-worker-max-jobs`;
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(await submit(server, { queue, task: "demo.sleep", payload: { seconds: 1 + i }, priority: 10 - i }));

  const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "4", LEASEQUEUE_MAX_JOBS: "2" }));
  expect(await exitWithin(worker, 15_000), worker.stderr()).toBe(0);
  expect(worker.stderr()).toMatch(/received 2 job\(s\), LEASEQUEUE_MAX_JOBS/);

  expect(await getJob(server, ids[0])).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { slept: 1 } });
  expect(await getJob(server, ids[1])).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { slept: 2 } });
  const third = await getJob(server, ids[2]);
  expect(third.state).toBe("JOB_STATE_QUEUED");
  expect(third.deliveries ?? 0).toBe(0);
}

/** RPCs answered so far, by method (all codes), from leasequeue_rpc_duration_seconds_count on /metrics. */
/** Heartbeats the server applied on a queue (stored or not), from leasequeue_transitions_total. */
export async function heartbeatsApplied(server: TestServer, queue: string): Promise<number> {
  const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`leasequeue_transitions_total{queue="${queue}",kind="heartbeat"} `));
  return line === undefined ? 0 : Number(line.split(" ")[1]);
}

export async function rpcCounts(server: TestServer): Promise<Map<string, number>> {
  const res = await fetch(`${server.metricsUrl}/metrics`);
  expect(res.status).toBe(200);
  const counts = new Map<string, number>();
  for (const m of (await res.text()).matchAll(/^leasequeue_rpc_duration_seconds_count\{([^}]*)\} (\S+)$/gm)) {
    const method = /method="([^"]+)"/.exec(m[1])?.[1];
    if (method !== undefined) counts.set(method, (counts.get(method) ?? 0) + Number(m[2]));
  }
  return counts;
}

export interface RpcExpectation {
  /** Methods the worker must have called (at least once). */
  used: string[];
  /** Methods the worker must not have called at all. */
  unused: string[];
}

/**
 * The worker acknowledges on the batched path
 * (docs/api.md "The batched path: Acknowledge and Work"): jobs of every
 * outcome, heartbeats included, finish while the single-job RPCs the batch
 * replaces are never called. Counts RPCs by method on /metrics before and
 * after; the test itself calls only Submit, GetJob and ListJobEvents. Prints
 * the calls per job.
 */
export async function acknowledgesInBatches(server: TestServer, cmd: WorkerCommand, lang: string, rpcs: RpcExpectation): Promise<void> {
  const queue = `${lang}-batched`;
  const workerId = `${lang}-worker-batched`;
  const before = await rpcCounts(server);
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) ids.push(await submit(server, { queue, task: "demo.add", payload: { a: i, b: 1 } }));
  ids.push(await submit(server, { queue, task: "demo.add", payload: { a: "x", b: 1 } }));
  ids.push(await submit(server, { queue, task: "demo.flaky", payload: { succeedOnAttempt: 2 }, retryBaseDelay: "0.1s" }));
  const slow = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 2 } });
  ids.push(slow);

  const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "8", LEASEQUEUE_LEASE_SECONDS: "1" }));
  const jobs = await waitFinished(server, ids, worker);
  worker.child.kill("SIGTERM");
  expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);

  expect([...jobs.values()].filter((j) => j.state === "JOB_STATE_COMPLETED")).toHaveLength(22);
  expect(jobs.get(slow), worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", deliveries: 1 });
  expect(kinds(await events(server, slow))).toContain("EVENT_KIND_HEARTBEAT");

  const after = await rpcCounts(server);
  const delta = (method: string) => (after.get(method) ?? 0) - (before.get(method) ?? 0);
  const figures = ["StreamClaims", "Work", "Acknowledge", "Complete", "Fail", "Heartbeat", "Release"].map((m) => `${m}=${delta(m)}`);
  console.log(`${lang} worker, ${ids.length} jobs (24 deliveries, heartbeats on a 1 s lease): ${figures.join(" ")}`);
  for (const method of rpcs.used) expect(delta(method), `${method} calls\n${figures.join(" ")}`).toBeGreaterThan(0);
  for (const method of rpcs.unused) expect(delta(method), `${method} calls\n${figures.join(" ")}`).toBe(0);
}

/**
 * The server goes away mid-job and comes back on the same port and
 * database (its streams end with `unavailable`): the worker reconnects with
 * backoff, keeps heartbeating the job it still runs, and acknowledges it
 * after the restart, so the job completes on its first delivery without a
 * lease expiry. New work flows on the new connection. `onRestarted` runs
 * checks against the second server before it closes.
 */
export async function serverRestartMidJob(
  cmd: WorkerCommand,
  lang: string,
  onRestarted: (server: TestServer) => Promise<void> = async () => {},
): Promise<void> {
  const queue = `${lang}-restart`;
  const workerId = `${lang}-worker-restart`;
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-restart-"));
  const db = join(dir, "jobs.db");
  let server = await startTestServer({ db });
  let second: TestServer | undefined;
  try {
    // Heartbeats every 2 s; the job runs 5 s, across the restart. A client
    // may need a second or so to redial, so the first heartbeat after the
    // restart may fail; the next one keeps the lease.
    const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "2", LEASEQUEUE_LEASE_SECONDS: "6" }));
    const slow = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 5 } });
    await waitState(server, slow, "JOB_STATE_RUNNING", worker);
    await worker.waitForLog(/claimed job/);

    const port = new URL(server.apiUrl).port;
    const down = Date.now();
    await server.close();
    second = await startTestServer({ db, port });
    server = second;
    const restarted = Date.now();
    console.log(`${lang} worker: server restarted in ${restarted - down} ms`);
    await worker.waitForLog(/stream broke|the server ended the stream/);

    const later = await submit(server, { queue, task: "demo.add", payload: { a: 20, b: 22 } });
    const jobs = await waitFinished(server, [slow, later], worker);
    expect(jobs.get(slow), worker.stderr()).toMatchObject({
      state: "JOB_STATE_COMPLETED",
      attempts: 1,
      deliveries: 1,
      result: { slept: 5 },
    });
    expect(jobs.get(later), worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { sum: 42 } });
    const slowEvents = await events(server, slow);
    expect(kinds(slowEvents), worker.stderr()).not.toContain("EVENT_KIND_LEASE_EXPIRED");
    expect(slowEvents.at(-1)).toMatchObject({ kind: "EVENT_KIND_COMPLETED", workerId });
    // The second server's metrics start at zero: what they count reached it after the restart.
    expect(await heartbeatsApplied(server, queue), worker.stderr()).toBeGreaterThanOrEqual(1);
    await onRestarted(server);

    worker.child.kill("SIGTERM");
    expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);
    if (process.env.LEASEQUEUE_TEST_PRINT_WORKER_LOG) console.log(worker.stderr());
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The server is down when a job finishes: the outcome cannot go on a stream
 * nor by Acknowledge, so the worker keeps it and sends it again (every
 * 0.5 s while the lease may hold) until the server is back on the same port
 * and database. The job completes on its first delivery; nothing expires.
 */
export async function serverDownWhileJobFinishes(cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-down`;
  const workerId = `${lang}-worker-down`;
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-down-"));
  const db = join(dir, "jobs.db");
  let server = await startTestServer({ db });
  try {
    // A 10 s lease outlasts the outage and the clients' redial backoff.
    const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "1", LEASEQUEUE_LEASE_SECONDS: "10" }));
    const id = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 1 } });
    await waitState(server, id, "JOB_STATE_RUNNING", worker);
    await worker.waitForLog(new RegExp(`claimed job ${id}`)); // running in the worker, not only leased

    const port = new URL(server.apiUrl).port;
    await server.close();
    await worker.waitForLog(/Acknowledge failed, will retry/);
    server = await startTestServer({ db, port });
    const back = Date.now();

    const job = (await waitFinished(server, [id], worker)).get(id);
    console.log(`${lang} worker: outcome delivered ${Date.now() - back} ms after the server came back`);
    expect(job, worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1, deliveries: 1, result: { slept: 1 } });
    const evs = await events(server, id);
    expect(kinds(evs), worker.stderr()).not.toContain("EVENT_KIND_LEASE_EXPIRED");
    expect(evs.at(-1)).toMatchObject({ kind: "EVENT_KIND_COMPLETED", workerId });

    worker.child.kill("SIGTERM");
    expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);
    if (process.env.LEASEQUEUE_TEST_PRINT_WORKER_LOG) console.log(worker.stderr());
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Lease lost: the worker is frozen (SIGSTOP) past its 1 s lease, the sweep
 * expires it, and the server hands the job out again. Once thawed, the next
 * heartbeat's result is `aborted`: the worker sets the handler's lost signal,
 * reports nothing for that attempt, and finishes the job on its new lease.
 */
export async function leaseLostStopsTheHandler(server: TestServer, cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-lost`;
  const workerId = `${lang}-worker-lost`;
  const worker = startWorker(cmd, workerEnv(server, queue, workerId, { LEASEQUEUE_CONCURRENCY: "1", LEASEQUEUE_LEASE_SECONDS: "1" }));
  const id = await submit(server, { queue, task: "demo.sleep", payload: { seconds: 2 }, maxAttempts: 5 });
  await waitState(server, id, "JOB_STATE_RUNNING", worker);
  await worker.waitForLog(/claimed job .* attempt=1/);

  worker.child.kill("SIGSTOP");
  try {
    const deadline = Date.now() + 10_000;
    while (!kinds(await events(server, id)).includes("EVENT_KIND_LEASE_EXPIRED")) {
      if (Date.now() > deadline) throw new Error(`the lease of ${id} never expired`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    worker.child.kill("SIGCONT");
  }

  await worker.waitForLog(/lease lost/);
  const job = (await waitFinished(server, [id], worker)).get(id);
  expect(job, worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { slept: 2 } });
  expect(job.attempts, worker.stderr()).toBeGreaterThanOrEqual(2);
  expect(worker.stderr()).toMatch(/lease lost; its outcome is not reported/);
  // Only the final attempt's outcome reached the server.
  expect(kinds(await events(server, id)).filter((k) => k === "EVENT_KIND_COMPLETED" || k === "EVENT_KIND_FAILED")).toEqual([
    "EVENT_KIND_COMPLETED",
  ]);

  worker.child.kill("SIGTERM");
  expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);
  if (process.env.LEASEQUEUE_TEST_PRINT_WORKER_LOG) console.log(worker.stderr());
}

/** `server` as a caller holding `token` sees it: every call() carries the Authorization header. */
export function asCaller(server: TestServer, token: string): TestServer {
  return { ...server, call: (method, body, headers = {}) => server.call(method, body, { ...bearer(token), ...headers }) };
}

/**
 * Authentication on (LEASEQUEUE_AUTH_FILE): without LEASEQUEUE_TOKEN the
 * worker is refused (`unauthenticated`), says so and why in its log, exits
 * 1 and completes nothing; with a worker token for another queue it is
 * refused `permission_denied` the same way; with a token whose only role
 * is `worker`, limited to its queue, it completes the jobs (Work and, for
 * the slow one, heartbeats on it), and the token never appears in its log.
 */
export async function authRequired(cmd: WorkerCommand, lang: string): Promise<void> {
  const queue = `${lang}-auth`;
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-auth-"));
  const file = writeAuthFile(dir, [
    { name: "producer", roles: ["producer", "reader"] },
    { name: `${lang}-workers`, roles: ["worker"], queues: [queue] },
    { name: "other-workers", roles: ["worker"], queues: ["elsewhere"] },
  ]);
  const open = await startTestServer({ "auth-file": file.path });
  const server = asCaller(open, file.tokens.producer);
  try {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await submit(server, { queue, task: "demo.add", payload: { a: i, b: 100 } }));
    ids.push(await submit(server, { queue, task: "demo.sleep", payload: { seconds: 2 } }));

    const refusals: Array<[string, RegExp]> = [
      ["", /Work refused: unauthenticated this server requires "Authorization: Bearer <token>" \(LEASEQUEUE_TOKEN is not set/i],
      [
        file.tokens["other-workers"],
        new RegExp(
          `Work refused: (permission_denied|PermissionDenied) start\\.queue: queue "${queue}" is not permitted; token "other-workers".*\\(check the token's entry`,
          "i",
        ),
      ],
    ];
    for (const [token, why] of refusals) {
      const refused = startWorker(cmd, workerEnv(open, queue, `${lang}-worker-refused`, { LEASEQUEUE_TOKEN: token }));
      expect(await exitWithin(refused, 15_000), refused.stderr()).toBe(1);
      expect(refused.stderr()).toMatch(why);
      expect(refused.stderr()).not.toMatch(/claimed job/);
      if (token !== "") expect(refused.stderr()).not.toContain(token);
    }
    for (const id of ids) expect(await getJob(server, id)).toMatchObject({ state: "JOB_STATE_QUEUED" });

    const token = file.tokens[`${lang}-workers`];
    const workerId = `${lang}-worker-auth`;
    const worker = startWorker(cmd, workerEnv(open, queue, workerId, { LEASEQUEUE_TOKEN: token, LEASEQUEUE_LEASE_SECONDS: "1" }));
    const jobs = await waitFinished(server, ids, worker);
    ids
      .slice(0, 3)
      .forEach((id, i) => expect(jobs.get(id), worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { sum: i + 100 } }));
    expect(jobs.get(ids[3]), worker.stderr()).toMatchObject({ state: "JOB_STATE_COMPLETED", deliveries: 1, result: { slept: 2 } });
    expect(kinds(await events(server, ids[3]))).toContain("EVENT_KIND_HEARTBEAT");
    expect(worker.stderr()).toMatch(/with a bearer token/);
    worker.child.kill("SIGTERM");
    expect(await exitWithin(worker, 10_000), worker.stderr()).toBe(0);
    expect(worker.stderr()).not.toContain(token);
  } finally {
    await open.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
