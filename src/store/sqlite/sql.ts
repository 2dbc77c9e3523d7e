/**
 * Every SQL statement of the SQLite store, by purpose. Values are always
 * bound parameters; nothing here concatenates user input.
 */
import type Database from "better-sqlite3";
import type { JobState } from "../../domain/job.js";
import type { QueueConfig } from "../../domain/queue-limits.js";
import { ACTIVITY_VALUE_COLUMNS } from "../rows/activity-columns.js";
import { JOB_COLUMN_NAMES, UPDATED_JOB_COLUMN_NAMES } from "../rows/job-columns.js";

const JOB_COLUMNS = JOB_COLUMN_NAMES.join(", ");
const ACTIVITY_VALUES = ACTIVITY_VALUE_COLUMNS.join(", ");

/** Statements whose rows are jobs, read as arrays in JOB_COLUMN_NAMES order. */
export const JOB_ROW_STATEMENTS = [
  "jobById",
  "groupClaimableJobs",
  "ungroupedClaimableJobs",
  "orderedHead",
  "jobByIdempotencyKey",
  "claimableJobs",
  "expiredLeases",
  "expiredLeasesOfQueue",
  "jobsInStateBetween",
  "activitySince",
] as const;

/**
 * A job that some job still needs (docs/api.md "Workflows"): one that
 * depends on it and is not COMPLETED or CANCELLED (a DEAD one may be
 * redriven and read its dependencies' results again). Retention keeps it.
 */
const AWAITED = `EXISTS (SELECT 1 FROM job_dependencies d JOIN jobs w ON w.id = d.job_id
  WHERE d.depends_on_id = jobs.id AND w.state NOT IN ('completed','cancelled'))`;

