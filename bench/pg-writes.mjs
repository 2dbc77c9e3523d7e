#!/usr/bin/env node
/**
 * Writes per job on PostgreSQL (docs/performance.md "Writes per job"): one
 * run of scenario (b)'s workload (8 producers with SubmitBatch of 100, 4
 * worker processes on Work with max_in_flight 64 and batched acks) against
 * a server whose node-postgres client counts every statement
 * (bench/lib/pg-statement-counter.mjs), then:
 *
 * - per transaction kind: how many, statements and round trips each, rows;
 * - per job: rows inserted, updated (HOT or not) and deleted per table,
 *   from pg_stat_user_tables once the server's backends have exited;
 * - per job, when the database has the pg_walinspect extension (PostgreSQL
 *   15; `CREATE EXTENSION pg_walinspect` as a superuser): the WAL records
 *   of the schema's tables and indexes over the run, so the index entries
 *   written per index (B-tree leaf inserts, splits included: a split carries the new entry) and the WAL bytes per table.
 *
 * Usage: node bench/pg-writes.mjs [--jobs=5000] [--url=postgres://...] [--schema=bench_pg_writes] [--out=FILE]
 * Needs dist/ (npm run build). The schema is dropped before and after.
 */
import { once } from "node:events";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { forkChild, spawnTracked } from "./lib/children.mjs";
import { POSTGRES_URL } from "./lib/peers.mjs";
import { commandCpuMeter, processCpuMs } from "./lib/proc.mjs";
import { sleep } from "./lib/timing.mjs";

const { values: args } = parseArgs({
  options: {
    jobs: { type: "string", default: "5000" },
    url: { type: "string", default: POSTGRES_URL },
    schema: { type: "string", default: "bench_pg_writes" },
    out: { type: "string" },
  },
});
const N = Number(args.jobs);
const SCHEMA = args.schema;
if (!/^[a-z_][a-z0-9_]*$/.test(SCHEMA)) throw new Error(`--schema: a plain lower-case identifier, not ${SCHEMA}`);
const BIN = fileURLToPath(new URL("../bin/leasequeue.js", import.meta.url));
const COUNTER = fileURLToPath(new URL("./lib/pg-statement-counter.mjs", import.meta.url));
const CLIENT = fileURLToPath(new URL("./children/leasequeue-client.mjs", import.meta.url));
const COUNT_FILE = join(tmpdir(), `leasequeue-pg-writes-${process.pid}.json`);
const log = (msg) => process.stderr.write(`[pg-writes] ${msg}\n`);

const db = new pg.Client({ connectionString: args.url });
await db.connect();
const walinspect = (await db.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect'")).rowCount > 0;
if (!walinspect)
  log("pg_walinspect is not installed in this database: no WAL or index-entry figures (CREATE EXTENSION pg_walinspect, as a superuser)");
await db.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);

const { proc: server, exited } = spawnTracked(
  process.execPath,
  ["--import", COUNTER, BIN, "serve", "--database-url", args.url, "--database-schema", SCHEMA, "--port", "0", "--metrics-port", "0"],
  { env: { ...process.env, LEASEQUEUE_BENCH_COUNT_FILE: COUNT_FILE } },
  "leasequeue server",
);
const url = await new Promise((resolve, reject) => {
  createInterface({ input: server.stdout }).on("line", (line) => {
    try {
      const entry = JSON.parse(line);
      if (entry.msg === "api listening") resolve(entry.url);
    } catch {
      // not a log line
    }
  });
  void exited.then(() => reject(new Error("the server exited before listening")));
});

