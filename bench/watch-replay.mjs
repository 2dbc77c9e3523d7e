#!/usr/bin/env node
/**
 * What a long WatchEvents replay costs the writers (docs/api.md "WatchEvents
 * limits"): the real server on a SQLite file seeded with EVENTS stored
 * events, WRITERS unary Submit loops (gRPC, a process of their own) for
 * SECONDS, measured alone and with a replay from sequence 0 beside them
 * (another process): one that reads as fast as it can, and one that reads
 * slowly (a pause after every 100 events). Rounds alternate the three, so
 * drift cancels. Prints the writers' Submit latency (p50/p99) and rate, the
 * replay's events/s and the server's CPU; asserts nothing.
 *
 *   npm run build && node bench/watch-replay.mjs [--events=1000000] [--seconds=10] [--writers=8] [--rounds=2]
 *   LEASEQUEUE_BENCH_CPU_PROF=dir  also writes a server CPU profile per run into dir
 */
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { forkChild } from "./lib/children.mjs";
import { startLeaseQueueServer } from "./lib/leasequeue-server.mjs";
import { applyServerMigrations } from "./lib/sqlite-jobs.mjs";

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "1000000" },
    seconds: { type: "string", default: "10" },
    writers: { type: "string", default: "8" },
    rounds: { type: "string", default: "2" },
  },
});
const EVENTS = Number(values.events);
const SECONDS = Number(values.seconds);
const WRITERS = Number(values.writers);
const ROUNDS = Number(values.rounds);
const CHILD = new URL("./children/watch-replay-client.mjs", import.meta.url).pathname;

/** A database file with EVENTS stored events (SUBMITTED events of jobs that are not stored: the replay reads only events). */
function seed(path) {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  applyServerMigrations(db);
  const now = Date.now();
  db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     INSERT INTO job_events (job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
     SELECT printf('0190b5a2-0000-7000-8000-%012d', i), 'history', 'SUBMITTED', NULL, 'QUEUED', ? + i, NULL, 0, NULL, '' FROM n`,
  ).run(EVENTS, now - EVENTS);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
}

async function run(kind, seeded, dir) {
  const db = join(dir, `${kind}.db`);
  copyFileSync(seeded, db);
  const server = await startLeaseQueueServer({
    db,
    ...(process.env.LEASEQUEUE_BENCH_CPU_PROF ? { cpuProfDir: process.env.LEASEQUEUE_BENCH_CPU_PROF } : {}),
  });
  let replay;
  if (kind !== "alone") {
    replay = forkChild(CHILD, { role: "replay", url: server.url, slow: kind === "slow replay", events: EVENTS }, "replay");
    await replay.next("started", 30_000);
  }
  const writer = forkChild(CHILD, { role: "writers", url: server.url, writers: WRITERS, seconds: SECONDS }, "writers");
  await writer.next("ready", 30_000);
  const cpu0 = server.cpuMs();
  const replayed0 = replay === undefined ? 0 : (await askCount(replay)).events;
  writer.send({ type: "go" });
  const result = (await writer.next("result", (SECONDS + 60) * 1000)).result;
  const cpu1 = server.cpuMs();
  const replayed1 = replay === undefined ? 0 : (await askCount(replay)).events;
  await writer.stop();
  await replay?.stop();
  await server.stop();
  rmSync(db, { force: true });
  rmSync(`${db}-wal`, { force: true });
  rmSync(`${db}-shm`, { force: true });
  return {
    kind,
    ...result,
    replayPerSecond: Math.round((replayed1 - replayed0) / result.seconds),
    serverCpu: (cpu1 - cpu0) / 1000 / result.seconds,
  };
}

function askCount(child) {
  child.send({ type: "count" });
  return child.next("count", 10_000);
}

const dir = mkdtempSync(join(tmpdir(), "lq-replay-"));
try {
  const seeded = join(dir, "seeded.db");
  const t0 = Date.now();
  seed(seeded);
  console.log(`seeded ${EVENTS} events in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${WRITERS} writers, ${SECONDS} s per run`);
  console.log("run            submits/s   p50 ms   p99 ms   replay events/s   server cores");
  const orders = [
    ["alone", "replay", "slow replay"],
    ["slow replay", "replay", "alone"],
  ];
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of orders[round % 2]) {
      const r = await run(kind, seeded, dir);
      console.log(
        `${r.kind.padEnd(14)} ${String(Math.round(r.rate)).padStart(9)} ${r.p50.toFixed(1).padStart(8)} ${r.p99.toFixed(1).padStart(8)} ` +
          `${String(r.replayPerSecond).padStart(17)} ${r.serverCpu.toFixed(2).padStart(14)}`,
      );
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
