/**
 * Scenario (c)'s history on PostgreSQL: a fresh schema holding `count`
 * completed jobs (queue "bench-history", finished over the last 24 hours,
 * each with its SUBMITTED, CLAIMED and COMPLETED events), written before
 * the server starts, as bench/lib/history.mjs does for SQLite. The schema
 * is created by the server's own `leasequeue migrate`; the rows go in with
 * set-based INSERTs (ids from the schema's own new_job_id(), UUIDv7 like
 * the server's), and the counts and the event sequence are set to match.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";

const BIN = fileURLToPath(new URL("../../bin/leasequeue.js", import.meta.url));

/** Migrates `schema` (which should not exist) and fills it; returns {jobs, events, ms}. */
export async function seedPgHistory(url, schema, count) {
  const t0 = performance.now();
  const migrated = spawnSync(process.execPath, [BIN, "migrate", "--database-url", url, "--database-schema", schema], {
    encoding: "utf8",
    timeout: 60_000,
  });
  if (migrated.status !== 0) throw new Error(`leasequeue migrate failed (${migrated.status}): ${migrated.stderr}${migrated.stdout}`);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const s = `"${schema}"`;
    const end = Date.now() - 60_000;
    const start = end - 24 * 3600_000;
    await client.query("BEGIN");
    // Numbers only (no user input): spliced as literals so the planner sees them.
    const [n0, t0ms, t1ms] = [Math.trunc(count), Math.trunc(start), Math.trunc(end)];
    await client.query(`CREATE TEMP TABLE seed ON COMMIT DROP AS
      SELECT n, ${s}.new_job_id(t) AS id, t AS created
      FROM (SELECT n, (${t0ms} + floor(n::float8 * ${t1ms - t0ms} / ${n0}))::bigint AS t FROM generate_series(0, ${n0 - 1}) n) g`);
    await client.query(`INSERT INTO ${s}.jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
        schedule_time, create_time, update_time, finish_time, lease_duration_ms, deliveries)
      SELECT id, 'bench-history', 'bench', '{"i":' || n || '}', 0, 'completed', 1, 3, 15000,
        created, created, created + 20, created + 20, 60000, 1 FROM seed`);
    await client.query(`INSERT INTO ${s}.job_events (sequence, job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt)
      SELECT 3 * n + k + 1, id, 'bench-history',
        (ARRAY['submitted','claimed','completed'])[k + 1], (ARRAY[NULL,'queued','running'])[k + 1],
        (ARRAY['queued','running','completed'])[k + 1], created + (ARRAY[0,5,20])[k + 1],
        CASE WHEN k = 0 THEN NULL ELSE 'history' END, CASE WHEN k = 0 THEN 0 ELSE 1 END
      FROM seed, generate_series(0, 2) k`);
    await client.query(`UPDATE ${s}.event_sequence SET last_sequence = $1 WHERE id = 1`, [3 * count]);
    await client.query(`INSERT INTO ${s}.job_counts (queue, state, count) VALUES ('bench-history', 'completed', $1)`, [count]);
    await client.query("COMMIT");
    await client.query(`ANALYZE ${s}.jobs`);
    await client.query(`ANALYZE ${s}.job_events`);
    const { rows } = await client.query(
      `SELECT (SELECT count(*) FROM ${s}.jobs)::int AS jobs, (SELECT count(*) FROM ${s}.job_events)::int AS events`,
    );
    if (rows[0].jobs !== count) throw new Error(`seeded ${rows[0].jobs} completed jobs, expected ${count}`);
    return { jobs: rows[0].jobs, events: rows[0].events, ms: performance.now() - t0 };
  } finally {
    await client.end();
  }
}

/** Drops a bench schema (before and after each run). */
export async function dropPgSchema(url, schema) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * ANALYZE of the schema's tables: the planner's statistics after a bulk load,
 * which autovacuum would gather within a minute or so (it is off on the
 * machine these figures come from; docs/postgresql.md "Statistics").
 */
export async function analyzePgSchema(url, schema) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query("SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename", [schema]);
    for (const { tablename } of rows) await client.query(`ANALYZE "${schema}"."${tablename}"`);
  } finally {
    await client.end();
  }
}