export const SQL = {
  insertJob: `INSERT INTO jobs (${JOB_COLUMNS}) VALUES (${JOB_COLUMN_NAMES.map(() => "?").join(", ")})`,

  /** Writes the mutable columns of a job after a transition. */
  updateJob: `UPDATE jobs SET ${UPDATED_JOB_COLUMN_NAMES.map((c) => `${c} = ?`).join(", ")} WHERE id = ?`,

  jobById: `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ?`,

  /** Dependencies (docs/api.md "Workflows"): an edge of a new job, and the mark on the job it depends on. */
  insertDependency: `INSERT INTO job_dependencies (job_id, position, depends_on_id) VALUES (?, ?, ?)`,
  markHasDependents: `UPDATE jobs SET has_dependents = 1 WHERE id = ? AND has_dependents = 0`,
  /** A dependency's change counted for every job that depends on it, through job_dependencies_dependents. */
  countDependencyChange: `UPDATE jobs SET deps_completed = deps_completed + @completed, deps_failed = deps_failed + @failed
    WHERE id IN (SELECT job_id FROM job_dependencies WHERE depends_on_id = @id)
    RETURNING id, state, dependency_policy AS policy, deps_total AS total, deps_completed AS completed, deps_failed AS failed`,
  /** Lease.dependencies: a job's first dependencies in depends_on order, with their outcomes. */
  dependencyResults: `SELECT d.depends_on_id AS jobId, j.state, j.result AS resultJson, j.last_error AS lastError
    FROM job_dependencies d JOIN jobs j ON j.id = d.depends_on_id
    WHERE d.job_id = ? ORDER BY d.position LIMIT ?`,

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

  /**
   * Store.queueBacklog in one statement (one snapshot): the maintained
   * counts, and the pending jobs still waiting for their schedule_time,
   * counted through jobs_pending_since from now on (so a long backlog of
   * eligible jobs costs nothing here).
   */
  queueBacklog: `SELECT
      (SELECT coalesce(sum(count), 0) FROM job_counts WHERE queue = @queue AND state IN ('queued','retry')) AS pending,
      (SELECT coalesce(sum(count), 0) FROM job_counts WHERE queue = @queue AND state = 'running') AS running,
      w.waiting, w.nextEligibleTime,
      EXISTS (SELECT 1 FROM paused_queues WHERE queue = @queue) AS paused
    FROM (SELECT count(*) AS waiting, min(schedule_time) AS nextEligibleTime FROM jobs INDEXED BY jobs_pending_since
      WHERE queue = @queue AND state IN ('queued','retry') AND schedule_time > @now) AS w`,

  eventsOfJob: `SELECT * FROM job_events WHERE job_id = ? ORDER BY sequence`,

  /** Stored events after a sequence: all of them (the primary key), by queue, or by job (their indexes). */
  eventsAfter: `SELECT * FROM job_events WHERE sequence > @after ORDER BY sequence LIMIT @limit`,
  eventsOfQueueAfter: `SELECT * FROM job_events INDEXED BY job_events_by_queue
    WHERE queue = @queue AND sequence > @after ORDER BY sequence LIMIT @limit`,
  eventsOfJobAfter: `SELECT * FROM job_events INDEXED BY job_events_by_job
    WHERE job_id = @jobId AND sequence > @after AND (@queue IS NULL OR queue = @queue) ORDER BY sequence LIMIT @limit`,

  // Each bound its own subquery: SQLite answers a lone min() or max() from the
  // primary key's first or last row, but min() and max() together from a scan of every event.
  eventBounds: `SELECT coalesce((SELECT min(sequence) FROM job_events), 0) AS oldest,
    coalesce((SELECT max(sequence) FROM job_events), 0) AS latest`,

  /** The highest sequence pruning ever deleted (0: none). */
  prunedThrough: `SELECT pruned_through AS seq FROM event_retention WHERE id = 1`,
  advancePrunedThrough: `UPDATE event_retention SET pruned_through = max(pruned_through, ?) WHERE id = 1`,

  /**
   * Finished jobs of one state due for pruning, oldest first, through
   * jobs_finished (the literal IN lets the planner use the partial index).
   */
  prunableJobs: `SELECT id, queue, state FROM jobs INDEXED BY jobs_finished
    WHERE state IN ('completed','cancelled','dead') AND state = ? AND finish_time < ? AND NOT (has_dependents = 1 AND ${AWAITED})
    ORDER BY finish_time LIMIT ?`,
  /** A pruned job's own dependency edges (the edges to it stay: its dependents keep naming it). */
  deleteDependenciesOfJob: `DELETE FROM job_dependencies WHERE job_id = ?`,
  /** A pruned job's events, through job_events_by_job; answers the deleted sequences. */
  deleteEventsOfJob: `DELETE FROM job_events WHERE job_id = ? RETURNING sequence`,
  deleteJob: `DELETE FROM jobs WHERE id = ?`,

  /** Highest sequence ever handed out, even if those events were deleted since. */
  lastSequence: `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'job_events'), 0) AS seq`,

  adjustCount: `INSERT INTO job_counts (queue, state, count) VALUES (?, ?, ?)
    ON CONFLICT (queue, state) DO UPDATE SET count = count + excluded.count`,

  counts: `SELECT queue, state, count FROM job_counts WHERE count <> 0 ORDER BY queue`,

  /**
   * Queue activity (docs/api.md "Queue activity"): a transaction adds its
   * sums to the row of each queue and minute it touched, in the same
   * transaction as the counts.
   */
  addActivity: `INSERT INTO queue_activity (queue, minute, ${ACTIVITY_VALUES})
    VALUES (?, ?, ${ACTIVITY_VALUE_COLUMNS.map(() => "?").join(", ")})
    ON CONFLICT (queue, minute) DO UPDATE SET ${ACTIVITY_VALUE_COLUMNS.map((c) => `${c} = ${c} + excluded.${c}`).join(", ")}`,
  /** A queue's samples from a minute on, oldest first (the primary key's range), as arrays: minute, then ACTIVITY_VALUE_COLUMNS. */
  activitySince: `SELECT minute, ${ACTIVITY_VALUES} FROM queue_activity WHERE queue = ? AND minute >= ? ORDER BY minute`,
  /** The counts a timeline's gauges are counted back from. */
  gaugeCounts: `SELECT state, count FROM job_counts WHERE queue = ? AND state IN ('queued', 'retry', 'running')`,
  /** Retention: the oldest samples first (then by queue), through queue_activity_by_minute, whose entries end with the primary key. */
  deleteActivityBefore: `DELETE FROM queue_activity WHERE (queue, minute) IN (
      SELECT queue, minute FROM queue_activity INDEXED BY queue_activity_by_minute WHERE minute < ? ORDER BY minute, queue LIMIT ?)`,

  /** Queue controls: a paused queue has a row in paused_queues. */
  pauseQueue: `INSERT INTO paused_queues (queue, pause_time) VALUES (?, ?) ON CONFLICT (queue) DO NOTHING`,
  resumeQueue: `DELETE FROM paused_queues WHERE queue = ?`,
  queuePaused: `SELECT 1 AS paused FROM paused_queues WHERE queue = ?`,
  pausedQueues: `SELECT queue FROM paused_queues ORDER BY queue`,

  /** Queue limits (docs/api.md "Queue limits"): a configured queue has a row in queue_configs. */
  queueConfig: `SELECT max_running AS maxRunning, rate_limit AS rateLimit, rate_period_ms AS ratePeriodMs, group_max_running AS groupMaxRunning, group_rate_limit AS groupRateLimit, fair, ordered FROM queue_configs WHERE queue = ?`,
  setQueueConfig: `INSERT INTO queue_configs (queue, max_running, rate_limit, rate_period_ms, group_max_running, group_rate_limit,
      fair, ordered, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running, rate_limit = excluded.rate_limit,
      rate_period_ms = excluded.rate_period_ms, group_max_running = excluded.group_max_running,
      group_rate_limit = excluded.group_rate_limit, fair = excluded.fair, ordered = excluded.ordered, update_time = excluded.update_time`,
  deleteQueueConfig: `DELETE FROM queue_configs WHERE queue = ?`,
  queueConfigs: `SELECT queue, max_running AS maxRunning, rate_limit AS rateLimit, rate_period_ms AS ratePeriodMs, group_max_running AS groupMaxRunning, group_rate_limit AS groupRateLimit, fair, ordered
    FROM queue_configs ORDER BY queue`,
  /** RUNNING jobs of a queue, up to a bound, through jobs_queue_state_recent (a covering index range). */
  countRunning: `SELECT count(*) AS n FROM (SELECT 1 FROM jobs INDEXED BY jobs_queue_state_recent
    WHERE queue = ? AND state = 'running' LIMIT ?)`,
  leaseGrantsSince: `SELECT coalesce(sum(leases), 0) AS leases, min(grant_time) AS oldest FROM queue_lease_grants
    WHERE queue = ? AND grant_time > ?`,
  recordLeaseGrant: `INSERT INTO queue_lease_grants (queue, grant_time, leases) VALUES (?, ?, ?)
    ON CONFLICT (queue, grant_time) DO UPDATE SET leases = leases + excluded.leases`,
  forgetLeaseGrantsThrough: `DELETE FROM queue_lease_grants WHERE queue = ? AND grant_time <= ?`,
  forgetLeaseGrants: `DELETE FROM queue_lease_grants WHERE queue = ?`,

  /**
   * Groups (docs/api.md "Groups"). A group's jobs are read through
   * jobs_group_claim_order and jobs_group_state, whose partial-index terms
   * (group_key <> '', the literal state IN) each statement repeats so that
   * the planner may use them; jobs without a group (under fair, a group of
   * their own) walk jobs_claim_order.
   */
  groupClaimableJobs: `SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_group_claim_order
    WHERE queue = ? AND group_key = ? AND group_key <> '' AND state IN ('queued','retry') AND schedule_time <= ?
    ORDER BY priority DESC, schedule_time, id LIMIT ?`,
  ungroupedClaimableJobs: `SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_claim_order
    WHERE queue = ? AND state IN ('queued','retry') AND schedule_time <= ? AND group_key = ''
    ORDER BY priority DESC, schedule_time, id LIMIT ?`,
  /** The open job submitted first: the least id of each open state (three index seeks), then its row. */
  orderedHead: `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = (SELECT min(id) FROM (
      SELECT (SELECT min(id) FROM jobs INDEXED BY jobs_group_state WHERE queue = @queue AND group_key = @group AND group_key <> '' AND state = 'queued') AS id
      UNION ALL SELECT (SELECT min(id) FROM jobs INDEXED BY jobs_group_state WHERE queue = @queue AND group_key = @group AND group_key <> '' AND state = 'retry')
      UNION ALL SELECT (SELECT min(id) FROM jobs INDEXED BY jobs_group_state WHERE queue = @queue AND group_key = @group AND group_key <> '' AND state = 'running')))`,
  countGroupRunning: `SELECT count(*) AS n FROM (SELECT 1 FROM jobs INDEXED BY jobs_group_state
    WHERE queue = ? AND group_key = ? AND group_key <> '' AND state = 'running' LIMIT ?)`,
  groupLeaseGrantsSince: `SELECT coalesce(sum(leases), 0) AS leases, min(grant_time) AS oldest FROM queue_group_lease_grants
    WHERE queue = ? AND group_key = ? AND grant_time > ?`,
  recordGroupLeaseGrant: `INSERT INTO queue_group_lease_grants (queue, group_key, grant_time, leases) VALUES (?, ?, ?, ?)
    ON CONFLICT (queue, group_key, grant_time) DO UPDATE SET leases = leases + excluded.leases`,
  forgetGroupLeaseGrantsThrough: `DELETE FROM queue_group_lease_grants WHERE queue = ? AND group_key = ? AND grant_time <= ?`,
  forgetGroupLeaseGrants: `DELETE FROM queue_group_lease_grants WHERE queue = ?`,
  dueGroups: `SELECT group_key AS groupKey, served_seq AS servedSeq, version FROM queue_groups INDEXED BY queue_groups_turns
    WHERE queue = ? AND due_time IS NOT NULL AND due_time <= ? AND (served_seq, group_key) > (?, ?)
    ORDER BY served_seq, group_key LIMIT ?`,
  parkGroup: `UPDATE queue_groups SET due_time = ?, held_by = ? WHERE queue = ? AND group_key = ? AND version = ?`,
  heldGroup: `SELECT held_by AS limit_ FROM queue_groups INDEXED BY queue_groups_held
    WHERE queue = ? AND due_time IS NULL AND held_by IS NOT NULL LIMIT 1`,
  /** A group's earliest pending schedule_time: its own index for a group, the queue's for jobs without one. */
  settleGroup: `UPDATE queue_groups SET held_by = NULL, due_time = CASE WHEN @group = '' THEN
        (SELECT min(schedule_time) FROM jobs INDEXED BY jobs_pending_since WHERE queue = @queue AND state IN ('queued','retry') AND group_key = '')
      ELSE (SELECT min(schedule_time) FROM jobs INDEXED BY jobs_group_claim_order
        WHERE queue = @queue AND group_key = @group AND group_key <> '' AND state IN ('queued','retry')) END
    WHERE queue = @queue AND group_key = @group AND version = @version`,
  dropSettledGroup: `DELETE FROM queue_groups WHERE queue = @queue AND group_key = @group AND version = @version AND due_time IS NULL
    AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = @queue AND group_key = @group AND state = 'running')`,
  takeTurns: `UPDATE queue_configs SET served_turns = served_turns + ? WHERE queue = ? RETURNING served_turns AS turns`,
  markGroupServed: `UPDATE queue_groups SET served_seq = ? WHERE queue = ? AND group_key = ?`,
  nextGroupDueTime: `SELECT min(due_time) AS t FROM queue_groups INDEXED BY queue_groups_due WHERE queue = ? AND due_time IS NOT NULL AND due_time > ?`,
  rebuildGroups: `INSERT INTO queue_groups (queue, group_key, served_seq, due_time, version)
    SELECT queue, group_key, 0, min(schedule_time), 0 FROM jobs INDEXED BY jobs_pending_since
    WHERE queue = ? AND state IN ('queued','retry') GROUP BY group_key
    ON CONFLICT (queue, group_key) DO UPDATE
      SET due_time = min(coalesce(due_time, excluded.due_time), excluded.due_time), version = version + 1`,
  dropGroups: `DELETE FROM queue_groups WHERE queue = ?`,
  /** ListGroups: a page of groups with their open jobs counted, through jobs_group_state in group order. */
  listGroups: `SELECT group_key AS groupKey, sum(state = 'queued') AS queued, sum(state = 'running') AS running,
      sum(state = 'retry') AS retry, min(CASE WHEN state <> 'running' THEN schedule_time END) AS oldestPendingTime
    FROM jobs INDEXED BY jobs_group_state
    WHERE queue = ? AND group_key > ? AND group_key <> '' AND state IN ('queued','running','retry')
    GROUP BY group_key ORDER BY group_key LIMIT ?`,
  /** Groups with pending jobs, one index seek per group (a loose index scan). */
  countPendingGroups: `WITH RECURSIVE g(k) AS (
      SELECT (SELECT min(group_key) FROM jobs INDEXED BY jobs_group_claim_order
        WHERE queue = @queue AND group_key > '' AND group_key <> '' AND state IN ('queued','retry'))
      UNION ALL
      SELECT (SELECT min(group_key) FROM jobs INDEXED BY jobs_group_claim_order
        WHERE queue = @queue AND group_key > g.k AND group_key <> '' AND state IN ('queued','retry'))
      FROM g WHERE g.k IS NOT NULL)
    SELECT count(k) AS n FROM g`,

  /** Bulk transitions (RedriveAll, PurgeQueue): the upper keyset bound, then batches in id order. */
  lastJobId: `SELECT max(id) AS id FROM jobs INDEXED BY jobs_queue_state_recent WHERE queue = ? AND state = ?`,
  jobsInStateBetween: `SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_queue_state_recent
    WHERE queue = ? AND state = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?`,

  /** Schedules (docs/api.md "Schedules"), one row each; paused is 0 or 1. */
  scheduleByName: `SELECT * FROM schedules WHERE name = ?`,
  upsertSchedule: `INSERT INTO schedules (name, cron, interval_ms, timezone, queue, template, paused, anchor_time, next_run_time,
      last_run_time, create_time, update_time)
    VALUES (@name, @cron, @interval_ms, @timezone, @queue, @template, @paused, @anchor_time, @next_run_time,
      @last_run_time, @create_time, @update_time)
    ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, interval_ms = excluded.interval_ms, timezone = excluded.timezone,
      queue = excluded.queue, template = excluded.template, paused = excluded.paused, anchor_time = excluded.anchor_time,
      next_run_time = excluded.next_run_time, last_run_time = excluded.last_run_time, create_time = excluded.create_time,
      update_time = excluded.update_time`,
  deleteSchedule: `DELETE FROM schedules WHERE name = ?`,
  /** Through schedules_due (the literal IS NOT NULL lets the planner use the partial index). */
  dueSchedules: `SELECT * FROM schedules INDEXED BY schedules_due
    WHERE next_run_time IS NOT NULL AND next_run_time <= ? AND paused = 0 ORDER BY next_run_time, name LIMIT ?`,
  recordScheduleRun: `UPDATE schedules SET next_run_time = ?, last_run_time = ?, update_time = ? WHERE name = ?`,
  allSchedules: `SELECT * FROM schedules ORDER BY name`,
  /** Changes when a schedule is created, replaced (update_time) or deleted (count); a run's update never lowers it. */
  schedulesSignature: `SELECT count(*) AS n, coalesce(max(update_time), 0) AS t FROM schedules`,
  nextScheduleRunTime: `SELECT min(next_run_time) AS t FROM schedules WHERE next_run_time IS NOT NULL AND paused = 0`,

  /** The readiness probe's write: one row, one page, its own durable commit. */
  touchWriteProbe: `UPDATE write_probe SET probe_time = ?, probes = probes + 1 WHERE id = 1`,

  /**
   * Changes whenever another connection (another store on the same file, a
   * `leasequeue prune`) committed since this connection last asked.
   */
  dataVersion: `PRAGMA data_version`,
} as const;

