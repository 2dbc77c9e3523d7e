#!/usr/bin/env node
// Group commit, measured: the same jobs submitted, claimed and completed
// through the SQLite store (synchronous=FULL) one operation at a time
// (every call waits for its own commit and fsync) and with many operations
// in flight (they share transactions). Prints figures; asserts nothing.
//
//   npm run build && node bench/group-commit.mjs [jobs] [concurrency]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../dist/src/domain/clock.js";
import { openSqliteStore } from "../dist/src/store/sqlite/sqlite-store.js";
import { newJob } from "./lib/new-job.mjs";

const jobs = Number(process.argv[2] ?? 2000);
const concurrency = Number(process.argv[3] ?? 64);

async function lifecycle(store, i) {
  await store.submit([newJob(i)]);
  const {
    leases: [lease],
  } = await store.claimOutcome({ queue: "bench", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
  await store.complete(lease.job.id, lease.leaseToken, null);
}

async function run(label, inFlight) {
  const dir = mkdtempSync(join(tmpdir(), "lq-bench-"));
  const store = openSqliteStore({ path: join(dir, "bench.db"), clock: systemClock });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < jobs) await lifecycle(store, next++);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const rate = jobs / seconds;
  console.log(
    `${label.padEnd(28)} ${String(jobs).padStart(6)} jobs  ${seconds.toFixed(2).padStart(6)} s  ${rate.toFixed(0).padStart(7)} jobs/s (submit+claim+complete)`,
  );
  return rate;
}

const serial = await run("one operation per commit", 1);
const grouped = await run(`${concurrency} in flight (grouped)`, concurrency);
console.log(`group commit speed-up: ${(grouped / serial).toFixed(1)}x`);
