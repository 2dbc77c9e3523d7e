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
}

const CONFIG_COLUMNS = `max_running AS "maxRunning", rate_limit AS "rateLimit", rate_period_ms AS "ratePeriodMs"`;

export function queueLimitStatements(schema: string): QueueLimitStatements {
  const s = quoteIdentifier(schema);
  return {
    queueConfig: `SELECT ${CONFIG_COLUMNS} FROM ${s}.queue_configs WHERE queue = $1 FOR UPDATE`,
    setQueueConfig: `INSERT INTO ${s}.queue_configs (queue, max_running, rate_limit, rate_period_ms, update_time) VALUES ($1, $2, $3, $4, $5)
      ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running, rate_limit = excluded.rate_limit,
        rate_period_ms = excluded.rate_period_ms, update_time = excluded.update_time`,
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
  };
}

/** The values of setQueueConfig. */
export function queueConfigParams(queue: string, config: QueueConfig, now: number): unknown[] {
  return [queue, config.maxRunning, config.rateLimit, config.ratePeriodMs, now];
}
