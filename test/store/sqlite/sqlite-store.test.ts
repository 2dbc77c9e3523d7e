import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { JOB_STATES } from "../../../src/domain/job.js";
import { BUSY_SLICE_MS } from "../../../src/store/sqlite/group-commit.js";
import { MIGRATIONS } from "../../../src/store/sqlite/migrations.js";
import { listJobsSql, SQL } from "../../../src/store/sqlite/sql.js";
import { migrate } from "../../../src/store/sqlite/migrate.js";
import { openSqliteStore, type SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import { newJob, newSchedule } from "../contract/helpers.js";
import { describeStoreContract } from "../contract/index.js";
import { claimLeases } from "../../helpers/store.js";

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "leasequeue-store-"));
}

describeStoreContract("sqlite", (clock) => {
  const dir = tempDir();
  const path = join(dir, "jobs.db");
  const open = () => openSqliteStore({ path, clock, otherWritersPollMs: 10 });
  const stores = [open()];
  return Promise.resolve({
    store: stores[0],
    openInstance() {
      const store = open();
      stores.push(store);
      return Promise.resolve(store);
    },
    async dispose() {
      for (const store of stores) await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
});

describe("SQLite store specifics", () => {
  const dirs: string[] = [];
  const stores: SqliteStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  function open(path?: string, clock = new ManualClock()) {
    const dir = tempDir();
    dirs.push(dir);
    const store = openSqliteStore({ path: path ?? join(dir, "jobs.db"), clock });
    stores.push(store);
    return store;
  }

  it("runs in WAL mode, fsyncing the WAL itself before answering, waiting 5 s by default for another writer's lock (SQLite's own wait a slice of it)", () => {
    const store = open();
    expect(store.db.pragma("journal_mode", { simple: true })).toBe("wal");
    // NORMAL: COMMIT does not fsync on the event loop; the store fsyncs the WAL off it.
    expect(store.db.pragma("synchronous", { simple: true })).toBe(1);
    expect(store.durability).toBe("wal-fsync");
    expect(store.db.pragma("busy_timeout", { simple: true })).toBe(BUSY_SLICE_MS);
    expect(store.busyTimeoutMs).toBe(5000);
  });

  it("rolls back alone an operation that fails after writing, replaying its batch with savepoints", async () => {
    const store = open();
    const [a, b, c] = await store.submit([newJob({ task: "a" }), newJob({ task: "b" }), newJob({ task: "c" })]);
    // A write that SQLite refuses mid-operation (here a trigger; in life a bug
    // or a constraint): the claim of b has already written nothing else.
    store.db.exec(`CREATE TRIGGER refuse_b BEFORE UPDATE ON jobs WHEN NEW.id = '${b.job.id}'
      BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END`);
    const seen: number[][] = [];
    store.onCommitted((change) => seen.push(change.events.map((e) => e.sequence)));
    const results = await Promise.allSettled([
      store.cancel(a.job.id, "first"),
      store.cancel(b.job.id, "second"),
      store.cancel(c.job.id, "third"),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason.message).toMatch(/refused by test trigger/);
    expect((await store.getJob(a.job.id))!.state).toBe("cancelled");
    expect((await store.getJob(b.job.id))!.state).toBe("queued");
    expect((await store.getJob(c.job.id))!.state).toBe("cancelled");
    // One commit, its events numbered without a gap after the three SUBMITTED ones.
    expect(seen).toEqual([[4, 5]]);
    expect((await store.listJobEvents(b.job.id)).map((e) => e.kind)).toEqual(["submitted"]);
    const counts = (await store.queueCounts()).find((q) => q.queue === "billing")!.counts;
    expect(counts).toMatchObject({ queued: 1, cancelled: 2 });
  });

  it("writes the events of a large commit with multi-row inserts, in sequence order", async () => {
    const store = open();
    const outcomes = await store.submit(Array.from({ length: 500 }, (_, i) => newJob({ task: `t${i}` })));
    const events = await store.listEvents({ afterSequence: 0, limit: 1000 });
    expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
    expect(events.map((e) => e.jobId)).toEqual(outcomes.map((o) => o.job.id));
    expect(await store.eventBounds()).toEqual({ oldest: 1, latest: 500 });
  });

  it("answers a write only after an fsync of the WAL, sharing one fsync among concurrent writes", async () => {
    const store = open();
    await store.submit([newJob()]);
    expect(store.walSyncs).toBe(1);
    const before = store.walSyncs;
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.submit([newJob({ task: `t${i}` })])));
    // One transaction for the 50 (one turn of the event loop), so one more fsync.
    expect(store.walSyncs - before).toBe(1);
    // Nothing is announced before its fsync either.
    let announcedAtSync = -1;
    store.onCommitted(() => (announcedAtSync = store.walSyncs));
    await store.submit([newJob({ task: "last" })]);
    expect(announcedAtSync).toBe(before + 2);
  });

  it("does not fsync with synchronous normal", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const store = openSqliteStore({ path: join(dir, "jobs.db"), clock: new ManualClock(), synchronous: "normal" });
    stores.push(store);
    await store.submit([newJob()]);
    expect(store.durability).toBe("none");
    expect(store.walSyncs).toBe(0);
  });

  it("keeps every answered write across a reopen", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const path = join(dir, "jobs.db");
    const first = openSqliteStore({ path, clock: new ManualClock() });
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => first.submit([newJob({ task: `t${i}` })])));
    await first.close();
    const second = openSqliteStore({ path, clock: new ManualClock() });
    stores.push(second);
    for (const [o] of outcomes) expect((await second.getJob(o.job.id))?.state).toBe("queued");
    // A second store on a reopened file syncs its (new) WAL too.
    await second.submit([newJob({ task: "after-reopen" })]);
    expect(second.walSyncs).toBe(1);
  });

  it("applies every migration once and records the schema version", async () => {
    const store = open();
    const path = store.db.name;
    expect(store.db.pragma("user_version", { simple: true })).toBe(MIGRATIONS.at(-1)!.version);
    stores.pop();
    await store.close();
    const again = open(path);
    expect(again.db.pragma("user_version", { simple: true })).toBe(MIGRATIONS.at(-1)!.version);
  });

  it("keeps jobs, events and counts across a reopen", async () => {
    const clock = new ManualClock();
    const first = open(undefined, clock);
    const path = first.db.name;
    const [outcome] = await first.submit([newJob({ idempotencyKey: "k" })]);
    const job = outcome.job;
    await first.close();
    stores.splice(stores.indexOf(first), 1);
    const second = open(path, clock);
    expect((await second.getJob(job.id))?.state).toBe("queued");
    expect((await second.queueCounts())[0].counts.queued).toBe(1);
    const [again] = await second.submit([newJob({ idempotencyKey: "k" })]);
    expect(again.deduplicated).toBe(true);
  });

  it("migrates a version-3 database in place: jobs, counts and running leases carry on", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const path = join(dir, "jobs.db");
    const clock = new ManualClock();
    const first = openSqliteStore({ path, clock });
    await first.submit([newJob({ task: "running" }), newJob({ task: "done" })]);
    const leases = await claimLeases(first, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 2 });
    await first.complete(leases[1].job.id, leases[1].leaseToken, null);
    await first.close();
    // Take the file back to schema 3, as the release before retention left it.
    const db = new Database(path);
    db.exec(
      `DROP TABLE schedules; DROP TABLE paused_queues; DROP INDEX jobs_finished; DROP TABLE event_retention; ALTER TABLE jobs DROP COLUMN heartbeat_event_time;
       ALTER TABLE jobs DROP COLUMN progress; ALTER TABLE jobs DROP COLUMN progress_event_time;`,
    );
    db.exec(`DROP TABLE queue_configs; DROP TABLE queue_lease_grants; CREATE INDEX jobs_queue_recent ON jobs (queue, id);`);
    db.exec(`DROP TRIGGER jobs_fair_submitted; DROP TRIGGER jobs_fair_pending; DROP TRIGGER jobs_fair_finished;
       DROP TABLE queue_groups; DROP TABLE queue_group_lease_grants; DROP INDEX jobs_group_claim_order; DROP INDEX jobs_group_state;
       ALTER TABLE jobs DROP COLUMN group_key; ALTER TABLE job_events DROP COLUMN group_key;`);
    db.exec(`DROP TABLE queue_activity;`);
    db.exec(`ALTER TABLE jobs DROP COLUMN traceparent; ALTER TABLE jobs DROP COLUMN tracestate;`);
    db.exec(`DROP TABLE job_dependencies;`);
    for (const c of ["depends_on", "dependency_policy", "deps_total", "deps_completed", "deps_failed", "has_dependents"]) {
      db.exec(`ALTER TABLE jobs DROP COLUMN ${c}`);
    }
    db.pragma("user_version = 3");
    db.close();

    const reopened = open(path, clock);
    expect(reopened.db.pragma("user_version", { simple: true })).toBe(MIGRATIONS.at(-1)!.version);
    expect((await reopened.queueCounts())[0].counts).toMatchObject({ running: 1, completed: 1 });
    // A lease from before the upgrade stores its first heartbeat as any lease does.
    await reopened.heartbeat(leases[0].job.id, leases[0].leaseToken);
    expect((await reopened.listJobEvents(leases[0].job.id)).map((e) => e.kind)).toEqual(["submitted", "claimed", "heartbeat"]);
    // Jobs from before progress existed have none, and take one.
    expect((await reopened.getJob(leases[1].job.id))!.progressJson).toBeNull();
    expect((await reopened.heartbeat(leases[0].job.id, leases[0].leaseToken, undefined, "0.5")).progressJson).toBe("0.5");
    // And no trace context.
    expect((await reopened.getJob(leases[1].job.id))!.traceContext).toBeNull();
    const outcome = await reopened.pruneJobs({ finishedBefore: { completed: clock.now() + 1 }, limit: 10 });
    expect(outcome.pruned).toEqual([{ queue: "billing", state: "completed", jobs: 1 }]);
    expect(migrate(reopened.db)).toEqual([]);
  });

  it("gives no sequence to a heartbeat it does not store: stored sequences stay consecutive", async () => {
    const store = open();
    const [outcome] = await store.submit([newJob()]);
    const [lease] = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
    for (let i = 0; i < 5; i++) await store.heartbeat(outcome.job.id, lease.leaseToken);
    await store.complete(outcome.job.id, lease.leaseToken, null);
    const events = await store.listEvents({ afterSequence: 0, limit: 100 });
    expect(events.map((e) => [e.sequence, e.kind])).toEqual([
      [1, "submitted"],
      [2, "claimed"],
      [3, "heartbeat"],
      [4, "completed"],
    ]);
    expect(await store.eventBounds()).toEqual({ oldest: 1, latest: 4 });
  });

  it("does not prune a job that finished earlier in the same transaction (its events are not written yet)", async () => {
    const clock = new ManualClock();
    const store = open(undefined, clock);
    await store.submit([newJob()]);
    const [lease] = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
    const commits: number[] = [];
    store.onCommitted((c) => commits.push(c.events.length));
    const [, outcome] = await Promise.all([
      store.complete(lease.job.id, lease.leaseToken, null),
      store.pruneJobs({ finishedBefore: { completed: clock.now() + 1 }, limit: 10 }),
    ]);
    expect(commits).toEqual([1]); // one shared transaction
    expect(outcome).toEqual({ pruned: [], events: 0, exhausted: true });
    expect((await store.listJobEvents(lease.job.id)).map((e) => e.kind)).toEqual(["submitted", "claimed", "completed"]);
    const orphans = store.db.prepare("SELECT count(*) AS n FROM job_events WHERE job_id NOT IN (SELECT id FROM jobs)").get() as {
      n: number;
    };
    expect(orphans.n).toBe(0);
  });

  it("keeps a paused queue paused across a reopen, with or without jobs", async () => {
    const clock = new ManualClock();
    const first = open(undefined, clock);
    const path = first.db.name;
    await first.pauseQueue("billing");
    await first.pauseQueue("empty");
    await first.submit([newJob()]);
    await first.close();
    stores.splice(stores.indexOf(first), 1);
    const second = open(path, clock);
    expect((await second.queueCounts()).map((q) => [q.queue, q.paused, q.counts.queued])).toEqual([
      ["billing", true, 1],
      ["empty", true, 0],
    ]);
    expect(await claimLeases(second, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 })).toEqual([]);
    await second.resumeQueue("billing");
    expect(await claimLeases(second, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 })).toHaveLength(1);
  });

  it("keeps schedules and their run times across a close and a reopen of the file", async () => {
    const clock = new ManualClock(Date.parse("2026-01-01T10:00:00Z"));
    const first = open(undefined, clock);
    const path = first.db.name;
    await first.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: 3_600_000 } }));
    await first.createSchedule(newSchedule({ name: "paused", paused: true }));
    clock.set(Date.parse("2026-01-01T11:00:00Z"));
    await first.fireDueSchedules(10);
    const before = await first.listSchedules();
    await first.close();
    stores.splice(stores.indexOf(first), 1);
    const second = open(path, clock);
    expect(await second.listSchedules()).toEqual(before);
    expect(before.map((s) => [s.name, s.paused, s.lastRunTime, s.nextRunTime])).toEqual([
      ["hourly", false, Date.parse("2026-01-01T11:00:00Z"), Date.parse("2026-01-01T12:00:00Z")],
      ["paused", true, null, null],
    ]);
  });

  describe("query plans match the indexes exactly", () => {
    function plan(sql: string, params: unknown = {}): string {
      const store = stores[0] ?? open();
      const rows = store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>;
      return rows.map((r) => r.detail).join(" | ");
    }

    it("claims through jobs_claim_order with no sort step", () => {
      const p = plan(SQL.claimableJobs.replaceAll("?", "NULL"));
      expect(p).toContain("USING INDEX jobs_claim_order (queue=?)");
      expect(p).not.toContain("TEMP B-TREE");
    });

    it("recovers leases through jobs_lease_expiry", () => {
      expect(plan(SQL.expiredLeases.replaceAll("?", "NULL"))).toContain("USING INDEX jobs_lease_expiry (lease_expire_time<?)");
      expect(plan(SQL.expiredLeasesOfQueue.replaceAll("?", "NULL"))).toContain("jobs_lease_expiry");
    });

    it("finds the oldest pending job and the next scheduled one through jobs_pending_since", () => {
      expect(plan(SQL.oldestPendingSince.replaceAll("?", "NULL"))).toContain("jobs_pending_since");
      expect(plan(SQL.nextScheduledTime.replaceAll("?", "NULL"))).toContain("jobs_pending_since");
    });

    it("reads a queue's backlog from job_counts and only its waiting jobs through jobs_pending_since", () => {
      const p = plan(SQL.queueBacklog, { queue: "q", now: 0 });
      expect(p).toContain("USING INDEX jobs_pending_since (queue=? AND schedule_time>?)");
      expect(p).toContain("SEARCH job_counts USING PRIMARY KEY (queue=? AND state=?)");
      expect(p).not.toContain("SCAN jobs");
    });

    it("finds prunable jobs through jobs_finished and deletes their events through job_events_by_job", () => {
      const p = plan(SQL.prunableJobs.replaceAll("?", "NULL"));
      expect(p).toContain("USING INDEX jobs_finished (state=? AND finish_time<?)");
      expect(p).not.toContain("TEMP B-TREE");
      expect(plan(SQL.deleteEventsOfJob.replaceAll("?", "NULL"))).toContain("job_events_by_job (job_id=?)");
    });

    it("looks up idempotency keys through their unique index", () => {
      expect(plan(SQL.jobByIdempotencyKey.replaceAll("?", "NULL"))).toContain("jobs_idempotency_key");
    });

    it("reads the bounds of the event history from the first and the last event, never a scan", () => {
      const p = plan(SQL.eventBounds);
      expect(p).not.toContain("SCAN job_events");
      expect(p.match(/SEARCH job_events/g)).toHaveLength(2);
    });

    it("replays events by queue and by job through their indexes", () => {
      expect(plan(SQL.eventsOfQueueAfter, { queue: "q", after: 0, limit: 10 })).toContain("job_events_by_queue (queue=? AND sequence>?)");
      expect(plan(SQL.eventsOfJobAfter, { jobId: "j", queue: null, after: 0, limit: 10 })).toContain(
        "job_events_by_job (job_id=? AND sequence>?)",
      );
    });

    it("walks a bulk transition's batches and finds its bound through jobs_queue_state_recent, with no sort step", () => {
      const batch = plan(SQL.jobsInStateBetween.replaceAll("?", "NULL"));
      expect(batch).toContain("USING INDEX jobs_queue_state_recent (queue=? AND state=? AND id>? AND id<?)");
      expect(batch).not.toContain("TEMP B-TREE");
      expect(plan(SQL.lastJobId.replaceAll("?", "NULL"))).toContain("jobs_queue_state_recent");
    });

    it("checks a queue's paused state by its primary key", () => {
      expect(plan(SQL.queuePaused.replaceAll("?", "NULL"))).toContain("USING PRIMARY KEY (queue=?)");
    });

    it("finds due schedules and the next run through schedules_due, with no sort step", () => {
      const due = plan(SQL.dueSchedules.replaceAll("?", "NULL"));
      expect(due).toContain("USING INDEX schedules_due");
      expect(due).not.toContain("TEMP B-TREE");
      expect(plan(SQL.nextScheduleRunTime)).toContain("schedules_due");
      expect(plan(SQL.scheduleByName.replaceAll("?", "NULL"))).toContain("USING PRIMARY KEY (name=?)");
    });

    it("reads a queue's limits by key, counts its running jobs over an index range, and sums its rate window by key range", () => {
      expect(plan(SQL.queueConfig.replaceAll("?", "NULL"))).toContain("USING PRIMARY KEY (queue=?)");
      expect(plan(SQL.countRunning.replaceAll("?", "NULL"))).toContain(
        "USING COVERING INDEX jobs_queue_state_recent (queue=? AND state=?)",
      );
      expect(plan(SQL.leaseGrantsSince.replaceAll("?", "NULL"))).toContain("USING PRIMARY KEY (queue=? AND grant_time>?)");
      expect(plan(SQL.forgetLeaseGrantsThrough.replaceAll("?", "NULL"))).toContain("USING PRIMARY KEY (queue=? AND grant_time<?)");
    });

    it("lists jobs newest first through a matching index for each filter", () => {
      const cases: Array<[Parameters<typeof listJobsSql>[0], string]> = [
        [{ queue: false, states: 0, before: true }, "sqlite_autoindex_jobs_1 (id<?)"],
        [{ queue: true, states: 1, before: true }, "jobs_queue_state_recent (queue=? AND state=? AND id<?)"],
        [{ queue: false, states: 1, before: true }, "jobs_state_recent (state=? AND id<?)"],
      ];
      for (const [shape, index] of cases) {
        const p = plan(listJobsSql(shape), { queue: "q", state0: "queued", before: "z", limit: 10 });
        expect(p).toContain(`SEARCH jobs USING INDEX ${index}`);
        expect(p).not.toContain("TEMP B-TREE");
      }
    });

    it("lists several states, and a queue's six, as one index range per state, sorting no more than a page of each", () => {
      const params = { queue: "q", before: "z", limit: 10, ...Object.fromEntries(JOB_STATES.map((s, i) => [`state${i}`, s])) };
      for (const [shape, index] of [
        [{ queue: true, states: 6, before: true }, "jobs_queue_state_recent (queue=? AND state=? AND id<?)"],
        [{ queue: true, states: 2, before: false }, "jobs_queue_state_recent (queue=? AND state=?)"],
        [{ queue: false, states: 3, before: true }, "jobs_state_recent (state=? AND id<?)"],
      ] as const) {
        const steps = plan(listJobsSql(shape), params).split(" | ");
        expect(steps.filter((s) => s === `SEARCH jobs USING INDEX ${index}`)).toHaveLength(shape.states);
        expect(steps.filter((s) => s.startsWith("SCAN jobs") || (s.startsWith("SEARCH jobs") && !s.includes(index)))).toEqual([]);
        // The only sorts are of a range's own page (a LIMITed subquery), never of the table.
        steps.forEach((s, i) => s.includes("TEMP B-TREE") && expect(steps[i - 1]).toMatch(/^SCAN \(subquery-\d+\)$/));
      }
    });
  });
});
