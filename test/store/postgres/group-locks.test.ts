/**
 * A claim of an ordered queue on PostgreSQL waits for no job's lock
 * (TransactionPort.orderedHead): it holds its queue's config row, so
 * waiting there for a row that another transaction holds could deadlock
 * with that transaction (an acknowledgement whose batch then waits for the
 * config row). A head that another transaction holds is passed over for a
 * moment (a pending head: busy) or read without a lock (a running head).
 */
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { NO_QUEUE_LIMITS, type QueueConfig, type QueueConfigField } from "../../../src/domain/queue-limits.js";
import { BUSY_HEAD_RETRY_MS } from "../../../src/store/operations/group-claim.js";
import type { PgStore } from "../../../src/store/postgres/pg-store.js";
import type { ClaimOutcome } from "../../../src/store/store.js";
import { newJob } from "../contract/helpers.js";
import {
  dropSchema,
  openTestPgStore,
  probePostgres,
  requirePostgres,
  skipWithoutPostgres,
  TEST_DATABASE_URL,
  uniqueSchemaName,
} from "../../helpers/postgres.js";
import { until } from "../../helpers/until.js";

const probe = await probePostgres();
const DAY = 86_400_000;

describe.skipIf(skipWithoutPostgres(probe))("ordered heads held by another transaction (PostgreSQL)", () => {
  let schema: string;
  let store: PgStore;
  let other: pg.Client;
  /** Looks at pg_stat_activity from outside any transaction (a transaction sees one snapshot of it). */
  let watcher: pg.Client;
  const clock = new ManualClock();

  beforeEach(async () => {
    requirePostgres(probe);
    schema = uniqueSchemaName("group_locks");
    store = await openTestPgStore(schema, clock, { poolSize: 4 });
    other = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await other.connect();
    watcher = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await watcher.connect();
  });

  afterEach(async () => {
    await other?.query("ROLLBACK").catch(() => undefined);
    await other?.end();
    await watcher?.end();
    await store?.close();
    await dropSchema(schema);
  });

  const configure = (config: Partial<QueueConfig>) =>
    store.updateQueueConfig("billing", { config: { ...NO_QUEUE_LIMITS, ...config }, fields: Object.keys(config) as QueueConfigField[] });
  const claim = (maxJobs: number) => store.claimOutcome({ queue: "billing", workerId: "w", leaseDurationMs: DAY, maxJobs });
  /**
   * The claim's outcome while the lock is held; a failure as soon as
   * PostgreSQL shows a statement on this schema waiting for a lock (the
   * claim waiting for the held job), whatever the machine's pace.
   */
  const settlesWhileLocked = async (outcome: Promise<ClaimOutcome>): Promise<ClaimOutcome> => {
    let settled = false;
    const settling = outcome.finally(() => (settled = true));
    const seen = await until(
      "the claim to settle, or to wait for a lock",
      async () => {
        if (settled) return "settled";
        const { rows } = await watcher.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'",
          [schema],
        );
        return rows[0].n > 0 ? "waiting" : undefined;
      },
      { pollMs: 10 },
    );
    if (seen === "waiting") throw new Error("the claim waited for a job another transaction holds");
    return settling;
  };
  const lockInOtherTransaction = async (jobId: string) => {
    await other.query("BEGIN");
    await other.query(`SELECT id FROM ${schema}.jobs WHERE id = $1 FOR UPDATE`, [jobId]);
  };

  for (const fair of [false, true]) {
    it(`passes over a pending head another transaction holds, briefly, and leases it once that one ends${fair ? " (fair)" : ""}`, async () => {
      await configure({ ordered: true, fair });
      const [head, second] = (await store.submit([newJob({ groupKey: "a" }), newJob({ groupKey: "a" })])).map((o) => o.job);
      await store.submit([newJob({ groupKey: "b" })]);
      await lockInOtherTransaction(head.id);
      const held = await settlesWhileLocked(claim(3));
      // Group b's job is leased; a's head is not, nor the job behind it.
      expect(held.leases.map((l) => l.job.groupKey)).toEqual(["b"]);
      // Looked at again in a moment (under fair also when group b's lease finishes: b was filled to its rule).
      expect(held.heldBack).toEqual({ limit: "ordered", onFinish: fair, until: clock.now() + BUSY_HEAD_RETRY_MS });
      await other.query("ROLLBACK");
      clock.advance(BUSY_HEAD_RETRY_MS);
      const next = await claim(3);
      expect(next.leases.map((l) => l.job.id)).toEqual([head.id]);
      expect(next.leases.map((l) => l.job.id)).not.toContain(second.id);
    });

    it(`reads a running head another transaction holds without waiting, and waits for its lease to finish${fair ? " (fair)" : ""}`, async () => {
      await configure({ ordered: true, fair });
      const [head] = (await store.submit([newJob({ groupKey: "a" }), newJob({ groupKey: "a" })])).map((o) => o.job);
      expect((await claim(1)).leases.map((l) => l.job.id)).toEqual([head.id]);
      await lockInOtherTransaction(head.id);
      const held = await settlesWhileLocked(claim(2));
      expect(held.leases).toEqual([]);
      expect(held.heldBack).toEqual({ limit: "ordered", onFinish: true, until: null });
    });
  }
});