/** The store's prepared statements, one per entry of SQL. */
export type SqliteStatements = Record<keyof typeof SQL, Database.Statement>;

export function prepareStatements(db: Database.Database): SqliteStatements {
  const stmts = {} as SqliteStatements;
  for (const [name, sql] of Object.entries(SQL)) stmts[name as keyof typeof SQL] = db.prepare(sql);
  for (const name of JOB_ROW_STATEMENTS) stmts[name].raw(true);
  stmts.dataVersion.pluck(true);
  return stmts;
}

/**
 * Row counts of the multi-row event INSERTs, largest first; a commit's
 * events are written with the largest that fits, then the next (at most 256
 * rows, 2,816 parameters, far below SQLite's limit of 32766).
 */
export const EVENT_INSERT_SIZES = [256, 64, 16, 4, 1] as const;

/**
 * Inserts `rows` events with the sequences the store assigned (it holds the
 * write lock, so it knows the next one; AUTOINCREMENT keeps sqlite_sequence
 * at the largest).
 */
export function insertEventsSql(rows: number): string {
  const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  return `INSERT INTO job_events (sequence, job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
    VALUES ${Array.from({ length: rows }, () => row).join(", ")}`;
}

/**
 * ListJobs, newest first, for each combination of filters. No filter reads
 * the primary key backwards; one state reads jobs_queue_state_recent (queue,
 * state, id) or jobs_state_recent (state, id) backwards. Several states, and
 * a queue without states (the store binds all six), read one such range per
 * state, each stopping after the page, and keep the newest page of those (a
 * sort of at most states x limit rows), so no listing reads further than its
 * page however the states are mixed and a queue's listing needs no index of
 * its own (docs/performance.md "Writes per job on SQLite"). `states` counts the
 * distinct states bound as @state0, @state1, ...
 */
