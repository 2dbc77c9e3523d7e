/**
 * The retention pass and the background pruner over a real SQLite store:
 * whole backlogs in bounded batches, the policy's states and cutoffs, and
 * (with writers running) the longest write-lock hold and writer stall it
 * causes, printed rather than asserted (machines are noisy).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/domain/clock.js";
import type { RetentionPolicy } from "../../src/domain/retention.js";
import { prunePass, startPruner } from "../../src/maintenance/pruner.js";
import { silentLogger } from "../../src/logger.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { PrunedJobs } from "../../src/store/store.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases } from "../helpers/store.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const WEEK: RetentionPolicy = { retentionMs: 168 * HOUR, deadRetentionMs: null };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

function setup(synchronous: "full" | "normal" = "normal") {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-pruner-"));
  const clock = new ManualClock();
  const store = openSqliteStore({ path: join(dir, "jobs.db"), clock, synchronous });
  cleanups.push(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, clock };
}

/** Submits, claims and finishes `n` jobs of a queue: completed, cancelled (never claimed) or dead. */
async function finish(store: SqliteStore, n: number, queue: string, how: "completed" | "cancelled" | "dead"): Promise<string[]> {
  const ids: string[] = [];
  for (let done = 0; done < n; done += 1000) {
    const size = Math.min(1000, n - done);
    const jobs = await store.submit(Array.from({ length: size }, () => newJob({ queue, maxAttempts: 1 })));
    if (how === "cancelled") {
      await Promise.all(jobs.map((o) => store.cancel(o.job.id, "")));
    } else {
      const leases = await claimLeases(store, { queue, workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1000 });
      // claim takes at most 100 per call in the service; the store has no such bound.
      expect(leases).toHaveLength(size);
      await Promise.all(
        leases.map((l) =>
          how === "completed"
            ? store.complete(l.job.id, l.leaseToken, null)
            : store.fail(l.job.id, l.leaseToken, { error: "boom", permanent: true }),
        ),
      );
    }
    ids.push(...jobs.map((o) => o.job.id));
  }
  return ids;
}

function countsOf(counts: Awaited<ReturnType<SqliteStore["queueCounts"]>>, queue: string) {
  return counts.find((c) => c.queue === queue)?.counts;
}

describe("a retention pass", () => {
  it("deletes the whole backlog in batches of at most batchSize, reporting each batch and the totals by queue and state", async () => {
    const { store, clock } = setup();
    await finish(store, 250, "billing", "completed");
    await finish(store, 40, "emails", "cancelled");
    await finish(store, 30, "emails", "dead");
    clock.advance(169 * HOUR);
    const recent = await finish(store, 5, "billing", "completed");

    const batches: PrunedJobs[][] = [];
    const summary = await prunePass({ store, clock, policy: WEEK, batchSize: 64, onBatch: (b) => batches.push(b) });
    expect(summary.pruned).toEqual([
      { queue: "billing", state: "completed", jobs: 250 },
      { queue: "emails", state: "cancelled", jobs: 40 },
    ]);
    expect(summary).toMatchObject({ jobs: 290, events: 250 * 3 + 40 * 2 });
    expect(summary.batches).toBe(Math.ceil(290 / 64));
    for (const b of batches) expect(b.reduce((n, p) => n + p.jobs, 0)).toBeLessThanOrEqual(64);
    expect(batches.flat().reduce((n, p) => n + p.jobs, 0)).toBe(290);

    const counts = await store.queueCounts();
    expect(countsOf(counts, "billing")).toMatchObject({ completed: 5 });
    expect(countsOf(counts, "emails")).toMatchObject({ cancelled: 0, dead: 30 });
    for (const id of recent) expect((await store.getJob(id))?.state).toBe("completed");
    expect((await store.listJobs({ limit: 500 })).length).toBe(5 + 30);
  });

  it("prunes dead jobs only with a dead retention, by their own cutoff", async () => {
    const { store, clock } = setup();
    await finish(store, 10, "billing", "dead");
    clock.advance(2 * HOUR);
    await finish(store, 3, "billing", "dead");
    clock.advance(HOUR);
    expect((await prunePass({ store, clock, policy: { retentionMs: MINUTE, deadRetentionMs: null } })).jobs).toBe(0);
    const summary = await prunePass({ store, clock, policy: { retentionMs: 168 * HOUR, deadRetentionMs: 2 * HOUR } });
    expect(summary.pruned).toEqual([{ queue: "billing", state: "dead", jobs: 10 }]);
    expect(countsOf(await store.queueCounts(), "billing")).toMatchObject({ dead: 3 });
  });

  it("deletes the queue activity samples older than a day in bounded batches, whatever the jobs' policy", async () => {
    const { store, clock } = setup();
    const since = clock.now();
    // Five minutes of two queues' activity (the clock starts on a minute), then one more a day and three minutes after the first.
    for (let i = 0; i < 5; i++) {
      await store.submit([newJob({ queue: "billing" }), newJob({ queue: "emails" })]);
      clock.advance(MINUTE);
    }
    clock.advance(24 * HOUR - 2 * MINUTE);
    await store.submit([newJob({ queue: "billing" })]);
    const summary = await prunePass({ store, clock, policy: { retentionMs: 0, deadRetentionMs: null }, batchSize: 4 });
    // The minutes that started more than a day ago: the first three of each queue, in two batches.
    expect(summary).toMatchObject({ activitySamples: 6, jobs: 0, batches: 0 });
    expect((await store.queueActivity("billing", since)).samples.map((s) => (s.minute - since) / MINUTE)).toEqual([3, 4, 24 * 60 + 3]);
    expect((await store.queueActivity("emails", since)).samples.map((s) => (s.minute - since) / MINUTE)).toEqual([3, 4]);
  });

  it("keeps everything when the retention is 0s and no dead retention is set", async () => {
    const { store, clock } = setup();
    await finish(store, 10, "billing", "completed");
    await finish(store, 10, "billing", "dead");
    clock.advance(10_000 * HOUR);
    const summary = await prunePass({ store, clock, policy: { retentionMs: 0, deadRetentionMs: 0 } });
    expect(summary).toMatchObject({ jobs: 0, batches: 0, pruned: [] });
    expect(countsOf(await store.queueCounts(), "billing")).toMatchObject({ completed: 10, dead: 10 });
  });
});

