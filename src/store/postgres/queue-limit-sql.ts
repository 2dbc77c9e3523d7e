/**
 * The queue-limit statements of the PostgreSQL store (migration 4;
 * docs/api.md "Queue limits"). A claim of a queue with limits reads its
 * config row FOR UPDATE first and holds the lock to its commit, so claims of
 * one limited queue take turns across all servers: under READ COMMITTED each
 * later statement sees what the previous holder committed (its RUNNING jobs,
 * its lease grants), and two claims never both see room for the same place.
 * Claims of queues without a row lock nothing.
 */
import type { QueueConfig } from "../../domain/queue-limits.js";
import { JOB_COLUMN_NAMES } from "../rows/job-columns.js";
import { quoteIdentifier } from "./identifiers.js";

export interface QueueLimitStatements {
  /** $1 queue: the config row, locked. */
  queueConfig: string;
  /** $1 queue, $2 max running, $3 rate limit, $4 rate period ms, $5 now. */
  setQueueConfig: string;
  /** $1 queue. */
  deleteQueueConfig: string;
  /** Every config row, by queue (GetStats, and the catch-up's comparison). */
  queueConfigs: string;
  /** $1 queue, $2 at most. */
  countRunning: string;
  /** $1 queue, $2 after: leases and the oldest grant time inside the window. */
  leaseGrantsSince: string;
  /** $1 queue, $2 at, $3 leases, $4 forget through. */
  recordLeaseGrant: string;
  /** $1 queue. */
  forgetLeaseGrants: string;
  // Groups (docs/api.md "Groups"); see store/transaction-port.ts for each.
  /** $1 queue, $2 groups (not ""), $3 now, $4 per group: locked, skipping rows another transaction holds. */
  groupsClaimable: string;
  /** $1 queue, $2 now, $3 limit: jobs without a group, as groupsClaimable. */
  ungroupedClaimable: string;
  /** $1 queue, $2 groups, $3 running at most, $4 grants after (null: none): per group in $2's order. */
  groupStates: string;
  /** $1 queue, $2 groups: each group's open job submitted first and whether another transaction holds it (TransactionPort.readGroups). */
  orderedHeads: string;
  /** $1 queue, $2 at, $3 groups, $4 leases, $5 forget through. */
  recordGroupLeaseGrants: string;
  /** $1 queue. */
  forgetGroupLeaseGrants: string;
  /** $1 queue, $2 now, $3 after served_seq, $4 after group, $5 limit. */
  dueGroups: string;
  /** $1 queue, $2 group, $3 version, $4 due time, $5 the rule. */
  parkGroup: string;
  /** $1 queue. */
  heldGroup: string;
  /** $1 queue, $2 group, $3 version. */
  settleGroup: string;
  /** $1 queue, $2 groups in the order served. */
  markGroupsServed: string;
  /** $1 queue, $2 now. */
  nextGroupDueTime: string;
  /** $1 queue. */
  rebuildGroups: string;
  /** No parameters: SHARE on jobs, before rebuildGroups. */
  lockJobsForRebuild: string;
  /** $1 queue. */
  dropGroups: string;
  /** $1 queue, $2 after group, $3 limit. */
  listGroups: string;
  /** $1 queue. */
  countPendingGroups: string;
  /**
   * $1 queues, $2 group keys (text[], pairwise): the rows of those fair
   * groups, locked in (queue, group_key) order; nothing while no queue is
   * fair. Sent ahead of a transaction's job writes (PgPort.flush).
   */
  lockGroups: string;
}

const CONFIG_COLUMNS = `max_running AS "maxRunning", rate_limit AS "rateLimit", rate_period_ms AS "ratePeriodMs",
  group_max_running AS "groupMaxRunning", group_rate_limit AS "groupRateLimit", fair, ordered`;