export function listJobsSql(filter: {
  queue: boolean;
  group?: boolean;
  states: number;
  before: boolean;
  dependenciesOf?: boolean;
  dependentsOf?: boolean;
}): string {
  const where: string[] = [];
  if (filter.queue) where.push("queue = @queue");
  // A job's dependencies or dependents (docs/api.md "Workflows"): its edges, through the primary key or job_dependencies_dependents.
  if (filter.dependenciesOf) where.push("id IN (SELECT depends_on_id FROM job_dependencies WHERE job_id = @dependenciesOf)");
  if (filter.dependentsOf) where.push("id IN (SELECT job_id FROM job_dependencies WHERE depends_on_id = @dependentsOf)");
  // A group's jobs by state read jobs_group_state (queue, group_key, state, id); its partial-index term is repeated.
  if (filter.group) where.push("group_key = @group", "group_key <> ''");
  if (filter.before) where.push("id < @before");
  const range = (state: string | undefined) => {
    const conditions = state === undefined ? where : [...where, `state = ${state}`];
    const clause = conditions.length > 0 ? `WHERE ${conditions.join(" AND ")}` : "";
    return `SELECT ${JOB_COLUMNS} FROM jobs ${clause} ORDER BY id DESC LIMIT @limit`;
  };
  if (filter.states <= 1) return range(filter.states === 1 ? "@state0" : undefined);
  const ranges = Array.from({ length: filter.states }, (_, i) => `SELECT * FROM (${range(`@state${i}`)})`);
  return `SELECT ${JOB_COLUMNS} FROM (${ranges.join(" UNION ALL ")}) ORDER BY id DESC LIMIT @limit`;
}