describe("the background pruner", () => {
  it("runs a pass at start and another every interval, reporting what it deleted, until stopped", async () => {
    const { store, clock } = setup();
    await finish(store, 30, "billing", "completed");
    clock.advance(169 * HOUR);
    const reported: PrunedJobs[] = [];
    const waiters: Array<{ jobs: number; resolve: () => void }> = [];
    let seen = 0;
    const reach = (jobs: number) => new Promise<void>((resolve) => waiters.push({ jobs, resolve }));
    const first = reach(30);
    const second = reach(40);
    const pruner = startPruner({
      store,
      clock,
      log: silentLogger,
      policy: WEEK,
      intervalMs: 20,
      batchSize: 8,
      onPruned: (p) => {
        reported.push(...p);
        seen += p.reduce((n, e) => n + e.jobs, 0);
        for (const w of waiters) if (seen >= w.jobs) w.resolve();
      },
    });
    await first; // the pass at start
    expect(seen).toBe(30);
    // Jobs that become due later are taken by a later pass.
    await finish(store, 10, "billing", "completed");
    clock.advance(169 * HOUR);
    await second;
    await pruner.stop();
    expect(seen).toBe(40);
    expect(reported.every((p) => p.queue === "billing" && p.state === "completed" && p.jobs <= 8)).toBe(true);
    expect(countsOf(await store.queueCounts(), "billing")?.completed ?? 0).toBe(0);
  });

  it("with a policy that keeps every job, deletes only the queue activity samples older than a day", async () => {
    const { store, clock } = setup();
    const since = clock.now();
    await finish(store, 5, "billing", "completed");
    clock.advance(10_000 * HOUR);
    // The pass's deleting transaction is the first write after the start.
    const wrote = new Promise<void>((resolve) => store.onWriteOutcome(() => resolve()));
    const pruner = startPruner({ store, clock, log: silentLogger, policy: { retentionMs: 0, deadRetentionMs: null }, intervalMs: 60_000 });
    await wrote;
    await pruner.stop();
    expect((await store.queueActivity("billing", since)).samples).toEqual([]);
    expect(countsOf(await store.queueCounts(), "billing")).toMatchObject({ completed: 5 });
  });
});

/**
 * Measures, with `WRITERS` loops of submit -> claim -> heartbeat -> complete
 * running on a durable (fsynced) database, how long the write lock is held
 * (BEGIN IMMEDIATE to COMMIT, timed on the store's own connection) and how
 * long a writer's call waits, first without the pruner, then while a pass
 * deletes a backlog of BACKLOG finished jobs. Figures are printed; the
 * assertions are the ones that cannot flake.
 */
