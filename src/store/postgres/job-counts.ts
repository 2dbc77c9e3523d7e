/**
 * Job counts per queue and state without a hot row. With one row per
 * (queue, state) updated by every transition, as in SQLite, every writer of
 * a queue would wait for the previous one's commit on that row.
 */
import type { CountDelta } from "../transaction-port.js";
import { advisoryLockKey, quoteIdentifier } from "./identifiers.js";

export function countCompactionSql(schema: string): string {
  return `
-- Folds the visible delta rows into job_counts; returns how many were
-- folded, or -1 when another compaction of this schema is running.
CREATE OR REPLACE FUNCTION compact_job_counts() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
DECLARE
  v_folded bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(${advisoryLockKey(schema, "count-compaction")}) THEN
    RETURN -1;
  END IF;
  WITH taken AS (
    DELETE FROM job_count_deltas RETURNING queue, state, delta
  ), summed AS (
    SELECT queue, state, sum(delta) AS delta, count(*) AS rows FROM taken GROUP BY queue, state
  ), folded AS (
    INSERT INTO job_counts (queue, state, count) SELECT queue, state, delta FROM summed
    ON CONFLICT (queue, state) DO UPDATE SET count = job_counts.count + excluded.count
  )
  SELECT coalesce(sum(rows), 0) INTO v_folded FROM summed;
  DELETE FROM job_counts WHERE count = 0;
  RETURN v_folded;
END
$fn$;
`;
}

/**
 * The statements of the counts, kept without a hot row:
 * - each transaction appends its net changes to `job_count_deltas`, one
 *   row per (queue, state) it changed (an INSERT takes no lock that another
 *   writer waits for);
 * - readers sum `job_counts` (the compacted totals) and every delta row in
 *   one statement, so one snapshot: the sum is exact for that snapshot;
 * - `compact_job_counts()` now and then (each server's maintenance loop,
 *   e.g. every second; one at a time per schema by an advisory lock, others
 *   skip) deletes the delta rows it can see and adds their sums to
 *   `job_counts` in one statement. Readers see the delta rows or the new
 *   totals, never both or neither; rows of transactions still running are
 *   invisible to it and left for the next run.
 *
 * Only the compactor updates `job_counts`, so its rows are not hot either.
 * The delta table holds what was written since the last compaction (a few
 * thousand rows at most at thousands of transitions a second), so reading
 * counts stays O(queues + recent transactions).
 */
export interface CountStatements {
  /** $1 queues, $2 states, $3 deltas (arrays, from countDeltaParams). */
  appendDeltas: string;
  /** Counts per queue and state, non-zero only, by queue then state. */
  counts: string;
  /**
   * $1 queue, $2 now: Store.queueBacklog in one statement (one snapshot),
   * the queue's counts and the pending jobs still waiting for their
   * schedule_time (a range of jobs_pending_since from now on, so
   * a long backlog of eligible jobs costs nothing here).
   */
  backlog: string;
  compact: string;
}

export function countStatements(schema: string): CountStatements {
  const s = quoteIdentifier(schema);
  return {
    appendDeltas: `INSERT INTO ${s}.job_count_deltas (queue, state, delta)
      SELECT queue, state, delta FROM unnest($1::text[], $2::text[], $3::bigint[]) AS d(queue, state, delta)`,
    counts: `SELECT queue, state, sum(n)::bigint AS count FROM (
        SELECT queue, state, count AS n FROM ${s}.job_counts
        UNION ALL SELECT queue, state, delta FROM ${s}.job_count_deltas
      ) c GROUP BY queue, state HAVING sum(n) <> 0 ORDER BY queue, state`,
    backlog: `SELECT
        coalesce(sum(c.n) FILTER (WHERE c.state IN ('queued','retry')), 0)::bigint AS pending,
        coalesce(sum(c.n) FILTER (WHERE c.state = 'running'), 0)::bigint AS running,
        (SELECT count(*) FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time > $2) AS waiting,
        (SELECT min(schedule_time) FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time > $2)
          AS "nextEligibleTime",
        EXISTS (SELECT 1 FROM ${s}.paused_queues WHERE queue = $1) AS paused
      FROM (
        SELECT state, count AS n FROM ${s}.job_counts WHERE queue = $1
        UNION ALL SELECT state, delta FROM ${s}.job_count_deltas WHERE queue = $1
      ) c`,
    compact: `SELECT ${s}.compact_job_counts() AS folded`,
  };
}

/** A transaction's count changes (store/operations/operation-changes.ts) as the three arrays of appendDeltas; zero changes are left out. */
export function countDeltaParams(deltas: readonly CountDelta[]): [string[], string[], number[]] {
  const queues: string[] = [];
  const states: string[] = [];
  const values: number[] = [];
  for (const { queue, state, delta } of deltas) {
    if (delta === 0) continue;
    queues.push(queue);
    states.push(state);
    values.push(delta);
  }
  return [queues, states, values];
}