/** A queue_configs row as the statements above read it (fair and ordered as 0 or 1). */
export type QueueConfigRow = Omit<QueueConfig, "fair" | "ordered"> & { fair: number; ordered: number };

export function configFromRow<T extends QueueConfigRow>(row: T): Omit<T, "fair" | "ordered"> & QueueConfig {
  return { ...row, fair: row.fair === 1, ordered: row.ordered === 1 };
}

export type StateParams = Record<`state${number}`, JobState>;

/**
 * Statements of the maintenance commands (check, backup, restore,
 * import-litequeue). They run on their own connections, never the store's.
 */
export const MAINTENANCE_SQL = {
  jobTables: `SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN ('jobs', 'job_events', 'job_counts')`,
  recordedCounts: `SELECT queue, state, count FROM job_counts WHERE count <> 0`,
  /** Served by jobs_queue_state_recent alone (a covering index scan). */
  actualCounts: `SELECT queue, state, count(*) AS count FROM jobs GROUP BY queue, state`,
  jobsByState: `SELECT state, count(*) AS count FROM jobs GROUP BY state`,
  eventCount: `SELECT count(*) AS n FROM job_events`,
  queueOfJob: `SELECT queue FROM jobs WHERE id = ?`,
  /** An imported job's event; AUTOINCREMENT gives it the next sequence, as the store would. */
  insertEvent: `INSERT INTO job_events (job_id, queue, kind, from_state, to_state, event_time, worker_id, attempt, message, group_key)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
} as const;

/** litequeue's table (see store/import/litequeue-mapping.ts): its columns, and its rows in insertion order. */
export const LITEQUEUE_SQL = {
  /** What "Queue" is (table, view, virtual, shadow) and whether it is WITHOUT ROWID; names are case-insensitive in SQL. */
  queueKind: `SELECT type, wr FROM pragma_table_list WHERE schema = 'main' AND name = 'Queue' COLLATE NOCASE`,
  columns: `SELECT name FROM pragma_table_info('Queue')`,
  /** Text comes as its bytes, so that text which is not UTF-8 is seen, not replaced. */
  rows: `SELECT rowid, CASE typeof(data) WHEN 'text' THEN CAST(data AS BLOB) ELSE data END AS data,
      message_id, status, in_time, lock_time, done_time
    FROM "Queue" ORDER BY rowid`,
  rowCount: `SELECT count(*) AS n FROM "Queue"`,
  /** Ids that appear more than once (ignoring letter case); litequeue's unique index normally rules this out. */
  duplicateIds: `SELECT lower(message_id) AS id FROM "Queue" WHERE message_id IS NOT NULL
    GROUP BY lower(message_id) HAVING count(*) > 1 LIMIT 10`,
} as const;