describe("pruning under write load", () => {
  const BACKLOG = Number(process.env.LEASEQUEUE_PRUNE_BACKLOG ?? 20_000);
  const BATCH = Number(process.env.LEASEQUEUE_PRUNE_BATCH ?? 100);
  const WRITERS = 8;

  it("reports its longest write-lock hold and the longest writer stall", { timeout: 180_000 }, async () => {
    const { store, clock } = setup("full");
    await finish(store, BACKLOG, "archive", "completed");
    clock.advance(169 * HOUR);

    // Time every write transaction on the store's connection.
    const holds: number[] = [];
    let began: number | undefined;
    const exec = store.db.exec.bind(store.db);
    store.db.exec = (sql: string) => {
      if (sql === "BEGIN IMMEDIATE") began = performance.now();
      const result = exec(sql);
      if ((sql === "COMMIT" || sql === "ROLLBACK") && began !== undefined) {
        holds.push(performance.now() - began);
        began = undefined;
      }
      return result;
    };

    let stop = false;
    let completed = 0;
    const stalls: number[] = [];
    const timed = async <T>(call: () => Promise<T>): Promise<T> => {
      const t0 = performance.now();
      const value = await call();
      stalls.push(performance.now() - t0);
      return value;
    };
    const writer = async (i: number) => {
      const queue = `live-${i}`;
      while (!stop) {
        const [submitted] = await timed(() => store.submit([newJob({ queue })]));
        const [lease] = await timed(() => claimLeases(store, { queue, workerId: `w${i}`, leaseDurationMs: MINUTE, maxJobs: 1 }));
        await timed(() => store.heartbeat(submitted.job.id, lease.leaseToken));
        await timed(() => store.complete(lease.job.id, lease.leaseToken, null));
        completed++;
      }
    };
    const phase = () => {
      const h = [...holds].sort((a, b) => a - b);
      const s = [...stalls].sort((a, b) => a - b);
      holds.length = 0;
      stalls.length = 0;
      const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
      return {
        transactions: h.length,
        holdP50: pct(h, 0.5),
        holdP99: pct(h, 0.99),
        holdMax: h.at(-1) ?? 0,
        calls: s.length,
        stallP99: pct(s, 0.99),
        stallMax: s.at(-1) ?? 0,
      };
    };

    const writers = Array.from({ length: WRITERS }, (_, i) => writer(i));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const baseline = phase();
    const t0 = performance.now();
    const summary = await prunePass({ store, clock, policy: WEEK, batchSize: BATCH });
    const passMs = performance.now() - t0;
    const pruning = phase();
    stop = true;
    await Promise.all(writers);

    const f = (ms: number) => ms.toFixed(1);
    console.log(
      `pruning ${summary.jobs} jobs (${summary.events} events) in ${summary.batches} batches of ${BATCH} took ${(passMs / 1000).toFixed(1)} s ` +
        `with ${WRITERS} writers running (${completed} jobs completed by them in all).\n` +
        `  write-lock hold per transaction, ms: without pruning p50 ${f(baseline.holdP50)} p99 ${f(baseline.holdP99)} max ${f(baseline.holdMax)}` +
        ` (${baseline.transactions} transactions); while pruning p50 ${f(pruning.holdP50)} p99 ${f(pruning.holdP99)} max ${f(pruning.holdMax)}` +
        ` (${pruning.transactions})\n` +
        `  writer call latency, ms: without pruning p99 ${f(baseline.stallP99)} max ${f(baseline.stallMax)} (${baseline.calls} calls);` +
        ` while pruning p99 ${f(pruning.stallP99)} max ${f(pruning.stallMax)} (${pruning.calls} calls)`,
    );

    expect(summary.jobs).toBe(BACKLOG);
    expect(summary.batches).toBe(Math.ceil(BACKLOG / BATCH) + (BACKLOG % BATCH === 0 ? 1 : 0));
    // Writers were served between batches: every batch's transaction carried some of their calls.
    expect(pruning.calls).toBeGreaterThanOrEqual(summary.batches);
    const counts = await store.queueCounts();
    expect(countsOf(counts, "archive")?.completed ?? 0).toBe(0);
    const live = counts.filter((c) => c.queue.startsWith("live-")).reduce((n, c) => n + c.counts.completed, 0);
    expect(live).toBe(completed);
  });
});
