/**
 * Rows of the server's SQLite schema written directly, for the in-process
 * ceiling and for seeding scenario (c)'s history. The schema itself always
 * comes from the server's own migrations (dist/src/store/sqlite), so a
 * schema change shows up here as a clear error rather than a silently
 * different table.
 */
import { createHash, randomBytes } from "node:crypto";
import { v7 as uuidv7 } from "uuid";
import { MIGRATIONS } from "../../dist/src/store/sqlite/migrations.js";

/** The columns the bench writes; every NOT NULL column without a default must be among them. */
export const JOB_COLUMNS = [
  "id",
  "queue",
  "task",
  "payload",
  "priority",
  "state",
  "attempts",
  "max_attempts",
  "retry_base_delay_ms",
  "schedule_time",
  "create_time",
  "update_time",
  "finish_time",
  "worker_id",
  "lease_expire_time",
  "lease_duration_ms",
  "lease_token_hash",
  "deliveries",
  "last_error",
  "result",
  "idempotency_key",
  "request_hash",
];

export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

/** Applies the server's migrations to an open better-sqlite3 database. */
export function applyServerMigrations(db) {
  const current = db.pragma("user_version", { simple: true });
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
  }
}

/** Throws unless the jobs table is one the bench knows how to fill. */
export function checkJobsTable(db) {
  const version = db.pragma("user_version", { simple: true });
  if (version !== SCHEMA_VERSION) throw new Error(`database schema version ${version}, the server's migrations reach ${SCHEMA_VERSION}`);
  const columns = db.prepare("PRAGMA table_info(jobs)").all();
  const missing = columns
    .filter((c) => c.notnull === 1 && c.dflt_value === null && c.pk === 0 && !JOB_COLUMNS.includes(c.name))
    .map((c) => c.name);
  const gone = JOB_COLUMNS.filter((name) => !columns.some((c) => c.name === name));
  if (missing.length > 0 || gone.length > 0) {
    throw new Error(
      `the jobs table changed: required columns the bench does not write: [${missing.join(",")}]; columns the bench writes that are gone: [${gone.join(",")}]. Update bench/lib/sqlite-jobs.mjs.`,
    );
  }
}

/** Prepared statements of one lifecycle: insert, claim, complete, each with its event and count update. */
export function lifecycleStatements(db) {
  return {
    insertJob: db.prepare(`INSERT INTO jobs (${JOB_COLUMNS.join(", ")}) VALUES (${JOB_COLUMNS.map((c) => `@${c}`).join(", ")})`),
    insertEvent: db.prepare(`INSERT INTO job_events (job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL) RETURNING sequence`),
    adjustCount: db.prepare(`INSERT INTO job_counts (queue, state, count) VALUES (?, ?, ?)
      ON CONFLICT (queue, state) DO UPDATE SET count = count + excluded.count`),
    claimable: db.prepare(`SELECT * FROM jobs INDEXED BY jobs_claim_order
      WHERE queue = ? AND state IN ('queued','retry') AND schedule_time <= ? ORDER BY priority DESC, schedule_time, id LIMIT ?`),
    claim: db.prepare(`UPDATE jobs SET state = 'running', attempts = attempts + 1, deliveries = deliveries + 1, update_time = @now,
      worker_id = @worker, lease_expire_time = @expire, lease_duration_ms = 60000, lease_token_hash = @hash WHERE id = @id`),
    jobById: db.prepare(`SELECT * FROM jobs WHERE id = ?`),
    complete: db.prepare(`UPDATE jobs SET state = 'completed', update_time = @now, finish_time = @now, worker_id = NULL,
      lease_expire_time = NULL, lease_token_hash = NULL WHERE id = @id`),
  };
}

/** A queued job row as the server writes it on Submit. */
export function queuedJobRow(queue, i, now) {
  return {
    id: uuidv7({ msecs: now }),
    queue,
    task: "bench",
    payload: JSON.stringify({ i }),
    priority: 0,
    state: "queued",
    attempts: 0,
    max_attempts: 3,
    retry_base_delay_ms: 15000,
    schedule_time: now,
    create_time: now,
    update_time: now,
    finish_time: null,
    worker_id: null,
    lease_expire_time: null,
    lease_duration_ms: null,
    lease_token_hash: null,
    deliveries: 0,
    last_error: null,
    result: null,
    idempotency_key: null,
    request_hash: null,
  };
}

/** A lease token and the SHA-256 hash the server stores, as on a real claim. */
export function leaseTokenHash() {
  return createHash("sha256").update(randomBytes(32).toString("base64url")).digest();
}
