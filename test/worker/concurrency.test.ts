/**
 * The in-flight cap through the SDK: with `concurrency` N the worker runs
 * at most N handlers at once under a backlog, and every job is run and
 * completed exactly once.
 */
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { afterEach, expect, it } from "vitest";
import { createWorker, JobState, type Worker } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { workerEventLog } from "../helpers/worker-events.js";

let t: TestServer | undefined;
const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
  await t?.close();
});

it("never runs more than `concurrency` handlers at once, and runs every job once", { timeout: 60_000 }, async () => {
  t = await startTestServer();
  const JOBS = 120;
  const CONCURRENCY = 4;
  const res = await t.call("SubmitBatch", { jobs: Array.from({ length: JOBS }, (_, i) => ({ queue: "load", task: "t", payload: { i } })) });
  expect(res.status).toBe(200);

  const log = workerEventLog();
  let running = 0;
  let peak = 0;
  const runs = new Map<string, number>();
  const worker = createWorker({
    url: t.apiUrl,
    queue: "load",
    workerId: "w-load",
    concurrency: CONCURRENCY,
    onEvent: log.onEvent,
    async handler(job) {
      running++;
      peak = Math.max(peak, running);
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      // Simulated work: a few turns of the event loop, so handlers overlap.
      for (let i = 0; i < 1 + (job.id.charCodeAt(35) % 5); i++) await yieldToEventLoop();
      running--;
      return null;
    },
  });
  workers.push(worker);
  const completed = await log.waitFor("completed", JOBS);

  expect(peak).toBe(CONCURRENCY);
  expect(runs.size).toBe(JOBS);
  expect([...runs.values()].every((n) => n === 1)).toBe(true);
  expect(new Set(completed.map((e) => e.job.id)).size).toBe(JOBS);
  expect(completed.every((e) => e.job.state === JobState.COMPLETED && e.job.deliveries === 1)).toBe(true);
  const stats = await t.client.getStats({});
  expect(stats.queues.find((q) => q.queue === "load")).toMatchObject({ completed: BigInt(JOBS), running: 0n, queued: 0n });
});
