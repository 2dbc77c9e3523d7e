/**
 * Round trips per transaction on PostgreSQL (docs/performance.md "Writes
 * per job"): the store's connections pipeline, so a transaction waits for
 * the database only where a statement needs an earlier one's answer. A
 * submit of new jobs is one round trip (BEGIN to COMMIT sent together); a
 * claim three (BEGIN with its three reads, the claimable jobs, the end); an
 * acknowledgement two (BEGIN with the batch's jobs locked, the end).
 *
 * A BEGIN that fails (the pooled connection sat in an aborted
 * transaction) is the batch's failure, and the batch is run again.
 *
 * A round trip is a burst of statements sent on one connection while none
 * of its earlier ones awaits an answer, counted from BEGIN to COMMIT by
 * wrapping node-postgres' Client.prototype.query (as bench/pg-writes.mjs).
 */
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import type { PgStore } from "../../../src/store/postgres/pg-store.js";
import { newJob } from "../contract/helpers.js";
import {
  dropSchema,
  openTestPgStore,
  probePostgres,
  requirePostgres,
  skipWithoutPostgres,
  uniqueSchemaName,
} from "../../helpers/postgres.js";

const probe = await probePostgres();
const MINUTE = 60_000;

interface Connection {
  awaiting: number;
  /** Statements of the open transaction, by round trip. */
  trips: string[][] | undefined;
}

describe.skipIf(skipWithoutPostgres(probe))("round trips per transaction (PostgreSQL)", () => {
  const original = Object.getOwnPropertyDescriptor(pg.Client.prototype, "query")!.value as (...args: unknown[]) => unknown;
  const connections = new WeakMap<object, Connection>();
  /** Each committed transaction's statements, by round trip. */
  let committed: string[][][] = [];
  let schema: string;
  let store: PgStore;
  const clock = new ManualClock();

  beforeAll(() => {
    pg.Client.prototype.query = function counted(this: object, config: unknown, ...rest: unknown[]): unknown {
      const text = typeof config === "string" ? config : (config as { text?: unknown } | undefined)?.text;
      const answer = original.call(this, config, ...rest);
      if (typeof text !== "string" || !(answer instanceof Promise)) return answer;
      let c = connections.get(this);
      if (c === undefined) connections.set(this, (c = { awaiting: 0, trips: undefined }));
      const kind = text.trim().split(/\s+/).slice(0, 3).join(" ");
      if (kind.startsWith("BEGIN")) c.trips = [];
      if (c.trips !== undefined) {
        if (c.awaiting === 0 || c.trips.length === 0) c.trips.push([]);
        c.trips.at(-1)!.push(kind);
      }
      if (kind.startsWith("COMMIT") && c.trips !== undefined) {
        committed.push(c.trips);
        c.trips = undefined;
      }
      c.awaiting++;
      const settled = () => c.awaiting--;
      answer.then(settled, settled);
      return answer;
    } as typeof pg.Client.prototype.query;
  });
  afterAll(() => {
    pg.Client.prototype.query = original as typeof pg.Client.prototype.query;
  });

  beforeEach(async () => {
    requirePostgres(probe);
    schema = uniqueSchemaName("round_trips");
    store = await openTestPgStore(schema, clock, { poolSize: 1 });
    committed = [];
  });
  afterEach(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  /** The round trips of the one transaction `run` commits. */
  async function tripsOf(run: () => Promise<unknown>): Promise<string[][]> {
    committed = [];
    await run();
    expect(committed).toHaveLength(1);
    return committed[0];
  }

  it("submits new jobs in one round trip, claims in three, acknowledges in two", async () => {
    const submit = await tripsOf(() => store.submit([newJob(), newJob(), newJob()]));
    expect(submit).toHaveLength(1);
    expect(submit[0][0]).toBe("BEGIN");
    expect(submit[0].at(-1)).toBe("COMMIT");

    let leases: Awaited<ReturnType<PgStore["claimOutcome"]>>["leases"] = [];
    const claim = await tripsOf(async () => {
      ({ leases } = await store.claimOutcome({ queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 3 }));
    });
    expect(leases).toHaveLength(3);
    expect(claim).toHaveLength(3);
    expect(claim[0]).toHaveLength(4); // BEGIN, the queue's config, its expired leases, whether it is paused

    const complete = await tripsOf(() => store.complete(leases[0].job.id, leases[0].leaseToken, '"done"'));
    expect(complete).toHaveLength(2);
    expect((await store.getJob(leases[0].job.id))?.state).toBe("completed");
  });

  it("answers a batch whose BEGIN, sent with it, failed: the connection sat in an aborted transaction", async () => {
    // A pooled connection left inside a failed transaction: its next BEGIN
    // and every statement after it fail, and the COMMIT is a ROLLBACK.
    const spoiled = await store.pool.connect();
    await spoiled.query("BEGIN");
    await expect(spoiled.query("SELECT 1/0")).rejects.toThrow(/division by zero/);
    spoiled.release();

    const [{ job }] = await store.submit([newJob({ task: "after.a.spoiled.connection" })]);
    expect((await store.getJob(job.id))?.task).toBe("after.a.spoiled.connection");
    const [again] = await store.submit([newJob()]);
    expect((await store.getJob(again.job.id))?.state).toBe("queued");
  });
});
