/**
 * Two transactions that write jobs of the same fair groups, each an INSERT
 * and an UPDATE of jobs (a batch of Submits and Completes, as one flush of
 * PgPort), on two connections as two servers would. The fair-groups
 * triggers (migration 6) write each job's group row; left to them, the
 * INSERT takes one group's row and the UPDATE another's, and two such
 * transactions deadlock. PgPort.flush locks the rows first, in one order,
 * so the second waits for the first and both commit.
 *
 * The interleaving is forced, not hoped for: a third connection holds the
 * first transaction's UPDATE back (a lock on the job row it updates) until
 * the second transaction is waiting too, as pg_stat_activity shows.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { NO_QUEUE_LIMITS } from "../../../src/domain/queue-limits.js";
import type { StoredJob } from "../../../src/domain/job.js";
import { clientConfig } from "../../../src/store/postgres/pool.js";
import { PgPort } from "../../../src/store/postgres/pg-port.js";
import { pgStatements } from "../../../src/store/postgres/pg-statements.js";
import type { PgStore } from "../../../src/store/postgres/pg-store.js";
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

describe.skipIf(skipWithoutPostgres(probe))("group rows of a fair queue written by two transactions (PostgreSQL)", () => {
  let schema: string;
  let store: PgStore;
  const clients: pg.Client[] = [];
  const clock = new ManualClock();

  const connect = async (): Promise<pg.Client> => {
    const client = new pg.Client(clientConfig({ url: TEST_DATABASE_URL, poolSize: 1, statementTimeoutMs: 0 }));
    await client.connect();
    clients.push(client);
    return client;
  };

  beforeEach(async () => {
    requirePostgres(probe);
    schema = uniqueSchemaName("fair_rows");
    store = await openTestPgStore(schema, clock, { poolSize: 4 });
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) {
      await client.query("ROLLBACK").catch(() => undefined);
      await client.end();
    }
    await store?.close();
    await dropSchema(schema);
  });

  it("locks the rows in one order ahead of the INSERT and the UPDATE, so neither transaction deadlocks", async () => {
    await store.updateQueueConfig("billing", { config: { ...NO_QUEUE_LIMITS, fair: true }, fields: ["fair"] });
    // Running jobs in groups a and b, and one more pending in each, so both groups have their row.
    const [a1, b2] = (await store.submit([newJob({ groupKey: "a" }), newJob({ groupKey: "b" })])).map((o) => o.job.id);
    const claimed = await store.claimOutcome({ queue: "billing", workerId: "w", leaseDurationMs: DAY, maxJobs: 2 });
    expect(claimed.leases.map((l) => l.job.id).sort()).toEqual([a1, b2].sort());
    await store.submit([newJob({ groupKey: "a" }), newJob({ groupKey: "b" })]);
    const watcher = await connect();
    const { rows: groupRows } = await watcher.query(`SELECT group_key FROM ${schema}.queue_groups WHERE queue = 'billing' ORDER BY 1`);
    expect(groupRows.map((r) => r.group_key)).toEqual(["a", "b"]);

    // The two running jobs as stored, read in a transaction that is then rolled back.
    const reader = await connect();
    await reader.query("BEGIN");
    const [runningA, runningB] = (await new PgPort(reader, pgStatements(schema)).findJobs([a1, b2])) as StoredJob[];
    await reader.query("ROLLBACK");
    const now = clock.now();
    const completed = (job: StoredJob): StoredJob => ({
      ...job,
      state: "completed",
      finishTime: now,
      updateTime: now,
      leaseExpireTime: null,
    });
    const pending = (job: StoredJob): StoredJob => ({
      ...job,
      id: randomUUID(),
      state: "queued",
      attempts: 0,
      deliveries: 0,
      workerId: null,
      leaseExpireTime: null,
      leaseTokenHash: null,
      leaseDurationMs: null,
      finishTime: null,
    });
    const pid = async (client: pg.Client) => Number((await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid);
    /** "flushed", or why not (a deadlock's error), so a failure shows which. */
    const outcome = (flush: Promise<void>) =>
      flush.then(
        () => "flushed",
        (err: unknown) => String(err),
      );
    /** Whether the backend (its pid read before it got busy) waits for a lock, from pg_stat_activity. */
    const waitingForLock = (backend: number, what: string) =>
      until(what, async () => {
        const { rows } = await watcher.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [backend]);
        return rows[0]?.wait_event_type === "Lock" ? true : undefined;
      });

    // A third connection holds job a1's row: the first transaction's UPDATE waits for it.
    const holder = await connect();
    await holder.query("BEGIN");
    await holder.query(`SELECT id FROM ${schema}.jobs WHERE id = $1 FOR UPDATE`, [a1]);

    // First: a Submit into group b and the Complete of a1 (group a).
    const first = await connect();
    const firstPid = await pid(first);
    await first.query("BEGIN");
    const firstPort = new PgPort(first, pgStatements(schema));
    firstPort.insertJobs([pending(runningB)]);
    firstPort.updateJobs([completed(runningA)]);
    const firstFlush = firstPort.flush();
    await waitingForLock(firstPid, "the first transaction to wait for job a1's row");

    // Second: a Submit into group a and the Complete of b2 (group b).
    const second = await connect();
    const secondPid = await pid(second);
    await second.query("BEGIN");
    const secondPort = new PgPort(second, pgStatements(schema));
    secondPort.insertJobs([pending(runningA)]);
    secondPort.updateJobs([completed(runningB)]);
    const secondFlush = secondPort.flush();
    await waitingForLock(secondPid, "the second transaction to wait for a group row the first holds");

    await holder.query("ROLLBACK");
    expect(await outcome(firstFlush)).toBe("flushed");
    await first.query("COMMIT");
    expect(await outcome(secondFlush)).toBe("flushed");
    await second.query("COMMIT");

    const { rows } = await watcher.query<{ state: string; n: number }>(
      `SELECT state, count(*)::int AS n FROM ${schema}.jobs WHERE queue = 'billing' GROUP BY state ORDER BY state`,
    );
    expect(rows).toEqual([
      { state: "completed", n: 2 },
      { state: "queued", n: 4 },
    ]);
  });
});
