/**
 * Counts without a hot row (store/postgres/job-counts.ts): transactions
 * append deltas, readers sum totals and deltas in one snapshot, and the
 * compaction folds deltas into totals without a reader ever seeing a count
 * change because of it.
 */
import pg from "pg";
import type { JobState } from "../../../src/domain/job.js";
import { beforeAll, describe, expect, it } from "vitest";
import { countDeltaParams, countStatements } from "../../../src/store/postgres/job-counts.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../../helpers/postgres.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("job counts as deltas", () => {
  const db = useTestSchema(probe, "counts");
  const s = db.schema;
  let sql: ReturnType<typeof countStatements>;

  beforeAll(async () => {
    await db.migrate();
    sql = countStatements(s);
  });

  const deltas = (entries: Array<[string, string, number]>) =>
    entries.map(([queue, state, delta]) => ({ queue, state: state as JobState, delta }));

  async function append(client: pg.ClientBase | pg.Pool, entries: Array<[string, string, number]>): Promise<void> {
    await client.query(sql.appendDeltas, countDeltaParams(deltas(entries)));
  }

  async function counts(client: pg.ClientBase | pg.Pool = db.pool): Promise<Record<string, number>> {
    const { rows } = await client.query(sql.counts);
    return Object.fromEntries(rows.map((r) => [`${r.queue}/${r.state}`, Number(r.count)]));
  }

  async function compact(client: pg.ClientBase | pg.Pool = db.pool): Promise<number> {
    const { rows } = await client.query(sql.compact);
    return Number(rows[0].folded);
  }

  it("sums the deltas of every transaction, leaving out what cancels out", async () => {
    await append(db.pool, [["a", "queued", 3]]);
    await append(db.pool, [
      ["a", "queued", -1],
      ["a", "running", 1],
    ]);
    await append(db.pool, [
      ["b", "queued", 1],
      ["b", "dead", 0],
    ]);
    expect(
      countDeltaParams(
        deltas([
          ["b", "dead", 0],
          ["x:y", "queued", 2],
        ]),
      ),
    ).toEqual([["x:y"], ["queued"], [2]]);
    expect(await counts()).toEqual({ "a/queued": 2, "a/running": 1, "b/queued": 1 });
  });

  it("folds deltas into totals without changing a count, dropping totals that reach zero", async () => {
    const before = await counts();
    expect(await compact()).toBeGreaterThan(0);
    expect(await counts()).toEqual(before);
    expect(await compact()).toBe(0);
    const left = await db.pool.query(`SELECT count(*)::int AS n FROM ${s}.job_count_deltas`);
    expect(left.rows[0].n).toBe(0);
    await append(db.pool, [
      ["b", "queued", -1],
      ["b", "completed", 1],
    ]);
    await compact();
    const totals = await db.pool.query(`SELECT queue, state, count::int FROM ${s}.job_counts WHERE queue = 'b' ORDER BY state`);
    expect(totals.rows).toEqual([{ queue: "b", state: "completed", count: 1 }]);
  });

  it("leaves a running transaction's deltas for a later compaction, and counts them once committed", async () => {
    const open = await db.connect();
    try {
      await open.query("BEGIN");
      await append(open, [["c", "queued", 5]]);
      await compact();
      expect((await counts())["c/queued"]).toBeUndefined();
      await open.query("COMMIT");
      expect((await counts())["c/queued"]).toBe(5);
      await compact();
      expect((await counts())["c/queued"]).toBe(5);
    } finally {
      await open.end();
    }
  });

  it("lets one compaction run at a time: another one skips (-1) instead of waiting", async () => {
    const holder = await db.connect();
    try {
      await holder.query("BEGIN");
      expect(await compact(holder)).toBeGreaterThanOrEqual(0);
      expect(await compact()).toBe(-1);
      await holder.query("COMMIT");
      expect(await compact()).toBeGreaterThanOrEqual(0);
    } finally {
      await holder.end();
    }
  });

  it("keeps every snapshot's counts exact while writers move jobs and compactions run", async () => {
    const JOBS = 1000;
    await append(db.pool, [["moves", "queued", JOBS]]);
    const states = ["queued", "running", "retry", "completed"];
    let seed = 99;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    const expected = new Map<string, number>([["queued", JOBS]]);
    let done = false;
    let compactions = 0;
    let reads = 0;
    const progress = new Set<() => void>();
    const progressed = () => {
      for (const p of [...progress]) p();
    };
    /** Resolves once a compaction and a read both finished after this call: the writers wait for them now and then, so they overlap. */
    const backgroundRan = () =>
      new Promise<void>((resolve) => {
        const [c, r] = [compactions, reads];
        const check = () => {
          if (compactions === c || reads === r) return;
          progress.delete(check);
          resolve();
        };
        progress.add(check);
      });

    async function writer(): Promise<void> {
      const client = await db.connect();
      try {
        for (let i = 0; i < 60; i++) {
          if (i % 20 === 10) await backgroundRan();
          // A transition: one job leaves a state for another (the total stays JOBS).
          const from = states[Math.floor(random() * states.length)];
          const to = states[Math.floor(random() * states.length)];
          if (from === to) continue;
          await client.query("BEGIN");
          await append(client, [
            ["moves", from, -1],
            ["moves", to, 1],
          ]);
          if (random() < 0.3) await client.query("SELECT pg_sleep(0.002)");
          if (random() < 0.1) {
            await client.query("ROLLBACK");
            continue;
          }
          await client.query("COMMIT");
          expected.set(from, (expected.get(from) ?? 0) - 1);
          expected.set(to, (expected.get(to) ?? 0) + 1);
        }
      } finally {
        await client.end();
      }
    }

    async function compactor(): Promise<number> {
      let runs = 0;
      while (!done) {
        await compact();
        runs++;
        compactions++;
        progressed();
      }
      return runs;
    }

    async function reader(): Promise<number> {
      let mine = 0;
      while (!done) {
        const c = await counts();
        const total = states.reduce((sum, st) => sum + (c[`moves/${st}`] ?? 0), 0);
        expect(total).toBe(JOBS);
        mine++;
        reads++;
        progressed();
      }
      return mine;
    }

    const background = [compactor(), compactor(), reader()];
    await Promise.all(Array.from({ length: 8 }, writer));
    done = true;
    const [runsA, runsB, readerReads] = await Promise.all(background);
    // Each writer waited for a compaction and a read three times: they ran while the writers did.
    expect(runsA + runsB).toBeGreaterThan(2);
    expect(readerReads).toBeGreaterThan(2);
    const final = await counts();
    for (const st of states) expect(final[`moves/${st}`] ?? 0, st).toBe(expected.get(st) ?? 0);
  }, 60_000);
});
