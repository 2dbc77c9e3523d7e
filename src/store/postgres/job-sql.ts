/**
 * The job statements of the PostgreSQL store, and job rows as domain values
 * and back. Values always travel as bound parameters; only the schema name
 * is spliced, through quoteIdentifier. Many-row writes bind one array per
 * column and `unnest` them, so a claim of 100 jobs or a SubmitBatch of 500
 * is one statement, however many rows.
 *
 * Job rows are read in array mode (node-postgres `rowMode: "array"`) in
 * JOB_COLUMN_NAMES order (store/rows/job-columns.ts, shared with SQLite); bigint columns come
 * back as numbers (pool.ts sets the parser: every time is epoch ms, far
 * below 2^53).
 */
import type { JobState, StoredJob } from "../../domain/job.js";
import { JOB_COLUMN_NAMES, jobColumnArrays, UPDATED_JOB_COLUMN_NAMES, type JobColumn } from "../rows/job-columns.js";
import { listedStates } from "../reads/job-listing.js";

export { toStoredJob } from "../rows/job-columns.js";
import { quoteIdentifier } from "./identifiers.js";

/** The PostgreSQL type of each column, for the arrays that insert and update bind. */
const COLUMN_TYPES: Record<JobColumn, string> = {
  id: "uuid",
  queue: "text",
  task: "text",
  payload: "text",
  priority: "integer",
  state: "text",
  attempts: "integer",
  max_attempts: "integer",
  retry_base_delay_ms: "bigint",
  schedule_time: "bigint",
  create_time: "bigint",
  update_time: "bigint",
  finish_time: "bigint",
  worker_id: "text",
  lease_expire_time: "bigint",
  lease_duration_ms: "bigint",
  // Bound as hex text (arrays of bytea do not survive the driver's array encoding intact).
  lease_token_hash: "text",
  deliveries: "integer",
  last_error: "text",
  result: "text",
  idempotency_key: "text",
  request_hash: "text",
  heartbeat_event_time: "bigint",
  progress: "text",
  progress_event_time: "bigint",
  group_key: "text",
  traceparent: "text",
  tracestate: "text",
  depends_on: "text",
  dependency_policy: "text",
  deps_total: "integer",
  deps_completed: "integer",
  deps_failed: "integer",
  has_dependents: "integer",
};

const JOB_COLUMNS = JOB_COLUMN_NAMES.join(", ");

/** `decode(x, 'hex')` for the token hash, the column itself otherwise. */
function fromBound(column: string, alias: string): string {
  return column === "lease_token_hash" ? `decode(${alias}.${column}, 'hex')` : `${alias}.${column}`;
}

/** The nil UUID: below every job id, the keyset start of a bulk transition (afterId ""). */
export const NIL_UUID = "00000000-0000-0000-0000-000000000000";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `id` can be a job id here; anything else names no job (and must not reach a uuid cast). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