export function queueLimitStatements(schema: string): QueueLimitStatements {
  const s = quoteIdentifier(schema);
  const jobs = `SELECT ${JOB_COLUMN_NAMES.join(", ")} FROM ${s}.jobs`;
  /**
   * The least id of group k's jobs in one open state (an index seek on jobs_group_state). PostgreSQL has no
   * min() for uuid, so the least is the first in id order.
   */
  const firstIn = (state: string) =>
    `(SELECT id FROM ${s}.jobs WHERE queue = $1 AND group_key = k.group_key AND group_key <> '' AND state = '${state}' ORDER BY id LIMIT 1)`;
  /** A group's earliest pending schedule_time: its own index for a group, the queue's for jobs without one. */
  const earliestPending = `CASE WHEN $2 = '' THEN
      (SELECT min(schedule_time) FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry') AND group_key = '')
    ELSE (SELECT min(schedule_time) FROM ${s}.jobs WHERE queue = $1 AND group_key = $2 AND group_key <> ''
      AND state IN ('queued','retry')) END`;
  /** The group's row at version $3, locked, unless another transaction holds it. */
  const unheldGroup = `SELECT group_key FROM ${s}.queue_groups WHERE queue = $1 AND group_key = $2 AND version = $3 FOR UPDATE SKIP LOCKED`;
  return {
    queueConfig: `SELECT ${CONFIG_COLUMNS} FROM ${s}.queue_configs WHERE queue = $1 FOR UPDATE`,
    setQueueConfig: `INSERT INTO ${s}.queue_configs (queue, max_running, rate_limit, rate_period_ms, group_max_running, group_rate_limit,
        fair, ordered, update_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
      ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_ms = excluded.rate_period_ms, group_max_running = excluded.group_max_running,
        group_rate_limit = excluded.group_rate_limit, fair = excluded.fair, ordered = excluded.ordered, update_time = excluded.update_time`,
    deleteQueueConfig: `DELETE FROM ${s}.queue_configs WHERE queue = $1`,
    queueConfigs: `SELECT queue, ${CONFIG_COLUMNS} FROM ${s}.queue_configs ORDER BY queue`,
    // Served by jobs_queue_state_recent (queue, state, id), stopping at $2 rows.
    countRunning: `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${s}.jobs WHERE queue = $1 AND state = 'running' LIMIT $2) r`,
    leaseGrantsSince: `SELECT coalesce(sum(leases), 0)::int AS leases, min(grant_time) AS oldest FROM ${s}.queue_lease_grants
      WHERE queue = $1 AND grant_time > $2`,
    recordLeaseGrant: `WITH forgotten AS (
        DELETE FROM ${s}.queue_lease_grants WHERE queue = $1 AND grant_time <= $4
      )
      INSERT INTO ${s}.queue_lease_grants (queue, grant_time, leases) VALUES ($1, $2, $3)
      ON CONFLICT (queue, grant_time) DO UPDATE SET leases = queue_lease_grants.leases + excluded.leases`,
    forgetLeaseGrants: `DELETE FROM ${s}.queue_lease_grants WHERE queue = $1`,
    groupsClaimable: `SELECT j.* FROM unnest($2::text[]) WITH ORDINALITY AS k(group_key, ord), LATERAL (
        ${jobs} WHERE queue = $1 AND group_key = k.group_key AND group_key <> '' AND state IN ('queued','retry') AND schedule_time <= $3
        ORDER BY priority DESC, schedule_time, id LIMIT $4 FOR UPDATE SKIP LOCKED) j
      ORDER BY k.ord, j.priority DESC, j.schedule_time, j.id`,
    ungroupedClaimable: `${jobs} WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time <= $2 AND group_key = ''
      ORDER BY priority DESC, schedule_time, id LIMIT $3 FOR UPDATE SKIP LOCKED`,
    groupStates: `SELECT k.group_key AS "groupKey",
        (SELECT count(*) FROM (SELECT 1 FROM ${s}.jobs WHERE queue = $1 AND group_key = k.group_key AND group_key <> ''
          AND state = 'running' LIMIT $3::int) r)::int AS running,
        coalesce(g.leases, 0)::int AS leases, g.oldest
      FROM unnest($2::text[]) WITH ORDINALITY AS k(group_key, ord)
      LEFT JOIN LATERAL (SELECT sum(leases) AS leases, min(grant_time) AS oldest FROM ${s}.queue_group_lease_grants
        WHERE queue = $1 AND group_key = k.group_key AND grant_time > $4::bigint) g ON true
      ORDER BY k.ord`,
    // The heads are found in the statement's snapshot; the pending ones are
    // then locked, skipping a head another transaction holds (busy), and the
    // RUNNING ones only read: the claim waits for no job's lock.
    orderedHeads: `WITH head AS (
        SELECT (SELECT h.id FROM (VALUES (${firstIn("queued")}), (${firstIn("retry")}), (${firstIn("running")})) AS h(id)
          WHERE h.id IS NOT NULL ORDER BY h.id LIMIT 1) AS id
        FROM unnest($2::text[]) AS k(group_key)
      ), locked AS (
        SELECT ${JOB_COLUMN_NAMES.map((c) => `j.${c}`).join(", ")} FROM head h JOIN ${s}.jobs j ON j.id = h.id
        WHERE j.state IN ('queued','retry') FOR UPDATE OF j SKIP LOCKED
      )
      SELECT *, false AS busy FROM locked
      UNION ALL
      SELECT ${JOB_COLUMN_NAMES.map((c) => `j.${c}`).join(", ")}, j.state <> 'running' AS busy FROM head h JOIN ${s}.jobs j ON j.id = h.id
        WHERE j.state IN ('queued','retry','running') AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = j.id)`,
    recordGroupLeaseGrants: `WITH served AS (
        SELECT * FROM unnest($3::text[], $4::integer[]) AS u(group_key, leases)
      ), forgotten AS (
        DELETE FROM ${s}.queue_group_lease_grants g USING served WHERE g.queue = $1 AND g.group_key = served.group_key AND g.grant_time <= $5
      )
      INSERT INTO ${s}.queue_group_lease_grants AS g (queue, group_key, grant_time, leases)
        SELECT $1, group_key, $2, leases FROM served ORDER BY group_key
      ON CONFLICT (queue, group_key, grant_time) DO UPDATE SET leases = g.leases + excluded.leases`,
    forgetGroupLeaseGrants: `DELETE FROM ${s}.queue_group_lease_grants WHERE queue = $1`,
    dueGroups: `SELECT group_key AS "groupKey", served_seq AS "servedSeq", version FROM ${s}.queue_groups
      WHERE queue = $1 AND due_time IS NOT NULL AND due_time <= $2 AND (served_seq, group_key) > ($3, $4)
      ORDER BY served_seq, group_key LIMIT $5`,
    // Parking, settling and marking turns skip a row another transaction
    // holds (a trigger of a job write, which moves the row's version: parking
    // and settling would then do nothing anyway), so a claim holding its
    // queue's config row waits for no group's lock. A group whose turn was
    // not marked so keeps its place: it may get one turn more.
    parkGroup: `UPDATE ${s}.queue_groups SET due_time = $4, held_by = $5 WHERE queue = $1 AND group_key = $2
      AND group_key = (${unheldGroup})`,
    heldGroup: `SELECT held_by AS limit_ FROM ${s}.queue_groups WHERE queue = $1 AND due_time IS NULL AND held_by IS NOT NULL LIMIT 1`,
    settleGroup: `WITH target AS (${unheldGroup}), settled AS (
        UPDATE ${s}.queue_groups SET held_by = NULL, due_time = ${earliestPending} WHERE queue = $1 AND group_key = (SELECT * FROM target)
        RETURNING due_time
      )
      DELETE FROM ${s}.queue_groups WHERE queue = $1 AND group_key = (SELECT * FROM target)
        AND EXISTS (SELECT 1 FROM settled WHERE due_time IS NULL)
        AND NOT EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue = $1 AND group_key = $2 AND state = 'running')`,
    markGroupsServed: `WITH turns AS (
        UPDATE ${s}.queue_configs SET served_turns = served_turns + cardinality($2::text[]) WHERE queue = $1
        RETURNING served_turns - cardinality($2::text[]) AS base
      )
      UPDATE ${s}.queue_groups g SET served_seq = turns.base + u.ord
        FROM turns, unnest($2::text[]) WITH ORDINALITY AS u(group_key, ord)
        WHERE g.queue = $1 AND g.group_key = u.group_key AND g.group_key IN (
          SELECT group_key FROM ${s}.queue_groups WHERE queue = $1 AND group_key = ANY($2::text[]) FOR UPDATE SKIP LOCKED)`,
    nextGroupDueTime: `SELECT min(due_time) AS t FROM ${s}.queue_groups WHERE queue = $1 AND due_time IS NOT NULL AND due_time > $2`,
    rebuildGroups: `INSERT INTO ${s}.queue_groups AS g (queue, group_key, served_seq, due_time, version)
        SELECT queue, group_key, 0, min(schedule_time), 0 FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry')
        GROUP BY queue, group_key ORDER BY group_key
      ON CONFLICT (queue, group_key) DO UPDATE SET due_time = least(g.due_time, excluded.due_time), version = g.version + 1`,
    lockJobsForRebuild: `LOCK TABLE ${s}.jobs IN SHARE MODE`,
    dropGroups: `DELETE FROM ${s}.queue_groups WHERE queue = $1`,
    listGroups: `SELECT group_key AS "groupKey", count(*) FILTER (WHERE state = 'queued')::int AS queued,
        count(*) FILTER (WHERE state = 'running')::int AS running, count(*) FILTER (WHERE state = 'retry')::int AS retry,
        min(schedule_time) FILTER (WHERE state <> 'running') AS "oldestPendingTime"
      FROM ${s}.jobs WHERE queue = $1 AND group_key > $2 AND group_key <> '' AND state IN ('queued','running','retry')
      GROUP BY group_key ORDER BY group_key LIMIT $3`,
    countPendingGroups: `WITH RECURSIVE g(k) AS (
        SELECT (SELECT min(group_key) FROM ${s}.jobs WHERE queue = $1 AND group_key <> '' AND state IN ('queued','retry'))
        UNION ALL
        SELECT (SELECT min(group_key) FROM ${s}.jobs WHERE queue = $1 AND group_key > g.k AND group_key <> '' AND state IN ('queued','retry'))
        FROM g WHERE g.k IS NOT NULL
      )
      SELECT count(k)::int AS n FROM g`,
    // ORDER BY with FOR UPDATE locks the rows as they come out of the sort.
    lockGroups: `SELECT 1 FROM ${s}.queue_groups g
      WHERE EXISTS (SELECT 1 FROM ${s}.queue_configs WHERE fair)
        AND (g.queue, g.group_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
      ORDER BY g.queue, g.group_key FOR UPDATE OF g`,
  };
}

/** The values of setQueueConfig. */
export function queueConfigParams(queue: string, config: QueueConfig, now: number): unknown[] {
  const c = config;
  return [queue, c.maxRunning, c.rateLimit, c.ratePeriodMs, c.groupMaxRunning, c.groupRateLimit, c.fair, c.ordered, now];
}
