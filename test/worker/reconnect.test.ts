/**
 * A server restart under a running worker: the stream breaks with
 * `unavailable`, the worker reconnects with backoff to the new server on
 * the same port and database, finishes the job it held across the restart
 * and takes new work, still within its concurrency (the new stream does not
 * count the lease from the old one, so the worker holds the new lease until
 * its slot frees).
 */
import { rmSync } from "node:fs";
import { afterEach, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { createWorker, JobState, type Worker } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A worker holding a job from the first server, reconnected to a second one
 * on the same port and database.
 */
async function restartUnderWorker() {
  const first: TestServer = await startTestServer();
  cleanups.push(() => rmSync(first.dir, { recursive: true, force: true }));
  const log = workerEventLog();
  const release = gate();
  const counters = { running: 0, peak: 0 };
  const worker: Worker = createWorker({
    url: first.apiUrl,
    queue: "restart",
    workerId: "w-restart",
    leaseDuration: 10_000,
    reconnectBackoff: { initialMs: 50, maxMs: 400 },
    onEvent: log.onEvent,
    async handler(job) {
      counters.peak = Math.max(counters.peak, ++counters.running);
      if (job.task === "held") await release.promise;
      counters.running--;
      return { task: job.task };
    },
  });
  cleanups.push(() => worker.close());
  const held = await first.call("Submit", { queue: "restart", task: "held" });
  await log.waitFor("lease");

  await first.server.close();
  const [disconnected] = await log.waitFor("disconnected");
  expect(disconnected.error.code).toBe(Code.Unavailable);

  const second = await startTestServer({ port: new URL(first.apiUrl).port, db: first.config.databasePath });
  cleanups.push(() => second.server.close());
  await log.waitFor("connected", 2);
  return { second, log, release, counters, worker, heldId: held.body.job.id as string };
}

it("reconnects to a restarted server and finishes the job it held across the restart", { timeout: 60_000 }, async () => {
  const { second, log, release, counters, worker } = await restartUnderWorker();
  const heldId = (await log.waitFor("lease"))[0].job.id;

  // New work arrives while the held job still runs: it waits for the one slot.
  const fresh = await second.call("Submit", { queue: "restart", task: "fresh" });
  await log.waitFor("lease", 2);
  expect(worker.running).toBe(1);

  // The lease taken from the first server is still valid on the second.
  release.open();
  const [heldDone] = await log.waitFor("completed", 1, (e) => e.job.id === heldId);
  expect(heldDone.job).toMatchObject({ state: JobState.COMPLETED, deliveries: 1 });
  const [freshDone] = await log.waitFor("completed", 1, (e) => e.job.id === fresh.body.job.id);
  expect(freshDone.job).toMatchObject({ state: JobState.COMPLETED, deliveries: 1 });
  expect(counters.peak).toBe(1);
  expect(log.all("lease-lost")).toEqual([]);
});

it("gives back with Release, at close, a lease that was still waiting for a slot", { timeout: 60_000 }, async () => {
  const { second, log, release, worker } = await restartUnderWorker();
  const fresh = await second.call("Submit", { queue: "restart", task: "fresh", maxAttempts: 1 });
  await log.waitFor("lease", 2);

  const closed = worker.close();
  const [released] = await log.waitFor("released");
  expect(released.job).toMatchObject({ id: fresh.body.job.id, state: JobState.QUEUED, attempts: 0 });
  release.open();
  await closed;
  const after = await second.client.getJob({ jobId: fresh.body.job.id });
  expect(after.job).toMatchObject({ state: JobState.QUEUED, attempts: 0, deliveries: 1 });
});