export interface JobStatements {
  /** $1 ids (uuid[]): the rows, locked, in id order (no deadlock between two transactions locking overlapping sets). */
  lockJobs: string;
  /** $1 queues, $2 keys (text[]): the jobs those (queue, idempotency key) pairs name; rows end with the pair's index. */
  jobsByIdempotencyKeys: string;
  /** One array per column, in JOB_COLUMN_NAMES order. */
  insertJobs: string;
  /** $1 ids, then one array per UPDATED_JOB_COLUMN_NAMES column. */
  updateJobs: string;
  /** $1 queue, $2 now, $3 limit: eligible jobs in claim order, locked, skipping those another transaction holds. */
  claimable: string;
  /** $1 now, $2 limit. */
  expiredLeases: string;
  /** $1 now, $2 queue, $3 limit. */
  expiredLeasesOfQueue: string;
  /** $1 queue, $2 state, $3 after id, $4 up to id, $5 limit. */
  jobsInStateBetween: string;
  /** $1 state, $2 finished before, $3 limit: id, queue, state. */
  prunable: string;
  /** $1 job ids, $2 positions, $3 dependency ids: the edges, and has_dependents on the dependencies. */
  insertDependencies: string;
  /** $1 dependency id, $2 completed, $3 failed: the dependents' counts changed; their id, state, policy and counts after. */
  countDependencyChange: string;
  /** $1 job ids, $2 limit per job: ord (1-based index in $1), then DependencyResult columns, in depends_on order. */
  dependencyResults: string;
  /** $1 ids: deletes their events (numbered and not yet numbered) and the jobs; answers the events and the highest sequence. */
  deleteJobs: string;
  /** $1 job id. */
  jobById: string;
  /** $1 queue, $2 state. */
  lastJobId: string;
  /** $1 queue, $2 now. */
  oldestPendingSince: string;
  /** $1 queue, $2 now. */
  nextScheduledTime: string;
  pausedQueues: string;
  /** $1 queue. */
  queuePaused: string;
  /** $1 queue, $2 now: answers a row when it was not paused before. */
  pauseQueue: string;
  /** $1 queue: answers a row when it was paused. */
  resumeQueue: string;
  /** $1 now. */
  touchWriteProbe: string;
}

