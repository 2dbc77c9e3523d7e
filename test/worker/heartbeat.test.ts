/**
 * The SDK's heartbeat keeps a short lease alive through a long handler
 * (issue 3, "Done when"). The one test here that takes real time: a 10 s
 * handler under a 2 s lease, with the server sweeping expired leases every
 * 100 ms, so a single missed extension would hand the job to someone else.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, expect, it } from "vitest";
import { createWorker, EventKind, JobState, type Worker } from "../../src/worker/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { workerEventLog } from "../helpers/worker-events.js";

let t: TestServer | undefined;
let worker: Worker | undefined;
afterEach(async () => {
  await worker?.close();
  await t?.close();
});

it("keeps a 2 s lease alive through a 10 s handler with heartbeats", { timeout: 30_000 }, async () => {
  t = await startTestServer({}, { sweepIntervalMs: 100 });
  const log = workerEventLog();
  let aborted = false;
  worker = createWorker({
    url: t.apiUrl,
    queue: "slow",
    workerId: "slow-worker",
    leaseDuration: 2000,
    onEvent: log.onEvent,
    async handler(_job, { signal }) {
      await sleep(10_000, undefined, { signal }); // the work itself: ten seconds
      aborted = signal.aborted;
      return { ok: true };
    },
  });
  await log.waitFor("connected");
  const { body } = await t.call("Submit", { queue: "slow", task: "report.build" });
  const [completed] = await log.waitFor("completed");

  expect(aborted).toBe(false);
  expect(completed.job).toMatchObject({ id: body.job.id, state: JobState.COMPLETED, deliveries: 1, attempts: 1 });
  // Every ~667 ms over 10 s: well over a dozen extensions, and never a lost lease.
  expect(log.all("heartbeat").length).toBeGreaterThanOrEqual(10);
  expect(log.all("lease-lost")).toEqual([]);
  // The server applied them all; the timeline stores the lease's first heartbeat and then at
  // most one a minute (the heartbeat policy, docs/api.md "Heartbeat events"), so one in these 10 s.
  const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  const applied = Number(/^leasequeue_transitions_total\{queue="slow",kind="heartbeat"\} (\d+)$/m.exec(metrics)?.[1]);
  expect(applied).toBeGreaterThanOrEqual(10);
  const { events } = await t.client.listJobEvents({ jobId: body.job.id });
  const kinds = events.map((e) => e.kind);
  expect(kinds.filter((k) => k === EventKind.HEARTBEAT)).toHaveLength(1);
  expect(kinds).not.toContain(EventKind.LEASE_EXPIRED);
  expect(kinds.filter((k) => k === EventKind.CLAIMED)).toHaveLength(1);
  expect(kinds.at(-1)).toBe(EventKind.COMPLETED);
});
