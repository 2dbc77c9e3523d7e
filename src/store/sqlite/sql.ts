/**
 * Every SQL statement of the SQLite store, by purpose. Values are always
 * bound parameters; nothing here concatenates user input.
 */
import type { JobState } from "../../domain/job.js";

const JOB_COLUMNS = `id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
  schedule_time, create_time, update_time, finish_time, worker_id, lease_expire_time, lease_duration_ms,
  lease_token_hash, deliveries, last_error, result, idempotency_key, request_hash`;

export const SQL = {
  insertJob: `INSERT INTO jobs (${JOB_COLUMNS}) VALUES (@id, @queue, @task, @payload, @priority, @state, @attempts,
    @max_attempts, @retry_base_delay_ms, @schedule_time, @create_time, @update_time, @finish_time, @worker_id,
    @lease_expire_time, @lease_duration_ms, @lease_token_hash, @deliveries, @last_error, @result,
    @idempotency_key, @request_hash)`,

  /** Writes the mutable columns of a job after a transition. */
  updateJob: `UPDATE jobs SET state = @state, attempts = @attempts, schedule_time = @schedule_time,
    update_time = @update_time, finish_time = @finish_time, worker_id = @worker_id,
    lease_expire_time = @lease_expire_time, lease_duration_ms = @lease_duration_ms,
    lease_token_hash = @lease_token_hash, deliveries = @deliveries, last_error = @last_error, result = @result
    WHERE id = @id`,

  jobById: `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ?`,

  jobByIdempotencyKey: `SELECT ${JOB_COLUMNS} FROM jobs WHERE queue = ? AND idempotency_key = ?`,

  /**
   * Walks jobs_claim_order in claim order (no sort step). INDEXED BY pins the
   * plan: without statistics the planner would prefer jobs_pending_since and
   * sort every eligible job.
   */
  claimableJobs: `SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_claim_order
    WHERE queue = ? AND state IN ('queued','retry') AND schedule_time <= ?
    ORDER BY priority DESC, schedule_time, id LIMIT ?`,

  expiredLeases: `SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_lease_expiry
    WHERE state = 'running' AND lease_expire_time <= ? ORDER BY lease_expire_time LIMIT ?`,

  expiredLeasesOfQueue: `SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_lease_expiry
    WHERE state = 'running' AND lease_expire_time <= ? AND queue = ? ORDER BY lease_expire_time LIMIT ?`,

  /** Also the cheap "is anything eligible?" check before a claim walks jobs_claim_order. */
  oldestPendingSince: `SELECT min(schedule_time) AS t FROM jobs
    WHERE queue = ? AND state IN ('queued','retry') AND schedule_time <= ?`,

  nextScheduledTime: `SELECT min(schedule_time) AS t FROM jobs
    WHERE queue = ? AND state IN ('queued','retry') AND schedule_time > ?`,

  insertEvent: `INSERT INTO job_events (job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message)
    VALUES (@jobId, @queue, @kind, @fromState, @toState, @eventTime, @workerId, @attempt, @message)
    RETURNING sequence`,

  eventsOfJob: `SELECT * FROM job_events WHERE job_id = ? ORDER BY sequence`,

  /** Stored events after a sequence: all of them (the primary key), by queue, or by job (their indexes). */
  eventsAfter: `SELECT * FROM job_events WHERE sequence > @after ORDER BY sequence LIMIT @limit`,
  eventsOfQueueAfter: `SELECT * FROM job_events INDEXED BY job_events_by_queue
    WHERE queue = @queue AND sequence > @after ORDER BY sequence LIMIT @limit`,
  eventsOfJobAfter: `SELECT * FROM job_events INDEXED BY job_events_by_job
    WHERE job_id = @jobId AND sequence > @after AND (@queue IS NULL OR queue = @queue) ORDER BY sequence LIMIT @limit`,

  eventBounds: `SELECT coalesce(min(sequence), 0) AS oldest, coalesce(max(sequence), 0) AS latest FROM job_events`,

  /** Highest sequence ever handed out, even if those events were deleted since. */
  lastSequence: `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'job_events'), 0) AS seq`,

  adjustCount: `INSERT INTO job_counts (queue, state, count) VALUES (?, ?, ?)
    ON CONFLICT (queue, state) DO UPDATE SET count = count + excluded.count`,

  counts: `SELECT queue, state, count FROM job_counts WHERE count <> 0 ORDER BY queue`,

  /** The readiness probe's write: one row, one page, its own durable commit. */
  touchWriteProbe: `UPDATE write_probe SET probe_time = ?, probes = probes + 1 WHERE id = 1`,

  /** Rows changed by this connection so far: tells a commit that wrote from one that changed nothing. */
  totalChanges: `SELECT total_changes() AS n`,
} as const;

/**
 * ListJobs, newest first, for each combination of filters. Each variant is
 * served by one of the jobs_*_recent indexes (checked in the store tests).
 */
export function listJobsSql(filter: { queue: boolean; states: number; before: boolean }): string {
  const where: string[] = [];
  if (filter.queue) where.push("queue = @queue");
  if (filter.states > 0) {
    const placeholders = Array.from({ length: filter.states }, (_, i) => `@state${i}`).join(", ");
    where.push(`state IN (${placeholders})`);
  }
  if (filter.before) where.push("id < @before");
  const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
  return `SELECT ${JOB_COLUMNS} FROM jobs ${clause} ORDER BY id DESC LIMIT @limit`;
}

export type StateParams = Record<`state${number}`, JobState>;
