/**
 * The retention pass and the background pruner over a real SQLite store:
 * whole backlogs in bounded batches, the policy's states and cutoffs, and
 * (with writers running) that the writers are served between batches. The
 * write-lock holds and writer stalls a pass causes are measured by
 * bench/prune-under-writes.mjs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import type { RetentionPolicy } from "../../src/domain/retention.js";
import { prunePass, startPruner } from "../../src/maintenance/pruner.js";
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
 * A pass beside writers: `WRITERS` loops of submit -> claim -> heartbeat ->
 * complete on a durable (fsynced) database while a pass deletes a backlog.
 * What holds on any machine: the whole backlog goes in its batches, the
 * writers' calls are served between them, and none of their jobs is
 * touched. How long the write lock is held and how long a writer waits is
 * measured by bench/prune-under-writes.mjs (docs/development.md "How a test
 * waits": figures belong in a bench, not in a test).
 */
describe("pruning under write load", () => {
  const BACKLOG = 2_000;
  const BATCH = 100;
  const WRITERS = 8;

  it("deletes the backlog batch by batch while writers run, serving their calls between the batches", { timeout: 60_000 }, async () => {
    const { store, clock } = setup("full");
    await finish(store, BACKLOG, "archive", "completed");
    clock.advance(169 * HOUR);

    let stop = false;
    let completed = 0;
    // Writers' calls answered while the pass ran (from its start to its end).
    let servedDuringPass = 0;
    let passing = false;
    const served = async <T>(call: () => Promise<T>): Promise<T> => {
      const value = await call();
      if (passing) servedDuringPass++;
      return value;
    };
    const writer = async (i: number) => {
      const queue = `live-${i}`;
      while (!stop) {
        const [submitted] = await served(() => store.submit([newJob({ queue })]));
        const [lease] = await served(() => claimLeases(store, { queue, workerId: `w${i}`, leaseDurationMs: MINUTE, maxJobs: 1 }));
        await served(() => store.heartbeat(submitted.job.id, lease.leaseToken));
        await served(() => store.complete(lease.job.id, lease.leaseToken, null));
        completed++;
      }
    };

    const writers = Array.from({ length: WRITERS }, (_, i) => writer(i));
    // The pass starts once every writer has had a job through: they are all under way.
    const through = new Set<string>();
    await new Promise<void>((resolve) => {
      const off = store.onCommitted(({ events }) => {
        for (const e of events) if (e.kind === "completed" && e.queue.startsWith("live-")) through.add(e.queue);
        if (through.size === WRITERS) {
          off();
          resolve();
        }
      });
    });
    passing = true;
    const summary = await prunePass({ store, clock, policy: WEEK, batchSize: BATCH });
    passing = false;
    stop = true;
    await Promise.all(writers);

    expect(summary.jobs).toBe(BACKLOG);
    expect(summary.batches).toBe(Math.ceil(BACKLOG / BATCH) + (BACKLOG % BATCH === 0 ? 1 : 0));
    // Writers were served between batches: every batch's transaction carried some of their calls.
    expect(servedDuringPass).toBeGreaterThanOrEqual(summary.batches);
    const counts = await store.queueCounts();
    expect(countsOf(counts, "archive")?.completed ?? 0).toBe(0);
    const live = counts.filter((c) => c.queue.startsWith("live-")).reduce((n, c) => n + c.counts.completed, 0);
    expect(live).toBe(completed);
  });
});
