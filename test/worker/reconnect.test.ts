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

it("reconnects to a restarted server and finishes the job it held across the restart", { timeout: 20_000 }, async () => {
  const first: TestServer = await startTestServer();
  cleanups.push(() => rmSync(first.dir, { recursive: true, force: true }));
  const log = workerEventLog();
  const release = gate();
  let running = 0;
  let peak = 0;
  const worker: Worker = createWorker({
    url: first.apiUrl,
    queue: "restart",
    workerId: "w-restart",
    leaseDuration: 10_000,
    reconnectBackoff: { initialMs: 50, maxMs: 400 },
    onEvent: log.onEvent,
    async handler(job) {
      peak = Math.max(peak, ++running);
      if (job.task === "held") await release.promise;
      running--;
      return { task: job.task };
    },
  });
  cleanups.push(() => worker.close());
  const held = await first.call("Submit", { queue: "restart", task: "held" });
  await log.waitFor("lease");

  await first.server.close();
  const [disconnected] = await log.waitFor("disconnected");
  expect(disconnected!.error.code).toBe(Code.Unavailable);

  const second = await startTestServer({ port: new URL(first.apiUrl).port, db: first.config.databasePath });
  cleanups.push(() => second.server.close());
  await log.waitFor("connected", 2);

  // New work arrives while the held job still runs: it waits for the one slot.
  const fresh = await second.call("Submit", { queue: "restart", task: "fresh" });
  await log.waitFor("lease", 2);
  expect(worker.running).toBe(1);

  // The lease taken from the first server is still valid on the second.
  release.open();
  const [heldDone] = await log.waitFor("completed", 1, (e) => e.job.id === held.body.job.id);
  expect(heldDone!.job).toMatchObject({ state: JobState.COMPLETED, deliveries: 1 });
  const [freshDone] = await log.waitFor("completed", 1, (e) => e.job.id === fresh.body.job.id);
  expect(freshDone!.job).toMatchObject({ state: JobState.COMPLETED, deliveries: 1 });
  expect(peak).toBe(1);
  expect(log.all("lease-lost")).toEqual([]);
});