const workers = Array.from({ length: 4 }, (_, k) =>
  forkChild(
    CLIENT,
    {
      url,
      kind: "batched",
      slots: 4,
      maxInFlight: 64,
      queue: "bench",
      workerId: `bench-worker-${k}`,
      role: "worker",
      timeLimitMs: 600_000,
    },
    `worker ${k}`,
  ),
);
const per = Math.ceil(N / 8);
const ranges = Array.from({ length: 8 }, (_, k) => [Math.min(N, k * per), Math.min(N, (k + 1) * per)]);
const producers = [0, 1].map((p) =>
  forkChild(
    CLIENT,
    {
      url,
      kind: "batched",
      batchSize: 100,
      queue: "bench",
      role: "producer",
      producers: ranges.slice(p * 4, p * 4 + 4),
      timeLimitMs: 600_000,
    },
    `producer ${p}`,
  ),
);
await Promise.all([...workers, ...producers].map((c) => c.next("ready", 60_000)));
// Let the start-up's own statements (migrations, first catch-up) pass before counting.
await sleep(1500);

server.kill("SIGUSR1");
const walFrom = (await db.query("SELECT pg_current_wal_lsn()::text AS lsn")).rows[0].lsn;
const postgresCpu = commandCpuMeter("postgres");
postgresCpu.start();
const serverCpuBefore = processCpuMs(server.pid);
const completed = new Array(workers.length).fill(0);
let allHandled;
const handled = new Promise((resolve) => (allHandled = resolve));
workers.forEach((w, k) =>
  w.on("progress", (m) => {
    completed[k] = m.completed;
    if (completed.reduce((a, b) => a + b, 0) >= N) allHandled();
  }),
);
const t0 = performance.now();
for (const p of producers) p.send({ type: "go" });
await handled;
// The last completions are committed once the store counts them.
for (;;) {
  const { rows } = await db.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.jobs WHERE state = 'completed'`);
  if (rows[0].n >= N) break;
  await sleep(10);
}
const seconds = (performance.now() - t0) / 1000;
const postgresCpuMs = postgresCpu.stop();
const serverCpuMs = processCpuMs(server.pid) - serverCpuBefore;
const walTo = (await db.query("SELECT pg_current_wal_lsn()::text AS lsn")).rows[0].lsn;
server.kill("SIGUSR2");
for (let i = 0; i < 100 && !existsSync(COUNT_FILE); i++) await sleep(20);
const count = JSON.parse(readFileSync(COUNT_FILE, "utf8"));
rmSync(COUNT_FILE, { force: true });

for (const w of workers) w.send({ type: "stop" });
await Promise.all(workers.map((w) => w.next("result", 30_000)));
await Promise.all([...workers, ...producers].map((c) => c.stop(3000)));
server.kill("SIGTERM");
await once(server, "exit");
// Backends report their table statistics when they exit.
await sleep(1500);

const tables = (
  await db.query(
    `SELECT relname AS table, n_tup_ins::int AS inserted, n_tup_upd::int AS updated, n_tup_hot_upd::int AS hot, n_tup_del::int AS deleted
     FROM pg_stat_user_tables WHERE schemaname = $1 AND n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY relname`,
    [SCHEMA],
  )
).rows;
const wal = walinspect
  ? (
      await db.query(
        `WITH r AS (
           SELECT resource_manager || ' ' || record_type AS record, record_length, fpi_length,
             (regexp_match(block_ref, 'rel \\d+/\\d+/(\\d+)'))[1]::oid AS node
           FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn))
         SELECT c.relname AS relation, c.relkind = 'i' AS index, r.record, count(*)::int AS records,
           sum(r.record_length)::int AS bytes, sum(r.fpi_length)::int AS fpi_bytes
         FROM r JOIN pg_class c ON c.relfilenode = r.node JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = $3
         GROUP BY 1, 2, 3 ORDER BY 1, 3`,
        [walFrom, walTo, SCHEMA],
      )
    ).rows
  : [];
const indexes = (
  await db.query(
    `SELECT i.relname AS index, c.relname AS table, pg_get_indexdef(i.oid) AS definition
     FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname IN ('jobs', 'job_events', 'unsequenced_events')
     ORDER BY 2, 1`,
    [SCHEMA],
  )
).rows;
await db.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await db.end();

// ------------------------------------------------------------------ report

const perJob = (x) => (x / N).toFixed(3);
const lines = [];
lines.push(
  `${N} jobs in ${seconds.toFixed(1)} s (${Math.round(N / seconds)} jobs/s); CPU per job: server ${perJob(serverCpuMs)} ms, ` +
    `every postgres process ${perJob(postgresCpuMs)} ms`,
);
lines.push(
  "",
  "| transactions | count | jobs each | statements each | round trips each | shape (most frequent) |",
  "|---|--:|--:|--:|--:|---|",
);
let statements = 0;
let roundTrips = 0;
let transactions = 0;
for (const [kind, t] of Object.entries(count.transactions)) {
  statements += t.statements;
  roundTrips += t.roundTrips;
  transactions += t.transactions;
  const jobs = Math.max(
    t.rows["INSERT jobs"] ?? 0,
    t.rows["UPDATE jobs"] ?? 0,
    (t.rows["INSERT jobs"] ?? 0) + (t.rows["UPDATE jobs"] ?? 0),
  );
  const [shape] = Object.entries(t.shapes).sort((a, b) => b[1] - a[1])[0];
  lines.push(
    `| ${kind} | ${t.transactions} | ${(jobs / t.transactions).toFixed(0)} | ${(t.statements / t.transactions).toFixed(1)} | ` +
      `${(t.roundTrips / t.transactions).toFixed(1)} | ${shape} |`,
  );
}
let outsideStatements = 0;
for (const o of Object.values(count.outside)) outsideStatements += o.statements;
lines.push(
  "",
  `Per job: ${perJob(transactions)} transactions, ${perJob(statements)} statements in them (${perJob(roundTrips)} round trips); ` +
    `outside transactions ${perJob(outsideStatements)} statements: ` +
    Object.entries(count.outside)
      .map(([k, o]) => `${k} ${o.statements}`)
      .join(", "),
);
lines.push("", "| table | inserted per job | updated per job | of which HOT | deleted per job |", "|---|--:|--:|--:|--:|");
for (const t of tables)
  lines.push(`| ${t.table} | ${perJob(t.inserted)} | ${perJob(t.updated)} | ${perJob(t.hot)} | ${perJob(t.deleted)} |`);
if (walinspect) {
  const entries = new Map();
  const bytes = new Map();
  /** Full-page images: written after each checkpoint, so they depend on its timing more than on the workload. */
  let fullPages = 0;
  for (const w of wal) {
    if (w.index && /Btree (INSERT_LEAF|INSERT_POST|SPLIT_L|SPLIT_R)/.test(w.record))
      entries.set(w.relation, (entries.get(w.relation) ?? 0) + w.records);
    bytes.set(w.relation, (bytes.get(w.relation) ?? 0) + w.bytes - w.fpi_bytes);
    fullPages += w.fpi_bytes;
  }
  lines.push("", "| index | entries written per job | definition |", "|---|--:|---|");
  let total = 0;
  for (const { index, definition } of indexes) {
    const n = entries.get(index) ?? 0;
    total += n;
    lines.push(
      `| ${index} | ${perJob(n)} | \`${definition.replace(/ USING btree/, "").replace(/^CREATE (UNIQUE )?INDEX \S+ ON \S+ /, "")}\` |`,
    );
  }
  lines.push(`| every index above | ${perJob(total)} | |`);
  const lockRecords = wal.filter((w) => w.relation === "jobs" && w.record === "Heap LOCK").reduce((a, w) => a + w.records, 0);
  lines.push(
    "",
    `WAL per job (bytes, record headers and data; full-page images apart): ` +
      [...bytes].map(([r, b]) => `${r} ${Math.round(b / N)}`).join(", ") +
      `; in all ${Math.round([...bytes.values()].reduce((a, b) => a + b, 0) / N)}; full-page images besides ${Math.round(fullPages / N)}` +
      ` (after a checkpoint). Row-lock records on jobs: ${perJob(lockRecords)} per job.`,
  );
}
const report = lines.join("\n");
process.stdout.write(`${report}\n`);
if (args.out !== undefined) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(args.out, JSON.stringify({ jobs: N, seconds, serverCpuMs, postgresCpuMs, count, tables, wal, indexes }, null, 1));
}
