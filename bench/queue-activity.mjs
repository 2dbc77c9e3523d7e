#!/usr/bin/env node
/**
 * What keeping the queue activity samples costs (docs/performance.md "Queue
 * activity samples"; docs/api.md "Queue activity"): the batched job life of
 * "Writes per job on SQLite" (SubmitBatch of 100, a claim of 100, 100
 * Completes, 8 batches in flight) through the store in this process, in
 * rounds that alternate with the samples written and without (the engine
 * port's addActivity replaced by a no-op for that round: the summing in
 * memory stays, so "without" is the write alone taken away). Each round is
 * a child process of its own, on a fresh database.
 *
 * Per job, per round: CPU of the process (user + system), wall time,
 * statements run, and on SQLite the WAL appended (checkpoints off, so the
 * WAL's size over the jobs; it does not depend on the machine's load) and
 * the time spent in the samples' upserts (timed around addActivity).
 * Prints each round and the medians; asserts nothing.
 *
 *   npm run build && node bench/queue-activity.mjs [--jobs=20000] [--rounds=4] [--engines=sqlite,postgres]
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { newJob } from "./lib/new-job.mjs";
import { POSTGRES_URL, postgresAvailable } from "./lib/peers.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const BATCH = 100;
const IN_FLIGHT = 8;

const { values: args } = parseArgs({
  options: {
    jobs: { type: "string", default: "20000" },
    rounds: { type: "string", default: "4" },
    engines: { type: "string", default: "sqlite,postgres" },
    child: { type: "string" },
  },
});
const JOBS = Number(args.jobs);

if (args.child !== undefined) {
  const [engine, mode] = args.child.split(":");
  process.stdout.write(`${JSON.stringify(await round(engine, mode === "on"))}\n`);
  process.exit(0);
}

/** One round in this process: the job life on a fresh database, with the samples written or not. */
async function round(engine, samples) {
  const dir = mkdtempSync(join(HERE, ".data", "activity-"));
  let statements = 0;
  let writingMs = null;
  let store;
  let walBytes = () => null;
  let cleanup = async () => {};
  if (engine === "sqlite") {
    const { SqlitePort } = await import("../dist/src/store/sqlite/sqlite-port.js");
    const addActivity = Object.getOwnPropertyDescriptor(SqlitePort.prototype, "addActivity").value;
    // On: the time spent writing the samples, timed where the transaction writes them (SQLite answers at once).
    SqlitePort.prototype.addActivity = samples
      ? function (deltas) {
          const t = performance.now();
          addActivity.call(this, deltas);
          writingMs += performance.now() - t;
        }
      : () => {};
    const { openSqliteStore } = await import("../dist/src/store/sqlite/sqlite-store.js");
    const { systemClock } = await import("../dist/src/domain/clock.js");
    writingMs = 0;
    const path = join(dir, "bench.db");
    // synchronous=normal: the figures are the store's work, not the disk's fsync.
    store = openSqliteStore({ path, clock: systemClock, synchronous: "normal" });
    store.db.pragma("wal_autocheckpoint = 0");
    // Every statement the store runs, counted where better-sqlite3 runs it.
    const Statement = Object.getPrototypeOf(store.db.prepare("SELECT 1"));
    for (const method of ["run", "get", "all"]) {
      const original = Object.getOwnPropertyDescriptor(Statement, method).value;
      Statement[method] = function (...params) {
        statements++;
        return original.apply(this, params);
      };
    }
    const walAt = () => statSync(`${path}-wal`).size;
    const before = walAt();
    walBytes = () => walAt() - before;
  } else {
    const { PgPort } = await import("../dist/src/store/postgres/pg-port.js");
    if (!samples) PgPort.prototype.addActivity = async () => {};
    const { openPgStore } = await import("../dist/src/store/postgres/pg-store.js");
    const { systemClock } = await import("../dist/src/domain/clock.js");
    const pg = (await import("pg")).default;
    const schema = `bench_activity_${process.pid}`;
    store = await openPgStore({ url: POSTGRES_URL, schema, clock: systemClock, poolSize: 10, statementTimeoutMs: 0 });
    // Every statement a pooled connection sends (the store's transactions and reads).
    // The original method, read through its descriptor: it is called with each client as `this`.
    const query = Object.getOwnPropertyDescriptor(pg.Client.prototype, "query").value;
    pg.Client.prototype.query = function (...params) {
      statements++;
      return query.apply(this, params);
    };
    cleanup = async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    };
  }
  const counted0 = statements;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < JOBS) {
        const start = next;
        next += BATCH;
        await store.submit(Array.from({ length: BATCH }, (_, i) => newJob(start + i)));
        const { leases } = await store.claimOutcome({ queue: "bench", workerId: "w", leaseDurationMs: 60_000, maxJobs: BATCH });
        await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
      }
    }),
  );
  // On PostgreSQL concurrent claims skip each other's rows (SKIP LOCKED), so a claim may get fewer than its batch: the rest here.
  for (;;) {
    const { leases } = await store.claimOutcome({ queue: "bench", workerId: "w", leaseDurationMs: 60_000, maxJobs: BATCH });
    if (leases.length === 0) break;
    await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const ran = statements - counted0;
  const wal = walBytes();
  // What the samples say was completed, against the counts: the same.
  const sampled = (await store.queueActivity("bench", 0)).samples.reduce((n, s) => n + s.completed, 0);
  const counted = (await store.queueCounts()).find((q) => q.queue === "bench")?.counts.completed ?? 0;
  await store.close();
  await cleanup();
  rmSync(dir, { recursive: true, force: true });
  return {
    engine,
    samples,
    jobs: next,
    cpuUsPerJob: (cpu.user + cpu.system) / next,
    wallUsPerJob: (wallMs * 1000) / next,
    statementsPerJob: ran / next,
    walBytesPerJob: wal === null ? null : wal / next,
    writingUsPerJob: writingMs === null || !samples ? null : (writingMs * 1000) / next,
    completedInSamples: sampled,
    completedInCounts: counted,
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fixed = (x, digits) => (x === null ? "-" : x.toFixed(digits));

mkdirSync(join(HERE, ".data"), { recursive: true });
const engines = [];
for (const engine of args.engines.split(",")) {
  if (engine === "sqlite") engines.push(engine);
  else if (engine === "postgres") {
    const pgUp = await postgresAvailable();
    if (pgUp.ok) engines.push(engine);
    else console.log(`postgres skipped: ${pgUp.why}`);
  } else throw new Error(`--engines: "sqlite" or "postgres", not "${engine}"`);
}
console.log(`queue activity samples: ${JOBS} jobs per round, batches of ${BATCH}, ${IN_FLIGHT} in flight, ${args.rounds} rounds each way`);
for (const engine of engines) {
  const results = [];
  for (let r = 0; r < Number(args.rounds); r++) {
    // Alternating, so a change in the machine's load falls on both alike.
    for (const mode of r % 2 === 0 ? ["on", "off"] : ["off", "on"]) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), `--jobs=${JOBS}`, `--child=${engine}:${mode}`], {
        encoding: "utf8",
      });
      const result = JSON.parse(out.trim().split("\n").at(-1));
      results.push(result);
      console.log(
        `  ${engine} samples ${mode.padEnd(3)} cpu ${fixed(result.cpuUsPerJob, 1).padStart(6)} µs/job  wall ${fixed(result.wallUsPerJob, 1).padStart(6)} µs/job  ` +
          `statements ${fixed(result.statementsPerJob, 3)}/job  WAL ${fixed(result.walBytesPerJob, 0)} bytes/job  writing samples ${fixed(result.writingUsPerJob, 3)} µs/job  ` +
          `(completed: ${result.completedInCounts} counted, ${result.completedInSamples} in samples)`,
      );
    }
  }
  for (const samples of [true, false]) {
    const rows = results.filter((r) => r.samples === samples);
    const wal = rows[0].walBytesPerJob === null ? null : median(rows.map((r) => r.walBytesPerJob));
    const writing = rows[0].writingUsPerJob === null ? null : median(rows.map((r) => r.writingUsPerJob));
    console.log(
      `  ${engine} median, samples ${samples ? "on " : "off"}: cpu ${fixed(median(rows.map((r) => r.cpuUsPerJob)), 1)} µs/job, ` +
        `wall ${fixed(median(rows.map((r) => r.wallUsPerJob)), 1)} µs/job, statements ${fixed(median(rows.map((r) => r.statementsPerJob)), 3)}/job, WAL ${fixed(wal, 0)} bytes/job` +
        (writing === null ? "" : `, writing samples ${fixed(writing, 3)} µs/job`),
    );
  }
}
