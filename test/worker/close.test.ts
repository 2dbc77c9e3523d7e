/**
 * close(): stops taking work, lets running handlers finish and acknowledges
 * them, and after the shutdown timeout fails what is left so it is
 * eligible again at once.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { createWorker, JobState, WorkerClosedError, type Worker } from "../../src/worker/index.js";
import { assertBuilt, PACKAGE_ROOT } from "../helpers/process.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

const servers: TestServer[] = [];
const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
  for (const s of servers.splice(0)) await s.close();
});

async function server() {
  const t = await startTestServer();
  servers.push(t);
  return t;
}

describe("close()", () => {
  it("waits for running handlers, completes their jobs and takes no new work", { timeout: 60_000 }, async () => {
    const t = await server();
    const log = workerEventLog();
    const release = gate();
    const worker = createWorker({
      url: t.apiUrl,
      queue: "drain",
      workerId: "w-drain",
      concurrency: 3,
      onEvent: log.onEvent,
      async handler(job) {
        await release.promise;
        return { done: job.task };
      },
    });
    workers.push(worker);
    await t.call("SubmitBatch", { jobs: [1, 2, 3].map((i) => ({ queue: "drain", task: `t${i}` })) });
    await log.waitFor("lease", 3);
    expect(worker.running).toBe(3);

    let closed = false;
    const closing = worker.close().then(() => (closed = true));
    // Not done while handlers run...
    await Promise.resolve();
    expect(closed).toBe(false);
    // ...and the stream is gone: a job submitted now is not taken.
    const late = await t.call("Submit", { queue: "drain", task: "late" });
    release.open();
    await closing;

    expect(log.all("completed").map((e) => e.job.state)).toEqual([JobState.COMPLETED, JobState.COMPLETED, JobState.COMPLETED]);
    expect(log.all("failed")).toEqual([]);
    expect(log.all("lease")).toHaveLength(3);
    expect((await t.client.getJob({ jobId: late.body.job.id })).job!.state).toBe(JobState.QUEUED);
    expect(log.events.at(-1)).toEqual({ type: "closed" });
  });

  it("fails a stuck handler's job back to RETRY, eligible at once, after the shutdown timeout", { timeout: 60_000 }, async () => {
    const t = await server();
    const log = workerEventLog();
    const abortedWith = gate<unknown>();
    const worker = createWorker({
      url: t.apiUrl,
      queue: "stuck",
      workerId: "w-stuck",
      leaseDuration: 60_000,
      shutdownTimeout: 200,
      onEvent: log.onEvent,
      async handler(_job, { signal }) {
        signal.addEventListener("abort", () => abortedWith.open(signal.reason), { once: true });
        await new Promise(() => {}); // never returns
      },
    });
    workers.push(worker);
    const { body } = await t.call("Submit", { queue: "stuck", task: "t", retryBaseDelay: "600s" });
    await log.waitFor("lease");

    // The 200 ms bound and the Fail's round trip, far from the 10 s default bound it would take if the option were ignored.
    const started = performance.now();
    await worker.close();
    expect(performance.now() - started).toBeLessThan(5000);

    const reason = await abortedWith.promise;
    expect(reason).toBeInstanceOf(WorkerClosedError);
    const [failed] = log.all("failed");
    expect(failed.job).toMatchObject({ id: body.job.id, state: JobState.RETRY });
    const job = (await t.client.getJob({ jobId: body.job.id })).job!;
    expect(job.lastError).toMatch(/shutdown timeout of 200 ms/);
    // retry_delay 0 overrides the 600 s backoff: eligible now, so the next claim gets it.
    expect(timestampMs(job.scheduleTime!)).toBeLessThanOrEqual(Date.now());
    const claimed = await t.client.claim({ queue: "stuck", workerId: "w-next" });
    expect(claimed.leases.map((l) => l.job!.id)).toEqual([body.job.id]);
    expect(claimed.leases[0].job).toMatchObject({ attempts: 2, deliveries: 2 });
  });

  it("lets the process exit as soon as it resolves (the package as users import it)", { timeout: 60_000 }, async () => {
    assertBuilt();
    const t = await server();
    // A user's script: `leasequeue/worker` resolves through package.json "exports" to dist/.
    const script = `
      import { createWorker } from "leasequeue/worker";
      const worker = createWorker({
        url: ${JSON.stringify(t.apiUrl)}, queue: "exit", workerId: "w-exit", shutdownTimeout: 60000,
        handler: async () => null,
        onEvent: (e) => { if (e.type === "connected") worker.close().then(() => console.log("closed")); },
      });`;
    // Killed (exit code null) if it still runs after 30 s: startup on a loaded machine takes far less, and a
    // leftover timer or connection (the 60 s shutdown bound, a session the server keeps open) holds it longer.
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: PACKAGE_ROOT,
      stdio: ["ignore", "pipe", "inherit"],
      timeout: 30_000,
    });
    let closedAt = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("closed")) closedAt = performance.now();
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(0);
    expect(closedAt).toBeGreaterThan(0);
    // No timer (not even the 60 s shutdown bound) or connection outlives close().
    expect(performance.now() - closedAt).toBeLessThan(5000);
  });
});
