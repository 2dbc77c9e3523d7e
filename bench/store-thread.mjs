#!/usr/bin/env node
// The SQLite store's thread, measured (docs/performance.md "The store thread"):
// 1. the crossing: what structured clone (postMessage's serializer) costs
//    per job for the messages a batch of 100 makes, each way: the calls of
//    100 Submits, of a claim, of 100 Completes; the answers and the commit's
//    announcement that come back;
// 2. the same batched job life (SubmitBatch of 100, claim 100, complete 100,
//    several batches in flight) through the store in the event loop's
//    thread and through the store thread: jobs/s, and the main thread's busy
//    time per job (event loop utilization), which is what the server's
//    request handling gets back. Prints figures; asserts nothing.
//
//   npm run build && node bench/store-thread.mjs [jobs] [inFlight]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { deserialize, serialize } from "node:v8";
import { systemClock } from "../dist/src/domain/clock.js";
import { openSqliteStore } from "../dist/src/store/sqlite/sqlite-store.js";
import { packAnswer, packArgs, packChange } from "../dist/src/store/sqlite/thread-messages.js";
import { openThreadedSqliteStore } from "../dist/src/store/sqlite/threaded-store.js";
import { newJob } from "./lib/new-job.mjs";

const jobs = Number(process.argv[2] ?? 20_000);
const inFlight = Number(process.argv[3] ?? 8);
const BATCH = 100;

/** µs per job of serialize + deserialize of `message`, standing for `perMessage` jobs. */
function crossing(message, perMessage) {
  for (let i = 0; i < 200; i++) deserialize(serialize(message));
  const rounds = 2000;
  const t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < rounds; i++) {
    const b = serialize(message);
    bytes = b.length;
    deserialize(b);
  }
  return { usPerJob: ((performance.now() - t0) * 1000) / rounds / perMessage, bytesPerJob: bytes / perMessage };
}

async function measureCrossing() {
  const dir = mkdtempSync(join(tmpdir(), "lq-thread-"));
  // Real answers and a real announcement, from the store itself.
  const store = openSqliteStore({ path: join(dir, "x.db"), clock: systemClock });
  const changes = [];
  store.onCommitted((c) => changes.push(c));
  const submitted = await store.submit(Array.from({ length: BATCH }, (_, i) => newJob(i)));
  const claimed = await store.claimOutcome({ queue: "bench", workerId: "w", leaseDurationMs: 60_000, maxJobs: BATCH });
  const completed = await Promise.all(claimed.leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
  await new Promise((r) => setTimeout(r, 50));
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const submitJobs = Array.from({ length: BATCH }, (_, i) => newJob(i));
  const calls = (list) => ({ kind: "calls", now: Date.now(), calls: list });
  const answers = (name, values) => ({ kind: "out", items: values.map((v, i) => ({ a: i, v: packAnswer(name, v) })) });
  const rows = [
    ["to the thread: SubmitBatch of 100", calls([[1, "w", "submit", packArgs("submit", [submitJobs])]])],
    ["to the thread: 100 Submits of 1", calls(submitJobs.map((j, i) => [i, "w", "submit", packArgs("submit", [[j]])]))],
    [
      "to the thread: a claim of 100",
      calls([[1, "w", "claim", [{ queue: "bench", workerId: "w", leaseDurationMs: 60_000, maxJobs: BATCH }, 500]]]),
    ],
    ["to the thread: 100 Completes", calls(claimed.leases.map((l, i) => [i, "w", "complete", [l.job.id, l.leaseToken, null]]))],
    ["back: SubmitBatch answer (100 jobs)", answers("submit", [submitted])],
    ["back: claim answer (100 leases)", answers("claim", [claimed])],
    ["back: 100 Complete answers", answers("complete", completed)],
    ["back: announcement of 100 events", { kind: "out", items: [{ change: packChange(changes.at(-1)) }] }],
    ["(as objects) back: claim answer", { kind: "out", items: [{ a: 1, v: claimed }] }],
    ["(as objects) back: 100 Complete answers", { kind: "out", items: completed.map((v, i) => ({ a: i, v })) }],
  ];
  console.log("crossing (structured clone, serialize + deserialize), batch of 100, as the store thread packs them:");
  for (const [label, message] of rows) {
    const { usPerJob, bytesPerJob } = crossing(message, BATCH);
    console.log(`  ${label.padEnd(40)} ${usPerJob.toFixed(2).padStart(6)} µs/job  ${bytesPerJob.toFixed(0).padStart(5)} bytes/job`);
  }
}

async function lifeOfBatches(label, store) {
  let next = 0;
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < jobs) {
        const start = next;
        next += BATCH;
        await store.submit(Array.from({ length: BATCH }, (_, i) => newJob(start + i)));
        const { leases } = await store.claimOutcome({ queue: "bench", workerId: "w", leaseDurationMs: 60_000, maxJobs: BATCH });
        await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
      }
    }),
  );
  const ms = performance.now() - t0;
  const elu = performance.eventLoopUtilization(elu0);
  const done = next;
  console.log(
    `  ${label.padEnd(28)} ${(done / (ms / 1000)).toFixed(0).padStart(7)} jobs/s  main thread busy ${((elu.active * 1000) / done).toFixed(1).padStart(5)} µs/job (${(elu.utilization * 100).toFixed(0)}%)`,
  );
}

async function measureLife() {
  console.log(`job life in batches of ${BATCH} (submit, claim, complete), ${jobs} jobs, ${inFlight} batches in flight, synchronous=full:`);
  for (const threaded of [false, true, false, true]) {
    const dir = mkdtempSync(join(tmpdir(), "lq-thread-"));
    const path = join(dir, "bench.db");
    const store = threaded ? await openThreadedSqliteStore({ path, clock: systemClock }) : openSqliteStore({ path, clock: systemClock });
    await lifeOfBatches(threaded ? "store thread" : "store in the event loop", store);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await measureCrossing();
await measureLife();
