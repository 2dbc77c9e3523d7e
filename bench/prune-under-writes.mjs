#!/usr/bin/env node
// A retention pass beside writers (docs/operations.md "Retention"): with
// WRITERS loops of submit -> claim -> heartbeat -> complete running on a
// durable (synchronous=FULL) SQLite store, how long the write lock is held
// (BEGIN IMMEDIATE to COMMIT, timed on the store's own connection) and how
// long a writer's call waits, first for a while without the pruner, then
// while one pass deletes a backlog of finished jobs in batches. Prints
// figures; asserts nothing (test/maintenance/pruner.test.ts checks what
// does not depend on the machine's pace).
//
//   npm run build --silent && node bench/prune-under-writes.mjs [backlog] [batch] [writers] [baselineMs]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "../dist/src/testing/index.js";
import { prunePass } from "../dist/src/maintenance/pruner.js";
import { openSqliteStore } from "../dist/src/store/sqlite/sqlite-store.js";
import { newJob } from "./lib/new-job.mjs";

const BACKLOG = Number(process.argv[2] ?? 20_000);
const BATCH = Number(process.argv[3] ?? 100);
const WRITERS = Number(process.argv[4] ?? 8);
const BASELINE_MS = Number(process.argv[5] ?? 1500);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

const job = (i, queue) => ({ ...newJob(i), queue, maxAttempts: 1 });

const dir = mkdtempSync(join(tmpdir(), "lq-bench-prune-"));
const clock = new ManualClock();
const store = openSqliteStore({ path: join(dir, "bench.db"), clock, synchronous: "full" });
try {
  // The backlog: finished jobs a week and an hour old.
  for (let done = 0; done < BACKLOG; done += 1000) {
    const size = Math.min(1000, BACKLOG - done);
    await store.submit(Array.from({ length: size }, (_, i) => job(done + i, "archive")));
    const { leases } = await store.claimOutcome({ queue: "archive", workerId: "w", leaseDurationMs: MINUTE, maxJobs: size });
    await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
  }
  clock.advance(169 * HOUR);

  // Time every write transaction on the store's connection.
  const holds = [];
  let began;
  const exec = store.db.exec.bind(store.db);
  store.db.exec = (sql) => {
    if (sql === "BEGIN IMMEDIATE") began = performance.now();
    const result = exec(sql);
    if ((sql === "COMMIT" || sql === "ROLLBACK") && began !== undefined) {
      holds.push(performance.now() - began);
      began = undefined;
    }
    return result;
  };

  let stop = false;
  let completed = 0;
  const stalls = [];
  const timed = async (call) => {
    const t0 = performance.now();
    const value = await call();
    stalls.push(performance.now() - t0);
    return value;
  };
  const writer = async (w) => {
    const queue = `live-${w}`;
    for (let i = 0; !stop; i++) {
      const [submitted] = await timed(() => store.submit([job(i, queue)]));
      const {
        leases: [lease],
      } = await timed(() => store.claimOutcome({ queue, workerId: `w${w}`, leaseDurationMs: MINUTE, maxJobs: 1 }));
      await timed(() => store.heartbeat(submitted.job.id, lease.leaseToken));
      await timed(() => store.complete(lease.job.id, lease.leaseToken, null));
      completed++;
    }
  };
  const phase = () => {
    const h = holds.splice(0).sort((a, b) => a - b);
    const s = stalls.splice(0).sort((a, b) => a - b);
    const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
    return {
      transactions: h.length,
      holdP50: pct(h, 0.5),
      holdP99: pct(h, 0.99),
      holdMax: h.at(-1) ?? 0,
      calls: s.length,
      stallP99: pct(s, 0.99),
      stallMax: s.at(-1) ?? 0,
    };
  };

  const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
  await new Promise((resolve) => setTimeout(resolve, BASELINE_MS));
  const baseline = phase();
  const t0 = performance.now();
  const summary = await prunePass({ store, clock, policy: { retentionMs: 168 * HOUR, deadRetentionMs: null }, batchSize: BATCH });
  const passMs = performance.now() - t0;
  const pruning = phase();
  stop = true;
  await Promise.all(writers);

  const f = (ms) => ms.toFixed(1);
  console.log(
    `pruning ${summary.jobs} jobs (${summary.events} events) in ${summary.batches} batches of ${BATCH} took ${(passMs / 1000).toFixed(1)} s ` +
      `with ${WRITERS} writers running (${completed} jobs completed by them in all).\n` +
      `  write-lock hold per transaction, ms: without pruning p50 ${f(baseline.holdP50)} p99 ${f(baseline.holdP99)} max ${f(baseline.holdMax)}` +
      ` (${baseline.transactions} transactions); while pruning p50 ${f(pruning.holdP50)} p99 ${f(pruning.holdP99)} max ${f(pruning.holdMax)}` +
      ` (${pruning.transactions})\n` +
      `  writer call latency, ms: without pruning p99 ${f(baseline.stallP99)} max ${f(baseline.stallMax)} (${baseline.calls} calls);` +
      ` while pruning p99 ${f(pruning.stallP99)} max ${f(pruning.stallMax)} (${pruning.calls} calls)`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
