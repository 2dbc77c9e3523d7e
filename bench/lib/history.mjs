/**
 * Scenario (c)'s history: a fresh database holding `count` completed jobs
 * (queue "bench-history", finished over the last 24 hours, each with its
 * SUBMITTED, CLAIMED and COMPLETED events), written before the server
 * starts. The file is created by the server's own `leasequeue migrate`, so
 * its schema and schema version are exactly the server's; the rows go in
 * with prepared statements in one transaction, the job counts table is set
 * to match, and the WAL is checkpointed so the server starts on a settled
 * file.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { checkJobsTable, JOB_COLUMNS, lifecycleStatements } from "./sqlite-jobs.mjs";
import { v7 as uuidv7 } from "uuid";

const BIN = fileURLToPath(new URL("../../bin/leasequeue.js", import.meta.url));

/** Creates `dbPath` (which must not exist) with `count` completed jobs; returns {jobs, events, ms}. */
export function seedHistory(dbPath, count) {
  const t0 = performance.now();
  const migrated = spawnSync(process.execPath, [BIN, "migrate", "--db", dbPath], { encoding: "utf8", timeout: 60_000 });
  if (migrated.status !== 0) throw new Error(`leasequeue migrate failed (${migrated.status}): ${migrated.stderr}${migrated.stdout}`);
  const db = new Database(dbPath);
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = OFF"); // a fixture: durable once checkpointed below
    db.pragma("cache_size = -1048576"); // 1 GiB of page cache: the indexes stay in memory while they grow
    checkJobsTable(db);
    const s = lifecycleStatements(db);
    const queue = "bench-history";
    const end = Date.now() - 60_000;
    const start = end - 24 * 3600_000;
    const step = (end - start) / count;
    db.transaction(() => {
      for (let n = 0; n < count; n++) {
        const created = Math.floor(start + n * step);
        const claimed = created + 5;
        const finished = created + 20;
        const id = uuidv7({ msecs: created });
        s.insertJob.run({
          id,
          queue,
          task: "bench",
          payload: `{"i":${n}}`,
          priority: 0,
          state: "completed",
          attempts: 1,
          max_attempts: 3,
          retry_base_delay_ms: 15000,
          schedule_time: created,
          create_time: created,
          update_time: finished,
          finish_time: finished,
          worker_id: null,
          lease_expire_time: null,
          lease_duration_ms: 60000,
          lease_token_hash: null,
          deliveries: 1,
          last_error: null,
          result: null,
          idempotency_key: null,
          request_hash: null,
        });
        s.insertEvent.get(id, queue, "submitted", null, "queued", created, null, 0);
        s.insertEvent.get(id, queue, "claimed", "queued", "running", claimed, "history", 1);
        s.insertEvent.get(id, queue, "completed", "running", "completed", finished, "history", 1);
      }
      s.adjustCount.run(queue, "completed", count);
    }).immediate();
    db.pragma("wal_checkpoint(TRUNCATE)");
    const jobs = db.prepare("SELECT count(*) AS n FROM jobs WHERE state = 'completed'").get().n;
    const events = db.prepare("SELECT count(*) AS n FROM job_events").get().n;
    if (jobs !== count) throw new Error(`seeded ${jobs} completed jobs, expected ${count}`);
    return { jobs, events, ms: performance.now() - t0, columns: JOB_COLUMNS.length };
  } finally {
    db.close();
  }
}