export function jobStatements(schema: string): JobStatements {
  const s = quoteIdentifier(schema);
  const select = `SELECT ${JOB_COLUMNS} FROM ${s}.jobs`;
  const unnestArgs = (names: readonly string[], from: number) =>
    names.map((c, i) => `$${i + from}::${COLUMN_TYPES[c as JobColumn]}[]`).join(", ");
  return {
    lockJobs: `${select} WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
    jobsByIdempotencyKeys: `SELECT ${JOB_COLUMN_NAMES.map((c) => `j.${c}`).join(", ")}, k.ord
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(queue, key, ord)
      JOIN ${s}.jobs j ON j.queue = k.queue AND j.idempotency_key = k.key`,
    insertJobs: `INSERT INTO ${s}.jobs (${JOB_COLUMNS})
      SELECT ${JOB_COLUMN_NAMES.map((c) => fromBound(c, "u")).join(", ")}
      FROM unnest(${unnestArgs(JOB_COLUMN_NAMES, 1)}) AS u(${JOB_COLUMNS})`,
    updateJobs: `UPDATE ${s}.jobs j SET ${UPDATED_JOB_COLUMN_NAMES.map((c) => `${c} = ${fromBound(c, "u")}`).join(", ")}
      FROM unnest($1::uuid[], ${unnestArgs(UPDATED_JOB_COLUMN_NAMES, 2)}) AS u(id, ${UPDATED_JOB_COLUMN_NAMES.join(", ")})
      WHERE j.id = u.id`,
    // jobs_claim_order matches the ORDER BY, so the scan stops after $3
    // unlocked rows; rows other claimers hold are skipped, never waited for.
    claimable: `${select} WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time <= $2
      ORDER BY priority DESC, schedule_time, id LIMIT $3 FOR UPDATE SKIP LOCKED`,
    expiredLeases: `${select} WHERE state = 'running' AND lease_expire_time <= $1
      ORDER BY lease_expire_time LIMIT $2 FOR UPDATE SKIP LOCKED`,
    expiredLeasesOfQueue: `${select} WHERE state = 'running' AND lease_expire_time <= $1 AND queue = $2
      ORDER BY lease_expire_time LIMIT $3 FOR UPDATE SKIP LOCKED`,
    jobsInStateBetween: `${select} WHERE queue = $1 AND state = $2 AND id > $3::uuid AND id <= $4::uuid
      ORDER BY id LIMIT $5 FOR UPDATE SKIP LOCKED`,
    // A job some job still needs (docs/api.md "Workflows": one that depends on it and is not COMPLETED or
    // CANCELLED) is kept.
    prunable: `SELECT id, queue, state FROM ${s}.jobs j WHERE state IN ('completed','cancelled','dead') AND state = $1 AND finish_time < $2
      AND NOT (has_dependents = 1 AND EXISTS (SELECT 1 FROM ${s}.job_dependencies d JOIN ${s}.jobs w ON w.id = d.job_id
        WHERE d.depends_on_id = j.id AND w.state NOT IN ('completed','cancelled')))
      ORDER BY finish_time LIMIT $3 FOR UPDATE OF j SKIP LOCKED`,
    insertDependencies: `WITH edges AS (
        INSERT INTO ${s}.job_dependencies (job_id, position, depends_on_id)
        SELECT * FROM unnest($1::uuid[], $2::integer[], $3::uuid[]) RETURNING depends_on_id
      )
      UPDATE ${s}.jobs SET has_dependents = 1 WHERE id IN (SELECT depends_on_id FROM edges) AND has_dependents = 0`,
    // The dependents locked in id order first, so two transactions counting for overlapping ones never deadlock.
    countDependencyChange: `WITH locked AS (
        SELECT j.id FROM ${s}.jobs j JOIN ${s}.job_dependencies d ON d.job_id = j.id
        WHERE d.depends_on_id = $1 ORDER BY j.id FOR UPDATE OF j
      )
      UPDATE ${s}.jobs j SET deps_completed = deps_completed + $2, deps_failed = deps_failed + $3 FROM locked WHERE j.id = locked.id
      RETURNING j.id::text AS id, j.state, j.dependency_policy AS policy, j.deps_total AS total,
        j.deps_completed AS completed, j.deps_failed AS failed`,
    dependencyResults: `SELECT k.ord, d.depends_on_id::text AS "jobId", j.state, j.result AS "resultJson", j.last_error AS "lastError"
      FROM unnest($1::uuid[]) WITH ORDINALITY AS k(id, ord)
      CROSS JOIN LATERAL (SELECT depends_on_id, position FROM ${s}.job_dependencies WHERE job_id = k.id ORDER BY position LIMIT $2) d
      JOIN ${s}.jobs j ON j.id = d.depends_on_id
      ORDER BY k.ord, d.position`,
    deleteJobs: `WITH numbered AS (
        DELETE FROM ${s}.job_events WHERE job_id = ANY($1::uuid[]) RETURNING sequence
      ), unnumbered AS (
        DELETE FROM ${s}.unsequenced_events WHERE job_id = ANY($1::uuid[]) RETURNING 1
      ), jobs AS (
        DELETE FROM ${s}.jobs WHERE id = ANY($1::uuid[]) RETURNING 1
      ), edges AS (
        DELETE FROM ${s}.job_dependencies WHERE job_id = ANY($1::uuid[])
      ), retention AS (
        UPDATE ${s}.event_retention SET pruned_through = greatest(pruned_through, (SELECT max(sequence) FROM numbered))
        WHERE id = 1 AND EXISTS (SELECT 1 FROM numbered) RETURNING 1
      )
      SELECT (SELECT count(*) FROM numbered) + (SELECT count(*) FROM unnumbered) AS events,
        (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM retention) AS advanced`,
    jobById: `${select} WHERE id = $1`,
    lastJobId: `SELECT (SELECT id::text FROM ${s}.jobs WHERE queue = $1 AND state = $2 ORDER BY id DESC LIMIT 1) AS id`,
    oldestPendingSince: `SELECT min(schedule_time) AS t FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time <= $2`,
    nextScheduledTime: `SELECT min(schedule_time) AS t FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time > $2`,
    pausedQueues: `SELECT queue FROM ${s}.paused_queues ORDER BY queue`,
    queuePaused: `SELECT 1 FROM ${s}.paused_queues WHERE queue = $1`,
    pauseQueue: `INSERT INTO ${s}.paused_queues (queue, pause_time) VALUES ($1, $2) ON CONFLICT (queue) DO NOTHING RETURNING 1`,
    resumeQueue: `DELETE FROM ${s}.paused_queues WHERE queue = $1 RETURNING 1`,
    touchWriteProbe: `UPDATE ${s}.write_probe SET probe_time = $1, probes = probes + 1 WHERE id = 1`,
  };
}

/**
 * ListJobs, newest first, for one combination of filters: the statement and
 * its values. No filter reads the primary key backwards; one state reads
 * jobs_queue_state_recent (queue, state, id) or jobs_state_recent (state,
 * id) backwards. Several states, and a queue without states (all six), read
 * one such range per state, each stopping after `limit` rows, and keep the
 * newest `limit` of those (a top-N sort of at most states x limit rows), so
 * no listing reads further than its page however the states are mixed, and
 * a queue's listing needs no index of its own (docs/performance.md "Writes
 * per job").
 */
export function listJobsQuery(
  schema: string,
  spec: {
    queue?: string;
    groupKey?: string;
    states?: readonly JobState[];
    beforeId?: string;
    limit: number;
    dependenciesOf?: string;
    dependentsOf?: string;
  },
): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const bind = (value: unknown) => {
    values.push(value);
    return `$${values.length}`;
  };
  const where: string[] = [];
  if (spec.queue !== undefined) where.push(`queue = ${bind(spec.queue)}`);
  // A group's jobs by state read jobs_group_state (queue, group_key, state, id); its partial-index term is repeated.
  if (spec.groupKey !== undefined) where.push(`group_key = ${bind(spec.groupKey)}`, "group_key <> ''");
  // A job's dependencies or dependents (docs/api.md "Workflows"): its edges, through the primary key or job_dependencies_dependents.
  const edges = `${quoteIdentifier(schema)}.job_dependencies`;
  if (spec.dependenciesOf !== undefined)
    where.push(`id IN (SELECT depends_on_id FROM ${edges} WHERE job_id = ${bind(spec.dependenciesOf)}::uuid)`);
  if (spec.dependentsOf !== undefined)
    where.push(`id IN (SELECT job_id FROM ${edges} WHERE depends_on_id = ${bind(spec.dependentsOf)}::uuid)`);
  if (spec.beforeId !== undefined) {
    // A cursor that is no UUID cannot be below any id in text order either way; compare as text then.
    where.push(isUuid(spec.beforeId) ? `id < ${bind(spec.beforeId)}::uuid` : `id::text < ${bind(spec.beforeId)}`);
  }
  const states = listedStates(spec);
  const limit = bind(spec.limit);
  const jobs = `${quoteIdentifier(schema)}.jobs`;
  if (states.length <= 1) {
    if (states.length === 1) where.push(`state = ${bind(states[0])}`);
    const clause = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    return { text: `SELECT ${JOB_COLUMNS} FROM ${jobs} ${clause} ORDER BY id DESC LIMIT ${limit}`, values };
  }
  where.push(`state = s.state`);
  return {
    text: `SELECT ${JOB_COLUMN_NAMES.map((c) => `j.${c}`).join(", ")}
      FROM unnest(${bind(states)}::text[]) AS s(state)
      CROSS JOIN LATERAL (SELECT ${JOB_COLUMNS} FROM ${jobs} WHERE ${where.join(" AND ")} ORDER BY id DESC LIMIT ${limit}) AS j
      ORDER BY j.id DESC LIMIT ${limit}`,
    values,
  };
}

const hex = (hash: Uint8Array | null) =>
  hash === null ? null : Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength).toString("hex");

/** One array per column for insertJobs. */
export function insertJobsParams(jobs: readonly StoredJob[]): unknown[][] {
  return jobColumnArrays(jobs, JOB_COLUMN_NAMES, hex);
}

/** The ids, then one array per UPDATED_JOB_COLUMN_NAMES column, for updateJobs. */
export function updateJobsParams(jobs: readonly StoredJob[]): unknown[][] {
  return [jobs.map((j) => j.id), ...jobColumnArrays(jobs, UPDATED_JOB_COLUMN_NAMES, hex)];
}
