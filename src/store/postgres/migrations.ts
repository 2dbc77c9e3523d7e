/**
 * Numbered schema migrations of the PostgreSQL store, compiled in. Each runs
 * in its own transaction with `search_path` set to LeaseQueue's schema (so
 * the text names no schema and one database can hold several), and is
 * recorded in `schema_migrations`; migrate.ts applies them under an
 * advisory lock. Never edit a released migration; add the next one. Every
 * index is described in store/database/indexes.ts, which a test holds this
 * schema to.
 */
export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

/**
 * The tables hold what SQLite's schema version 6 holds (sqlite/migrations.ts),
 * with three differences that only concurrency across servers needs:
 * - Events are written without a sequence to `unsequenced_events` and
 *   numbered after their commit (event-sequencer.ts), so that every reader
 *   sees sequences increase in the order they become visible.
 * - Counts are deltas appended by each transaction and folded into
 *   `job_counts` now and then (job-counts.ts), so no row is updated by every
 *   transition of a queue.
 * - Times stay epoch milliseconds (bigint), as in SQLite: every time comes
 *   from the server's injected clock, and rows map to the same domain types.
 * Versions increase but need not be contiguous (migrate.ts applies every
 * migration above the schema's version, in this array's order).
 * The functions (submit, the sequencer, count and activity compaction) are not migrations:
 * definitions.ts creates or replaces them after the migrations.
 */
