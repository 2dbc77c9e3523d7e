/**
 * The SDK's heartbeat, at its default interval (a third of the lease), keeps
 * a short lease alive through a long handler. The server's clock is a
 * manual one that moves half a lease with each heartbeat it applies
 * (test/helpers/lease-clock.ts), and its sweeper runs every 100 ms: the
 * handler is held for ten seconds of the server's time under a 2 s lease, so
 * a single heartbeat the server did not apply would hand the job back as
 * LEASE_EXPIRED. The worker's own deadline is real time: a heartbeat must
 * be answered within the lease, less the interval (1.3 s), which holds on
 * any machine.
 */
import { afterEach, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { createWorker, EventKind, JobState, type Worker } from "../../src/worker/index.js";
import { moveClockWithHeartbeats } from "../helpers/lease-clock.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

let t: TestServer | undefined;
let worker: Worker | undefined;
const done = gate();
afterEach(async () => {
  done.open();
  await worker?.close();
  await t?.close();
});

it("keeps a 2 s lease alive with heartbeats through a handler that runs 10 s of the server's time", { timeout: 60_000 }, async () => {
  const clock = new ManualClock(Date.now());
  t = await startTestServer({}, { clock, sweepIntervalMs: 100 });
  const log = workerEventLog();
  let aborted = false;
  worker = createWorker({
    url: t.apiUrl,
    queue: "slow",
    workerId: "slow-worker",
    leaseDuration: 2000,
    onEvent: log.onEvent,
    async handler(_job, { signal }) {
      await done.promise; // the work itself: until the server's clock says ten seconds passed
      aborted = signal.aborted;
      return { ok: true };
    },
  });
  await log.waitFor("connected");
  const { body } = await t.call("Submit", { queue: "slow", task: "report.build" });
  const rounds = moveClockWithHeartbeats(clock, t.server.store, [body.job.id], 1000);
  await rounds.reached(10);
  rounds.stop();
  await log.waitFor("heartbeat", 10);
  done.open();
  const [completed] = await log.waitFor("completed");

  expect(aborted).toBe(false);
  expect(completed.job).toMatchObject({ id: body.job.id, state: JobState.COMPLETED, deliveries: 1, attempts: 1 });
  // Ten extensions over ten seconds of the server's time, and never a lost lease.
  expect(rounds.movedMs).toBe(10_000);
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
