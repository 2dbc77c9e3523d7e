/**
 * The columns of a queue activity sample (docs/api.md "Queue activity"),
 * shared by both engines: the same names in SQLite's `queue_activity` and
 * PostgreSQL's `queue_activity` and `queue_activity_deltas`, and the
 * mapping between a row (an array in ACTIVITY_VALUE_COLUMNS order) and the
 * domain's shapes.
 */
import { LEASE_WAIT_BUCKETS } from "../../domain/queue-activity.js";
import type { ActivitySample } from "../store.js";
import type { ActivityDelta } from "../transaction-port.js";

/** The lease-wait histogram's columns, one per bucket of domain/queue-activity.ts, in bucket order. */
export const LEASE_WAIT_COLUMNS: readonly string[] = Array.from({ length: LEASE_WAIT_BUCKETS }, (_, i) => `wait_${i}`);

/** The columns summed into a sample, after (queue, minute): the counters, the gauges' changes, the histogram. */
export const ACTIVITY_VALUE_COLUMNS: readonly string[] = ["completed", "failed", "queued", "retry", "running", ...LEASE_WAIT_COLUMNS];

/** A delta's values in ACTIVITY_VALUE_COLUMNS order. */
export function activityValues(d: ActivityDelta): number[] {
  return [d.completed, d.failed, d.queued, d.retry, d.running, ...d.leaseWaits];
}

/** A sample from its minute and its values in ACTIVITY_VALUE_COLUMNS order (numbers, or bigint text as PostgreSQL's sums come). */
export function toActivitySample(minute: number, values: ReadonlyArray<number | string>): ActivitySample {
  const n = values.map(Number);
  return { minute: Number(minute), completed: n[0], failed: n[1], queued: n[2], retry: n[3], running: n[4], leaseWaits: n.slice(5) };
}