export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: "jobs, events, counts, retention, paused queues, write probe",
    sql: `
CREATE TABLE jobs (
  id                    uuid PRIMARY KEY,
  queue                 text NOT NULL,
  task                  text NOT NULL,
  -- Compact JSON text, as submitted (the same text SQLite keeps).
  payload               text NOT NULL,
  priority              integer NOT NULL,
  state                 text NOT NULL CHECK (state IN ('queued','running','retry','completed','dead','cancelled')),
  attempts              integer NOT NULL,
  max_attempts          integer NOT NULL,
  retry_base_delay_ms   bigint NOT NULL,
  schedule_time         bigint NOT NULL,
  create_time           bigint NOT NULL,
  update_time           bigint NOT NULL,
  finish_time           bigint,
  worker_id             text,
  lease_expire_time     bigint,
  lease_duration_ms     bigint,
  lease_token_hash      bytea,
  deliveries            integer NOT NULL,
  last_error            text,
  result                text,
  idempotency_key       text,
  request_hash          text,
  heartbeat_event_time  bigint
);

-- Claim: eligible jobs of one queue by priority desc, schedule_time, id, read
-- in index order with FOR UPDATE SKIP LOCKED (no sort, no rows of other
-- states): SELECT ... WHERE queue = $1 AND state IN ('queued','retry')
-- AND schedule_time <= $2 ORDER BY priority DESC, schedule_time, id.
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
-- ListJobs (newest first) by queue, by queue and state, by state; bulk transitions.
CREATE INDEX jobs_queue_recent ON jobs (queue, id);
CREATE INDEX jobs_queue_state_recent ON jobs (queue, state, id);
CREATE INDEX jobs_state_recent ON jobs (state, id);
-- Retention: finished jobs by state and finish_time.
CREATE INDEX jobs_finished ON jobs (state, finish_time)
  WHERE state IN ('completed','cancelled','dead');

-- Events as readers see them: numbered, in the order they became visible.
CREATE TABLE job_events (
  sequence    bigint PRIMARY KEY,
  job_id      uuid NOT NULL,
  queue       text NOT NULL,
  kind        text NOT NULL,
  from_state  text,
  to_state    text NOT NULL,
  event_time  bigint NOT NULL,
  worker_id   text,
  attempt     integer NOT NULL,
  message     text
);
CREATE INDEX job_events_by_job ON job_events (job_id, sequence);
CREATE INDEX job_events_by_queue ON job_events (queue, sequence);

-- Events committed but not numbered yet. Writers only ever INSERT here;
-- the sequencer moves them to job_events in id order (id follows insertion,
-- so one job's events keep their order: a job's row lock orders its writers).
CREATE TABLE unsequenced_events (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id      uuid NOT NULL,
  queue       text NOT NULL,
  kind        text NOT NULL,
  from_state  text,
  to_state    text NOT NULL,
  event_time  bigint NOT NULL,
  worker_id   text,
  attempt     integer NOT NULL,
  message     text
);

-- The last sequence handed out; only the sequencer updates it, holding its
-- row lock until its commit, which is what orders the numbering.
CREATE TABLE event_sequence (
  id             integer PRIMARY KEY CHECK (id = 1),
  last_sequence  bigint NOT NULL
);
INSERT INTO event_sequence (id, last_sequence) VALUES (1, 0);

-- Job counts per queue and state: compacted totals, plus the deltas each
-- transaction appended since the last compaction. Readers sum both.
CREATE TABLE job_counts (
  queue  text NOT NULL,
  state  text NOT NULL,
  count  bigint NOT NULL,
  PRIMARY KEY (queue, state)
);
CREATE TABLE job_count_deltas (
  queue  text NOT NULL,
  state  text NOT NULL,
  delta  bigint NOT NULL
);

-- The highest event sequence ever deleted by pruning (replays that would
-- start before it are refused, since the history up to it has holes).
CREATE TABLE event_retention (
  id              integer PRIMARY KEY CHECK (id = 1),
  pruned_through  bigint NOT NULL
);
INSERT INTO event_retention (id, pruned_through) VALUES (1, 0);

-- Queue controls (docs/api.md "Queue controls"): a queue with a row here is
-- paused.
CREATE TABLE paused_queues (
  queue       text PRIMARY KEY,
  pause_time  bigint NOT NULL
);

-- Readiness (docs/api.md "Side port"): when no write happened recently, a
-- server proves the database takes writes by updating this row.
CREATE TABLE write_probe (
  id          integer PRIMARY KEY CHECK (id = 1),
  probe_time  bigint NOT NULL,
  probes      bigint NOT NULL
);
INSERT INTO write_probe (id, probe_time, probes) VALUES (1, 0, 0);
`,
  },
  {
    version: 2,
    name: "job progress",
    sql: `
-- Progress (docs/api.md "Snooze and progress"), as SQLite's migration 6: the
-- latest value a heartbeat reported (compact JSON text, at most 4 KiB), and
-- when the job last stored a PROGRESS event (at most one stored per job per
-- second).
ALTER TABLE jobs ADD COLUMN progress text;
ALTER TABLE jobs ADD COLUMN progress_event_time bigint;
`,
  },
  {
    version: 3,
    name: "schedules",
    sql: `
-- Schedules (docs/api.md "Schedules"), as SQLite's migration 7: exactly one of
-- cron and interval_ms is set; a paused schedule has no next_run_time;
-- template is the validated submit request as JSON text
-- (store/schedule-columns.ts), its queue also kept in a column. The
-- transaction that fires runs selects the due rows FOR UPDATE SKIP LOCKED.
CREATE TABLE schedules (
  name           text PRIMARY KEY,
  cron           text,
  interval_ms    bigint,
  timezone       text NOT NULL,
  queue          text NOT NULL,
  template       text NOT NULL,
  paused         boolean NOT NULL,
  anchor_time    bigint NOT NULL,
  next_run_time  bigint,
  last_run_time  bigint,
  create_time    bigint NOT NULL,
  update_time    bigint NOT NULL,
  CHECK ((cron IS NULL) <> (interval_ms IS NULL))
);
-- The due schedules, earliest first, and the servers' next wake-up.
CREATE INDEX schedules_due ON schedules (next_run_time) WHERE next_run_time IS NOT NULL;
`,
  },
  {
    version: 4,
    name: "queue limits",
    sql: `
-- Queue limits (docs/api.md "Queue limits", QueueConfig), as SQLite's
-- migration 8: a queue with a row here has the limits it holds (zero: that
-- limit is off).
--
-- Cross-server correctness (the store's claim operation, claim.ts, reads
-- the config, then the running count and the rate window, then leases and
-- records its grant): every claim of a queue that has a row must take the
-- row's lock before it counts anything, and hold it to its commit:
--   SELECT max_running, rate_limit, rate_period_ms FROM queue_configs
--     WHERE queue = $1 FOR UPDATE
-- (TransactionPort.queueConfig). Claims of one limited queue then take
-- turns across all servers, and under READ COMMITTED each statement after
-- the lock sees what the previous holder committed, so two claims never
-- both see room for the same place. Claims of queues without a row lock
-- nothing and never wait on each other (the usual SKIP LOCKED claim).
-- Nothing else needs the lock: completing, failing, releasing and expiring
-- only lower the running count, and UpdateQueue writes the row (its own
-- row lock orders it with the claims).
-- Wake-ups across servers: a finishing lease reaches the other servers'
-- claimers as its event does (notifications.ts "events"); an UpdateQueue
-- must be notified like a pause (a queue_control notification carrying the
-- config), so that claimers held back on other servers wake at once.
CREATE TABLE queue_configs (
  queue           text PRIMARY KEY,
  max_running     integer NOT NULL CHECK (max_running >= 0),
  rate_limit      integer NOT NULL CHECK (rate_limit >= 0),
  rate_period_ms  bigint NOT NULL CHECK (rate_period_ms > 0),
  update_time     bigint NOT NULL
);

-- The running count of a limited queue is read from jobs, not job_counts
-- (whose deltas of this transaction are written only at its end, and whose
-- totals are folded in now and then), up to max_running rows:
--   SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = $1
--     AND state = 'running' LIMIT $2) AS r
-- served by jobs_queue_state_recent (queue, state, id).

-- The rate window: leases granted by claims of rate-limited queues, one row
-- per queue and grant time (claims in the same millisecond add up). A claim,
-- holding the config row's lock, sums the rows with grant_time >
-- now - rate_period, deletes those at or before it, and upserts its own:
--   INSERT ... ON CONFLICT (queue, grant_time) DO UPDATE
--     SET leases = queue_lease_grants.leases + excluded.leases
-- The lock makes the sum exact: no other claim of the queue adds a row
-- between the sum and the commit.
CREATE TABLE queue_lease_grants (
  queue       text NOT NULL,
  grant_time  bigint NOT NULL,
  leases      integer NOT NULL CHECK (leases > 0),
  PRIMARY KEY (queue, grant_time)
);
`,
  },
  {
    version: 5,
    name: "a queue's jobs listed through jobs_queue_state_recent",
    sql: `
-- ListJobs of a queue reads one range of jobs_queue_state_recent (queue,
-- state, id) per state, newest first (job-sql.ts listJobsQuery), so
-- jobs_queue_recent (queue, id) only cost an entry at every job write
-- (docs/performance.md "Writes per job").
DROP INDEX jobs_queue_recent;
`,
  },
  {
    version: 6,
    name: "groups",
    sql: `
-- Groups (docs/api.md "Groups"), as SQLite's migration 10: a job's group is
-- fixed at submit ('' is none) and carried by its events.
ALTER TABLE jobs ADD COLUMN group_key text NOT NULL DEFAULT '';
ALTER TABLE job_events ADD COLUMN group_key text NOT NULL DEFAULT '';
ALTER TABLE unsequenced_events ADD COLUMN group_key text NOT NULL DEFAULT '';
-- A group's eligible jobs in claim order, and its jobs by state and id
-- (running counts, ordered heads, ListGroups, ListJobs by group). Only jobs
-- with a group have entries.
CREATE INDEX jobs_group_claim_order ON jobs (queue, group_key, priority DESC, schedule_time, id)
  WHERE state IN ('queued','retry') AND group_key <> '';
CREATE INDEX jobs_group_state ON jobs (queue, group_key, state, id)
  WHERE group_key <> '';
-- The group rules beside the queue's limits; served_turns counts the turns
-- its groups were given (fair). A claim reads the row FOR UPDATE, as for the
-- queue limits, so claims of a queue with group rules take turns across
-- servers and each sees the running counts, grants and groups the previous
-- one committed.
ALTER TABLE queue_configs ADD COLUMN group_max_running integer NOT NULL DEFAULT 0 CHECK (group_max_running >= 0);
ALTER TABLE queue_configs ADD COLUMN group_rate_limit integer NOT NULL DEFAULT 0 CHECK (group_rate_limit >= 0);
ALTER TABLE queue_configs ADD COLUMN fair boolean NOT NULL DEFAULT false;
ALTER TABLE queue_configs ADD COLUMN ordered boolean NOT NULL DEFAULT false;
ALTER TABLE queue_configs ADD COLUMN served_turns bigint NOT NULL DEFAULT 0;
CREATE TABLE queue_group_lease_grants (
  queue       text NOT NULL,
  group_key   text NOT NULL,
  grant_time  bigint NOT NULL,
  leases      integer NOT NULL CHECK (leases > 0),
  PRIMARY KEY (queue, group_key, grant_time)
);
-- A fair queue's groups that may have eligible jobs (see SQLite's
-- migration 10 for the columns).
CREATE TABLE queue_groups (
  queue       text NOT NULL,
  group_key   text NOT NULL,
  served_seq  bigint NOT NULL,
  due_time    bigint,
  held_by     text,
  version     bigint NOT NULL,
  PRIMARY KEY (queue, group_key)
);
CREATE INDEX queue_groups_held ON queue_groups (queue, held_by) WHERE due_time IS NULL AND held_by IS NOT NULL;
CREATE INDEX queue_groups_turns ON queue_groups (queue, served_seq, group_key) INCLUDE (due_time, version)
  WHERE due_time IS NOT NULL;
CREATE INDEX queue_groups_due ON queue_groups (queue, due_time) WHERE due_time IS NOT NULL;
-- The triggers keep queue_groups for fair queues, once per statement over
-- its transition rows (a claim of 100 or a batch of 500 is one run): a job
-- that becomes pending makes its group due by its schedule_time, a lease
-- that finishes makes its group due at that time. A queue turning fair
-- first takes SHARE on jobs (TransactionPort.rebuildGroups), so no writer
-- whose trigger saw it not fair is still in flight when it rebuilds.
CREATE FUNCTION jobs_fair_groups() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM queue_configs WHERE fair) THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO queue_groups AS g (queue, group_key, served_seq, due_time, version)
      SELECT n.queue, n.group_key, 0, min(n.schedule_time), 0 FROM new_jobs n
      WHERE n.state IN ('queued','retry') AND EXISTS (SELECT 1 FROM queue_configs c WHERE c.queue = n.queue AND c.fair)
      GROUP BY n.queue, n.group_key ORDER BY n.queue, n.group_key
    ON CONFLICT (queue, group_key) DO UPDATE SET due_time = least(g.due_time, excluded.due_time), version = g.version + 1;
  ELSE
    INSERT INTO queue_groups AS g (queue, group_key, served_seq, due_time, version)
      SELECT n.queue, n.group_key, 0, min(n.schedule_time), 0 FROM new_jobs n JOIN old_jobs o ON o.id = n.id
      WHERE n.state IN ('queued','retry') AND (o.state NOT IN ('queued','retry') OR n.schedule_time <> o.schedule_time)
        AND EXISTS (SELECT 1 FROM queue_configs c WHERE c.queue = n.queue AND c.fair)
      GROUP BY n.queue, n.group_key ORDER BY n.queue, n.group_key
    ON CONFLICT (queue, group_key) DO UPDATE SET due_time = least(g.due_time, excluded.due_time), version = g.version + 1;
    UPDATE queue_groups g SET due_time = least(g.due_time, f.finish), version = g.version + 1
      FROM (SELECT n.queue, n.group_key, min(n.update_time) AS finish FROM new_jobs n JOIN old_jobs o ON o.id = n.id
            WHERE (o.state = 'running' AND n.state <> 'running' OR o.state IN ('queued','retry') AND n.state = 'cancelled')
              AND EXISTS (SELECT 1 FROM queue_configs c WHERE c.queue = n.queue AND c.fair)
            GROUP BY n.queue, n.group_key) f
      WHERE g.queue = f.queue AND g.group_key = f.group_key;
  END IF;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_fair_submitted AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION jobs_fair_groups();
CREATE TRIGGER jobs_fair_changed AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION jobs_fair_groups();
`,
  },
  {
    version: 7,
    name: "trace context",
    sql: `
-- The W3C Trace Context a job carries (docs/api.md "Trace context"), as
-- SQLite's migration 11: traceparent and tracestate, NULL when none.
ALTER TABLE jobs ADD COLUMN traceparent text;
ALTER TABLE jobs ADD COLUMN tracestate text;
`,
  },
  {
    version: 8,
    name: "queue activity",
    sql: `
-- Queue activity (docs/api.md "Queue activity"), as SQLite's migration 12:
-- one sample per queue and minute (minute: its start, epoch ms): jobs
-- completed, attempts failed, the net change of the queued, retry and
-- running counts, the leases granted by the bucket of their wait (wait_0 ..
-- wait_20, the buckets of domain/queue-activity.ts). Kept like the counts
-- (queue-activity-sql.ts): each transaction appends a delta row per queue
-- and minute it touched to queue_activity_deltas, compact_queue_activity()
-- folds them into queue_activity, readers sum both; the retention pruner
-- deletes samples older than a day through queue_activity_by_minute.
CREATE TABLE queue_activity (
  queue       text NOT NULL,
  minute      bigint NOT NULL,
  completed   bigint NOT NULL DEFAULT 0,
  failed      bigint NOT NULL DEFAULT 0,
  queued      bigint NOT NULL DEFAULT 0,
  retry       bigint NOT NULL DEFAULT 0,
  running     bigint NOT NULL DEFAULT 0,
  wait_0      bigint NOT NULL DEFAULT 0,
  wait_1      bigint NOT NULL DEFAULT 0,
  wait_2      bigint NOT NULL DEFAULT 0,
  wait_3      bigint NOT NULL DEFAULT 0,
  wait_4      bigint NOT NULL DEFAULT 0,
  wait_5      bigint NOT NULL DEFAULT 0,
  wait_6      bigint NOT NULL DEFAULT 0,
  wait_7      bigint NOT NULL DEFAULT 0,
  wait_8      bigint NOT NULL DEFAULT 0,
  wait_9      bigint NOT NULL DEFAULT 0,
  wait_10     bigint NOT NULL DEFAULT 0,
  wait_11     bigint NOT NULL DEFAULT 0,
  wait_12     bigint NOT NULL DEFAULT 0,
  wait_13     bigint NOT NULL DEFAULT 0,
  wait_14     bigint NOT NULL DEFAULT 0,
  wait_15     bigint NOT NULL DEFAULT 0,
  wait_16     bigint NOT NULL DEFAULT 0,
  wait_17     bigint NOT NULL DEFAULT 0,
  wait_18     bigint NOT NULL DEFAULT 0,
  wait_19     bigint NOT NULL DEFAULT 0,
  wait_20     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, minute)
);
CREATE INDEX queue_activity_by_minute ON queue_activity (minute, queue);
-- The same columns and defaults, without the key: one row per transaction.
CREATE TABLE queue_activity_deltas (LIKE queue_activity INCLUDING DEFAULTS);
`,
  },
  {
    version: 9,
    name: "dependencies",
    sql: `
-- Dependencies (docs/api.md "Workflows"), as SQLite's migration 13: the
-- state 'waiting' (a job whose dependencies have not all finished); on each
-- job depends_on as JSON text and its policy (fixed at submit), its
-- dependencies counted by their current states, and whether some job
-- depends on it (store/rows/job-columns.ts). Columns with constant defaults
-- cost no rewrite of the table.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
  CHECK (state IN ('queued','running','retry','completed','dead','cancelled','waiting'));
ALTER TABLE jobs ADD COLUMN depends_on text;
ALTER TABLE jobs ADD COLUMN dependency_policy text CHECK (dependency_policy IN ('wait','cancel','ignore'));
ALTER TABLE jobs ADD COLUMN deps_total integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN deps_completed integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN deps_failed integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN has_dependents integer NOT NULL DEFAULT 0;
-- One row per edge, a job's in its depends_on order; the jobs depending on
-- one are found through job_dependencies_dependents, so a completion counts
-- for each of its dependents at O(1) per edge.
CREATE TABLE job_dependencies (
  job_id         uuid NOT NULL,
  position       integer NOT NULL,
  depends_on_id  uuid NOT NULL,
  PRIMARY KEY (job_id, position)
);
CREATE INDEX job_dependencies_dependents ON job_dependencies (depends_on_id, job_id);
`,
  },
];
