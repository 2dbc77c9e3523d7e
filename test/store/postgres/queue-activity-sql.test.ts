/**
 * Queue activity without a hot row (store/postgres/queue-activity-sql.ts):
 * transactions append delta rows, readers sum samples and deltas by minute
 * with the counts of the same snapshot, the compaction folds deltas into
 * samples without a read changing because of it, and the pruner's fold
 * waits for a compaction that runs instead of skipping it.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { LEASE_WAIT_BUCKETS } from "../../../src/domain/queue-activity.js";
import { activityValues, toActivitySample } from "../../../src/store/rows/activity-columns.js";
import { activityDeltaParam, activityStatements } from "../../../src/store/postgres/queue-activity-sql.js";
import type { ActivityDelta } from "../../../src/store/transaction-port.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";

const probe = await probePostgres();
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const MINUTE = 60_000;

function delta(queue: string, minute: number, values: Partial<Omit<ActivityDelta, "queue" | "minute">> = {}): ActivityDelta {
  return {
    queue,
    minute,
    completed: 0,
    failed: 0,
    queued: 0,
    retry: 0,
    running: 0,
    leaseWaits: new Array(LEASE_WAIT_BUCKETS).fill(0),
    ...values,
  };
}

/** The sample a delta's values make, as a read answers it. */
const sampleOf = (d: ActivityDelta) => toActivitySample(d.minute, activityValues(d));

describe.skipIf(skipWithoutPostgres(probe))("queue activity as deltas", () => {
  const db = useTestSchema(probe, "activity");
  const s = db.schema;
  let sql: ReturnType<typeof activityStatements>;

  beforeAll(async () => {
    await db.migrate();
    sql = activityStatements(s);
  });

  async function read(queue: string) {
    const { rows } = await db.pool.query(sql.queueActivity, [queue, 0]);
    return { samples: (rows[0].samples as number[][]).map(([m, ...v]) => toActivitySample(m, v)), counts: rows[0].counts };
  }

  async function rows(table: string): Promise<number> {
    return (await db.pool.query(`SELECT count(*)::int AS n FROM ${s}.${table}`)).rows[0].n;
  }

  it("sums every transaction's rows by minute, and folds them into one sample each without changing a read", async () => {
    const waits = new Array(LEASE_WAIT_BUCKETS).fill(0);
    waits[3] = 2;
    await db.pool.query(sql.appendDeltas, [activityDeltaParam([delta("a", T0, { queued: 3 }), delta("b", T0, { completed: 1 })])]);
    await db.pool.query(sql.appendDeltas, [activityDeltaParam([delta("a", T0, { queued: -2, running: 2, leaseWaits: waits })])]);
    await db.pool.query(sql.appendDeltas, [activityDeltaParam([delta("a", T0 + MINUTE, { completed: 2, running: -2 })])]);
    await db.pool.query(`INSERT INTO ${s}.job_count_deltas (queue, state, delta) VALUES ('a', 'queued', 1), ('a', 'completed', 2)`);
    const before = await read("a");
    expect(before.samples).toEqual([
      sampleOf(delta("a", T0, { queued: 1, running: 2, leaseWaits: waits })),
      sampleOf(delta("a", T0 + MINUTE, { completed: 2, running: -2 })),
    ]);
    expect(before.counts).toEqual({ queued: 1, retry: 0, running: 0 });

    const folded = await db.pool.query(sql.compact);
    expect(Number(folded.rows[0].folded)).toBe(4);
    expect(await rows("queue_activity_deltas")).toBe(0);
    expect(await rows("queue_activity")).toBe(3);
    expect(await read("a")).toEqual(before);
    // A later delta adds to the folded sample.
    await db.pool.query(sql.appendDeltas, [activityDeltaParam([delta("a", T0, { failed: 1 })])]);
    await db.pool.query(sql.compact);
    expect((await read("a")).samples[0]).toMatchObject({ minute: T0, failed: 1, queued: 1 });
  });

  it("folds for the pruner once a running compaction is done, holding the compaction's lock to its commit", async () => {
    await db.pool.query(sql.appendDeltas, [activityDeltaParam([delta("c", T0, { queued: 1 })])]);
    const holder = await db.connect();
    const pruner = await db.connect();
    try {
      await holder.query("BEGIN");
      expect(Number((await holder.query(sql.compact)).rows[0].folded)).toBeGreaterThanOrEqual(0);
      await pruner.query("BEGIN");
      const waited = pruner.query(sql.foldForPruning);
      await holder.query("COMMIT");
      await waited;
      // While the pruner's transaction is open, the catch-up's compaction skips.
      expect(Number((await db.pool.query(sql.compact)).rows[0].folded)).toBe(-1);
      const deleted = await pruner.query(sql.deleteBefore, [T0 + MINUTE, 100]);
      await pruner.query("COMMIT");
      expect(deleted.rowCount).toBeGreaterThanOrEqual(1);
      expect((await read("c")).samples).toEqual([]);
    } finally {
      await holder.end();
      await pruner.end();
    }
  });
});
