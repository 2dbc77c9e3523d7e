/**
 * Numbered schema migrations, compiled in. Applied in order at start (and by
 * `leasequeue migrate`), each in its own transaction, tracked with
 * PRAGMA user_version. Never edit a released migration; add the next one.
 * Versions increase but need not be contiguous: a database at version n
 * gets every migration numbered above n, in this array's order. Every index
 * is described in store/database/indexes.ts, which a test holds this schema to.
 */
export interface Migration {
  version: number;
  name: string;
  /**
   * A change ALTER TABLE cannot make (a CHECK constraint): the table is
   * created anew as `create` names it (`<table>_rebuilt`), every column of
   * the old one copied over, the old one dropped and the new one renamed,
   * and the old table's indexes and triggers created again as they were
   * (migrate.ts). Runs before `sql`, in the same transaction.
   */
  rebuild?: { table: string; create: string };
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "jobs, events and counts",
    sql: `
CREATE TABLE jobs (
  id                  TEXT PRIMARY KEY,
  queue               TEXT NOT NULL,
  task                TEXT NOT NULL,
  payload             TEXT NOT NULL,
  priority            INTEGER NOT NULL,
  state               TEXT NOT NULL CHECK (state IN ('queued','running','retry','completed','dead','cancelled')),
  attempts            INTEGER NOT NULL,
  max_attempts        INTEGER NOT NULL,
  retry_base_delay_ms INTEGER NOT NULL,
  schedule_time       INTEGER NOT NULL,
  create_time         INTEGER NOT NULL,
  update_time         INTEGER NOT NULL,
  finish_time         INTEGER,
  worker_id           TEXT,
  lease_expire_time   INTEGER,
  lease_duration_ms   INTEGER,
  lease_token_hash    BLOB,
  deliveries          INTEGER NOT NULL,
  last_error          TEXT,
  result              TEXT,
  idempotency_key     TEXT,
  request_hash        TEXT
) STRICT;

-- Claim: eligible jobs of one queue by priority desc, schedule_time, id.
CREATE INDEX jobs_claim_order ON jobs (queue, priority DESC, schedule_time, id)
  WHERE state IN ('queued','retry');
-- Oldest pending age and the next scheduled wake-up per queue.
CREATE INDEX jobs_pending_since ON jobs (queue, schedule_time)
  WHERE state IN ('queued','retry');
-- Lease recovery: running jobs by expiry.
CREATE INDEX jobs_lease_expiry ON jobs (lease_expire_time)
  WHERE state = 'running';
-- Idempotency keys are scoped to a queue and reserved while the job exists.
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (queue, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- ListJobs (newest first) by queue, by queue and state, by state.
CREATE INDEX jobs_queue_recent ON jobs (queue, id);
CREATE INDEX jobs_queue_state_recent ON jobs (queue, state, id);
CREATE INDEX jobs_state_recent ON jobs (state, id);

CREATE TABLE job_events (
  sequence    INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id      TEXT NOT NULL,
  queue       TEXT NOT NULL,
  kind        TEXT NOT NULL,
  from_state  TEXT,
  to_state    TEXT NOT NULL,
  event_time  INTEGER NOT NULL,
  worker_id   TEXT,
  attempt     INTEGER NOT NULL,
  message     TEXT
) STRICT;
CREATE INDEX job_events_by_job ON job_events (job_id, sequence);

-- Job counts per queue and state, kept in the same transaction as every
-- transition, so stats and metrics cost O(queues) and survive restarts.
CREATE TABLE job_counts (
  queue TEXT NOT NULL,
  state TEXT NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (queue, state)
) STRICT, WITHOUT ROWID;
`,
  },
  {
    version: 2,
    name: "events by queue",
    sql: `
-- WatchEvents replays filtered by queue.
CREATE INDEX job_events_by_queue ON job_events (queue, sequence);
`,
  },
  {
    version: 3,
    name: "write probe",
    sql: `
-- Readiness (docs/api.md "Side port"): when no write happened recently, the
-- store proves that the disk takes writes by updating this one row in a
-- durable commit. It only ever holds one row.
CREATE TABLE write_probe (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  probe_time  INTEGER NOT NULL,
  probes      INTEGER NOT NULL
) STRICT;
INSERT INTO write_probe (id, probe_time, probes) VALUES (1, 0, 0);
`,
  },
  {
    version: 4,
    name: "retention",
    sql: `
-- Retention (docs/operations.md "Retention"): finished jobs by state and
-- finish_time, so a pruning batch seeks straight to the oldest ones due
-- instead of scanning.
CREATE INDEX jobs_finished ON jobs (state, finish_time)
  WHERE state IN ('completed','cancelled','dead');
-- The highest event sequence ever deleted by pruning: replays that would
-- start before it are refused, since the history up to it has holes.
CREATE TABLE event_retention (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  pruned_through  INTEGER NOT NULL
) STRICT;
INSERT INTO event_retention (id, pruned_through) VALUES (1, 0);
-- The heartbeat policy (at most one stored HEARTBEAT event per lease per
-- minute) needs the time of the lease's last stored one.
ALTER TABLE jobs ADD COLUMN heartbeat_event_time INTEGER;
`,
  },
  {
    version: 5,
    name: "paused queues",
    sql: `
-- Queue controls (docs/api.md "Queue controls"): a queue with a row here is
-- paused and hands out no leases until it is resumed (the row is deleted).
-- Kept apart from job_counts so that a queue with no jobs can be paused, and
-- listed.
CREATE TABLE paused_queues (
  queue       TEXT PRIMARY KEY,
  pause_time  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`,
  },
  {
    version: 6,
    name: "job progress",
    sql: `
-- Progress (docs/api.md "Snooze and progress"): the latest value a heartbeat
-- reported (compact JSON text, at most 4 KiB), and when the job last stored a
-- PROGRESS event, for the policy of at most one stored per job per second.
ALTER TABLE jobs ADD COLUMN progress TEXT;
ALTER TABLE jobs ADD COLUMN progress_event_time INTEGER;
`,
  },
  {
    version: 7,
    name: "schedules",
    sql: `
-- Schedules (docs/api.md "Schedules"): each row submits its template at its
-- runs. Exactly one of cron and interval_ms is set; a paused schedule has no
-- next_run_time. template is the validated submit request as JSON text
-- (store/schedule-columns.ts), its queue also kept in a column.
CREATE TABLE schedules (
  name           TEXT PRIMARY KEY,
  cron           TEXT,
  interval_ms    INTEGER,
  timezone       TEXT NOT NULL,
  queue          TEXT NOT NULL,
  template       TEXT NOT NULL,
  paused         INTEGER NOT NULL CHECK (paused IN (0, 1)),
  anchor_time    INTEGER NOT NULL,
  next_run_time  INTEGER,
  last_run_time  INTEGER,
  create_time    INTEGER NOT NULL,
  update_time    INTEGER NOT NULL,
  CHECK ((cron IS NULL) <> (interval_ms IS NULL))
) STRICT, WITHOUT ROWID;
-- The due schedules, earliest first, and the dispatcher's next wake-up.
CREATE INDEX schedules_due ON schedules (next_run_time) WHERE next_run_time IS NOT NULL;
`,
  },
  {
    version: 8,
    name: "queue limits",
    sql: `
-- Queue limits (docs/api.md "Queue limits", QueueConfig): a queue with a row
-- here has the limits it holds (zero: that limit is off). Kept apart from
-- job_counts so that a queue without jobs can be configured, and listed.
-- Claims read it under the write lock, which also serializes them with every
-- other store on the file.
CREATE TABLE queue_configs (
  queue           TEXT PRIMARY KEY,
  max_running     INTEGER NOT NULL CHECK (max_running >= 0),
  rate_limit      INTEGER NOT NULL CHECK (rate_limit >= 0),
  rate_period_ms  INTEGER NOT NULL CHECK (rate_period_ms > 0),
  update_time     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
-- The rate window: leases granted by claims of rate-limited queues, one row
-- per queue and grant time (claims at the same millisecond add up). A claim
-- sums the rows after now - rate_period and deletes those at or before it,
-- so a queue keeps at most rate_limit rows.
CREATE TABLE queue_lease_grants (
  queue       TEXT NOT NULL,
  grant_time  INTEGER NOT NULL,
  leases      INTEGER NOT NULL CHECK (leases > 0),
  PRIMARY KEY (queue, grant_time)
) STRICT, WITHOUT ROWID;
`,
  },
  {
    version: 9,
    name: "no index of a queue's jobs by id",
    sql: `
-- ListJobs of a queue reads one range of jobs_queue_state_recent (queue,
-- state, id) per state, newest first, and merges them (sql.ts listJobsSql),
-- so jobs_queue_recent only cost an index entry per submitted job
-- (docs/performance.md "Writes per job on SQLite").
DROP INDEX jobs_queue_recent;
`,
  },
  {
    version: 10,
    name: "groups",
    sql: `
-- Groups (docs/api.md "Groups"): a job's group is fixed at submit; '' is none.
ALTER TABLE jobs ADD COLUMN group_key TEXT NOT NULL DEFAULT '';
ALTER TABLE job_events ADD COLUMN group_key TEXT NOT NULL DEFAULT '';
-- A group's eligible jobs in claim order (fair claims, ListGroups' count of
-- pending groups), and its jobs by state and id (running counts, ordered
-- heads, ListGroups, ListJobs by group). Only jobs with a group have entries,
-- so a queue without groups pays nothing for them.
CREATE INDEX jobs_group_claim_order ON jobs (queue, group_key, priority DESC, schedule_time, id)
  WHERE state IN ('queued','retry') AND group_key <> '';
CREATE INDEX jobs_group_state ON jobs (queue, group_key, state, id)
  WHERE group_key <> '';
-- The group rules of a queue, beside its limits; served_turns counts the
-- turns its groups were given (fair).
ALTER TABLE queue_configs ADD COLUMN group_max_running INTEGER NOT NULL DEFAULT 0 CHECK (group_max_running >= 0);
ALTER TABLE queue_configs ADD COLUMN group_rate_limit INTEGER NOT NULL DEFAULT 0 CHECK (group_rate_limit >= 0);
ALTER TABLE queue_configs ADD COLUMN fair INTEGER NOT NULL DEFAULT 0 CHECK (fair IN (0, 1));
ALTER TABLE queue_configs ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0 CHECK (ordered IN (0, 1));
ALTER TABLE queue_configs ADD COLUMN served_turns INTEGER NOT NULL DEFAULT 0;
-- group_rate_limit's window, per group, as queue_lease_grants is per queue.
CREATE TABLE queue_group_lease_grants (
  queue       TEXT NOT NULL,
  group_key   TEXT NOT NULL,
  grant_time  INTEGER NOT NULL,
  leases      INTEGER NOT NULL CHECK (leases > 0),
  PRIMARY KEY (queue, group_key, grant_time)
) STRICT, WITHOUT ROWID;
-- A fair queue's groups that may have eligible jobs (TransactionPort
-- selectDueGroups): served_seq orders the turns (0: never served), due_time
-- is when a claim should look at the group again (null: when one of its
-- leases finishes), held_by the rule that parked it there (a claim that
-- finds nothing else tells its claimer it waits for a finishing lease),
-- version moves with every change the triggers make so a claim never parks
-- a group over a change it did not see.
CREATE TABLE queue_groups (
  queue       TEXT NOT NULL,
  group_key   TEXT NOT NULL,
  served_seq  INTEGER NOT NULL,
  due_time    INTEGER,
  held_by     TEXT,
  version     INTEGER NOT NULL,
  PRIMARY KEY (queue, group_key)
) STRICT, WITHOUT ROWID;
CREATE INDEX queue_groups_held ON queue_groups (queue, held_by) WHERE due_time IS NULL AND held_by IS NOT NULL;
CREATE INDEX queue_groups_turns ON queue_groups (queue, served_seq, group_key, due_time, version)
  WHERE due_time IS NOT NULL;
CREATE INDEX queue_groups_due ON queue_groups (queue, due_time) WHERE due_time IS NOT NULL;
-- The triggers keep queue_groups for fair queues: a job that becomes pending
-- (submitted, retried, snoozed, released, redriven, recovered) makes its
-- group due by its schedule_time, and a lease that finishes makes its group
-- due now (a place, or an ordered head, may have been freed), and so does a
-- pending job that is cancelled (it may have been the ordered head its group
-- was parked for, until its schedule_time: the next one is eligible now).
CREATE TRIGGER jobs_fair_submitted AFTER INSERT ON jobs
  WHEN NEW.state IN ('queued','retry') AND EXISTS (SELECT 1 FROM queue_configs WHERE queue = NEW.queue AND fair = 1)
BEGIN
  INSERT INTO queue_groups (queue, group_key, served_seq, due_time, version)
    VALUES (NEW.queue, NEW.group_key, 0, NEW.schedule_time, 0)
    ON CONFLICT (queue, group_key) DO UPDATE
      SET due_time = min(coalesce(due_time, excluded.due_time), excluded.due_time), version = version + 1;
END;
CREATE TRIGGER jobs_fair_pending AFTER UPDATE ON jobs
  WHEN NEW.state IN ('queued','retry') AND (OLD.state NOT IN ('queued','retry') OR NEW.schedule_time <> OLD.schedule_time)
    AND EXISTS (SELECT 1 FROM queue_configs WHERE queue = NEW.queue AND fair = 1)
BEGIN
  INSERT INTO queue_groups (queue, group_key, served_seq, due_time, version)
    VALUES (NEW.queue, NEW.group_key, 0, NEW.schedule_time, 0)
    ON CONFLICT (queue, group_key) DO UPDATE
      SET due_time = min(coalesce(due_time, excluded.due_time), excluded.due_time), version = version + 1;
END;
CREATE TRIGGER jobs_fair_finished AFTER UPDATE ON jobs
  WHEN (OLD.state = 'running' AND NEW.state <> 'running' OR OLD.state IN ('queued','retry') AND NEW.state = 'cancelled')
    AND EXISTS (SELECT 1 FROM queue_configs WHERE queue = NEW.queue AND fair = 1)
BEGIN
  UPDATE queue_groups SET due_time = min(coalesce(due_time, NEW.update_time), NEW.update_time), version = version + 1
    WHERE queue = NEW.queue AND group_key = NEW.group_key;
END;
`,
  },
  {
    version: 11,
    name: "trace context",
    sql: `
-- The W3C Trace Context a job carries (docs/api.md "Trace context"), fixed
-- at submit: its traceparent (NULL: none) and tracestate (NULL: none).
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
ALTER TABLE jobs ADD COLUMN tracestate TEXT;
`,
  },
  {
    version: 12,
    name: "queue activity",
    sql: `
-- Queue activity (docs/api.md "Queue activity", domain/queue-activity.ts):
-- one row per queue and minute (minute: its start, epoch ms), added to by
-- the transactions that change the queue's jobs, in the same transaction as
-- the counts (one upsert per queue and minute per transaction): jobs
-- completed, attempts failed, the net change of the queued, retry and
-- running counts, and the leases granted by the bucket of their wait
-- (wait_0 .. wait_20: the buckets of LEASE_WAIT_BOUNDS_MS, in order). The
-- retention pruner deletes the rows older than a day, through
-- queue_activity_by_minute.
CREATE TABLE queue_activity (
  queue       TEXT NOT NULL,
  minute      INTEGER NOT NULL,
  completed   INTEGER NOT NULL DEFAULT 0,
  failed      INTEGER NOT NULL DEFAULT 0,
  queued      INTEGER NOT NULL DEFAULT 0,
  retry       INTEGER NOT NULL DEFAULT 0,
  running     INTEGER NOT NULL DEFAULT 0,
  wait_0      INTEGER NOT NULL DEFAULT 0,
  wait_1      INTEGER NOT NULL DEFAULT 0,
  wait_2      INTEGER NOT NULL DEFAULT 0,
  wait_3      INTEGER NOT NULL DEFAULT 0,
  wait_4      INTEGER NOT NULL DEFAULT 0,
  wait_5      INTEGER NOT NULL DEFAULT 0,
  wait_6      INTEGER NOT NULL DEFAULT 0,
  wait_7      INTEGER NOT NULL DEFAULT 0,
  wait_8      INTEGER NOT NULL DEFAULT 0,
  wait_9      INTEGER NOT NULL DEFAULT 0,
  wait_10     INTEGER NOT NULL DEFAULT 0,
  wait_11     INTEGER NOT NULL DEFAULT 0,
  wait_12     INTEGER NOT NULL DEFAULT 0,
  wait_13     INTEGER NOT NULL DEFAULT 0,
  wait_14     INTEGER NOT NULL DEFAULT 0,
  wait_15     INTEGER NOT NULL DEFAULT 0,
  wait_16     INTEGER NOT NULL DEFAULT 0,
  wait_17     INTEGER NOT NULL DEFAULT 0,
  wait_18     INTEGER NOT NULL DEFAULT 0,
  wait_19     INTEGER NOT NULL DEFAULT 0,
  wait_20     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, minute)
) STRICT, WITHOUT ROWID;
CREATE INDEX queue_activity_by_minute ON queue_activity (minute);
`,
  },
  {
    version: 13,
    name: "dependencies",
    // The state CHECK gains 'waiting' (a job whose dependencies have not all finished), and the jobs
    // get their dependency columns (store/rows/job-columns.ts).
    rebuild: {
      table: "jobs",
      create: `
CREATE TABLE jobs_rebuilt (
  id                   TEXT PRIMARY KEY,
  queue                TEXT NOT NULL,
  task                 TEXT NOT NULL,
  payload              TEXT NOT NULL,
  priority             INTEGER NOT NULL,
  state                TEXT NOT NULL CHECK (state IN ('queued','running','retry','completed','dead','cancelled','waiting')),
  attempts             INTEGER NOT NULL,
  max_attempts         INTEGER NOT NULL,
  retry_base_delay_ms  INTEGER NOT NULL,
  schedule_time        INTEGER NOT NULL,
  create_time          INTEGER NOT NULL,
  update_time          INTEGER NOT NULL,
  finish_time          INTEGER,
  worker_id            TEXT,
  lease_expire_time    INTEGER,
  lease_duration_ms    INTEGER,
  lease_token_hash     BLOB,
  deliveries           INTEGER NOT NULL,
  last_error           TEXT,
  result               TEXT,
  idempotency_key      TEXT,
  request_hash         TEXT,
  heartbeat_event_time INTEGER,
  progress             TEXT,
  progress_event_time  INTEGER,
  group_key            TEXT NOT NULL DEFAULT '',
  traceparent          TEXT,
  tracestate           TEXT,
  depends_on           TEXT,
  dependency_policy    TEXT CHECK (dependency_policy IN ('wait','cancel','ignore')),
  deps_total           INTEGER NOT NULL DEFAULT 0,
  deps_completed       INTEGER NOT NULL DEFAULT 0,
  deps_failed          INTEGER NOT NULL DEFAULT 0,
  has_dependents       INTEGER NOT NULL DEFAULT 0
) STRICT`,
    },
    sql: `
-- Dependencies (docs/api.md "Workflows"): one row per edge, a job's in its
-- depends_on order; the jobs depending on one are found through
-- job_dependencies_dependents, so a completion counts for each of its
-- dependents at O(1) per edge (the counts live on the dependent's row).
CREATE TABLE job_dependencies (
  job_id         TEXT NOT NULL,
  position       INTEGER NOT NULL,
  depends_on_id  TEXT NOT NULL,
  PRIMARY KEY (job_id, position)
) STRICT, WITHOUT ROWID;
CREATE INDEX job_dependencies_dependents ON job_dependencies (depends_on_id, job_id);
`,
  },
];
