/**
 * Queue activity on PostgreSQL (docs/api.md "Queue activity"), kept as the
 * counts are (job-counts.ts) and for the same reason: one row per (queue,
 * minute) upserted by every transaction would make every writer of a queue
 * wait for the previous one's commit on that row.
 */
import { ACTIVITY_VALUE_COLUMNS, activityValues } from "../rows/activity-columns.js";
import type { ActivityDelta } from "../transaction-port.js";
import { advisoryLockKey, quoteIdentifier } from "./identifiers.js";

const COLUMNS = ACTIVITY_VALUE_COLUMNS.join(", ");

export function activityCompactionSql(schema: string): string {
  return `
-- Folds the visible queue activity delta rows into queue_activity; returns
-- how many were folded, or -1 when another compaction of this schema runs
-- (p_wait: waits for it instead, as the retention pruner does).
CREATE OR REPLACE FUNCTION compact_queue_activity(p_wait boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
DECLARE
  v_folded bigint;
BEGIN
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(${advisoryLockKey(schema, "activity-compaction")});
  ELSIF NOT pg_try_advisory_xact_lock(${advisoryLockKey(schema, "activity-compaction")}) THEN
    RETURN -1;
  END IF;
  WITH taken AS (
    DELETE FROM queue_activity_deltas RETURNING *
  ), summed AS (
    SELECT queue, minute, ${ACTIVITY_VALUE_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(", ")}, count(*) AS rows
    FROM taken GROUP BY queue, minute
  ), folded AS (
    INSERT INTO queue_activity AS a (queue, minute, ${COLUMNS})
    SELECT queue, minute, ${COLUMNS} FROM summed ORDER BY queue, minute
    ON CONFLICT (queue, minute) DO UPDATE SET ${ACTIVITY_VALUE_COLUMNS.map((c) => `${c} = a.${c} + excluded.${c}`).join(", ")}
  )
  SELECT coalesce(sum(rows), 0) INTO v_folded FROM summed;
  RETURN v_folded;
END
$fn$;
`;
}

/**
 * The statements of queue activity, kept as the counts are:
 * - each transaction appends its sums to `queue_activity_deltas`, one row
 *   per queue and minute it touched, pipelined with its other last
 *   statements (pg-transactions.ts): an INSERT that no writer waits for;
 * - readers sum `queue_activity` (the compacted samples) and the visible
 *   delta rows of the queue, by minute, in one statement with the queue's
 *   counts, so the gauges counted back from the counts see the same
 *   snapshot as the samples;
 * - `compact_queue_activity()` runs beside `compact_job_counts()` in each
 *   server's catch-up (about every second; one at a time per schema by an
 *   advisory lock) and folds the visible delta rows into their samples, in
 *   (queue, minute) order;
 * - the retention pruner folds the delta rows first, in its own
 *   transaction and holding the compaction's lock to its commit (so no
 *   compaction runs meanwhile, and none waits for it: they skip), then
 *   deletes the oldest samples.
 */
export interface ActivityStatements {
  /** $1: the rows as JSON, [{queue, minute, v: [values in ACTIVITY_VALUE_COLUMNS order]}] (activityDeltaParam). */
  appendDeltas: string;
  /** $1 queue, $2 the first minute: `samples` (JSON arrays: minute, then the values) and `counts` (JSON: queued, retry, running). */
  queueActivity: string;
  /**
   * $1 the minute before which, $2 at most how many: deletes the oldest
   * samples (by minute, then queue), answering one row per sample deleted;
   * after foldForPruning in the same transaction.
   */
  deleteBefore: string;
  /** The compaction of the catch-up: skipped (-1) while another runs. */
  compact: string;
  /** The compaction before a prune: waits for one that runs, and holds its lock to the commit. */
  foldForPruning: string;
}

export function activityStatements(schema: string): ActivityStatements {
  const s = quoteIdentifier(schema);
  const sums = ACTIVITY_VALUE_COLUMNS.map((c) => `sum(${c})::bigint AS ${c}`).join(", ");
  return {
    appendDeltas: `INSERT INTO ${s}.queue_activity_deltas (queue, minute, ${COLUMNS})
      SELECT d.queue, d.minute, ${ACTIVITY_VALUE_COLUMNS.map((_, i) => `d.v[${i + 1}]`).join(", ")}
      FROM json_to_recordset($1::json) AS d(queue text, minute bigint, v bigint[])`,
    queueActivity: `SELECT
        (SELECT coalesce(json_agg(json_build_array(minute, ${COLUMNS}) ORDER BY minute), '[]'::json)
          FROM (SELECT minute, ${sums} FROM (
              SELECT minute, ${COLUMNS} FROM ${s}.queue_activity WHERE queue = $1 AND minute >= $2
              UNION ALL SELECT minute, ${COLUMNS} FROM ${s}.queue_activity_deltas WHERE queue = $1 AND minute >= $2
            ) a GROUP BY minute) m) AS samples,
        (SELECT json_build_object('queued', coalesce(sum(n) FILTER (WHERE state = 'queued'), 0),
            'retry', coalesce(sum(n) FILTER (WHERE state = 'retry'), 0), 'running', coalesce(sum(n) FILTER (WHERE state = 'running'), 0))
          FROM (SELECT state, count AS n FROM ${s}.job_counts WHERE queue = $1 AND state IN ('queued', 'retry', 'running')
            UNION ALL SELECT state, delta FROM ${s}.job_count_deltas WHERE queue = $1 AND state IN ('queued', 'retry', 'running')) c) AS counts`,
    deleteBefore: `DELETE FROM ${s}.queue_activity WHERE (queue, minute) IN (
        SELECT queue, minute FROM ${s}.queue_activity WHERE minute < $1 ORDER BY minute, queue LIMIT $2)
      RETURNING 1`,
    compact: `SELECT ${s}.compact_queue_activity() AS folded`,
    foldForPruning: `SELECT ${s}.compact_queue_activity(true) AS folded`,
  };
}

/** A transaction's activity (store/operations/operation-changes.ts) as appendDeltas' one parameter. */
export function activityDeltaParam(deltas: readonly ActivityDelta[]): string {
  return JSON.stringify(deltas.map((d) => ({ queue: d.queue, minute: d.minute, v: activityValues(d) })));
}
