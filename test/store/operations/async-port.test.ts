/**
 * The shared write operations (store/operations/) over a port that answers
 * every call with a promise, as PostgreSQL's will: they give the same
 * outcomes and refusals as over SQLite's port, which answers at once (and
 * then they answer at once too, store/operations/steps.ts). The rows are SQLite's; only
 * the answers are delayed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { QueueError } from "../../../src/domain/errors.js";
import { OperationChanges, TransactionChanges, type PersistedChanges } from "../../../src/store/operations/operation-changes.js";
import { claimJobs } from "../../../src/store/operations/claim.js";
import { pruneFinishedJobs } from "../../../src/store/operations/prune.js";
import { pauseQueue, updateQueueConfig } from "../../../src/store/operations/queue-controls.js";
import { createSchedule, deleteSchedule, fireDueSchedules } from "../../../src/store/operations/schedules.js";
import type { WriteOperation } from "../../../src/store/operations/scope.js";
import { submitJobs } from "../../../src/store/operations/submit.js";
import { completeJob, heartbeatJob } from "../../../src/store/operations/transitions.js";
import { isPromiseLike } from "../../../src/store/operations/steps.js";
import { migrate } from "../../../src/store/sqlite/migrate.js";
import { prepareStatements } from "../../../src/store/sqlite/sql.js";
import { SqlitePort } from "../../../src/store/sqlite/sqlite-port.js";
import type { TransactionPort } from "../../../src/store/transaction-port.js";
import { newJob, newSchedule } from "../contract/helpers.js";
import { NO_GROUP_RULES } from "../../helpers/store.js";

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

/** The same port with every answer delivered later, through a promise. */
function answeringLater(port: SqlitePort): TransactionPort {
  return new Proxy(port, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => Promise.resolve().then(() => value.apply(target, args));
    },
  });
}

let dir: string;
let db: Database.Database;
let sqlitePort: SqlitePort;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-async-port-"));
  db = new Database(join(dir, "jobs.db"));
  db.pragma("journal_mode = WAL");
  migrate(db);
  sqlitePort = new SqlitePort(db, prepareStatements(db));
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One operation in a transaction of its own over the delayed port, committed unless it is refused. */
async function transaction<T>(op: WriteOperation<T>, now = NOW): Promise<{ value: T; persisted: PersistedChanges }> {
  const port = answeringLater(sqlitePort);
  db.exec("BEGIN IMMEDIATE");
  sqlitePort.nextSequence = (db.prepare("SELECT coalesce(max(sequence), 0) AS n FROM job_events").get() as { n: number }).n + 1;
  try {
    const changes = new OperationChanges();
    const earlier = new TransactionChanges();
    const answer = op({ now, port, changes, earlier });
    expect(isPromiseLike(answer)).toBe(true);
    const value = await answer;
    earlier.add(changes);
    const persisted = await earlier.persist(port);
    db.exec("COMMIT");
    return { value, persisted };
  } finally {
    if (db.inTransaction) db.exec("ROLLBACK");
  }
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(QueueError);
    return (err as QueueError).reason;
  }
  throw new Error("expected a refusal");
}

describe("the shared write operations over a port that answers later", () => {
  it("submit, claim, heartbeat and complete a job, numbering its events in commit order", async () => {
    const submitted = await transaction(submitJobs([newJob({ idempotencyKey: "k" }), newJob({ idempotencyKey: "k" })]));
    expect(submitted.value.map((o) => o.deduplicated)).toEqual([false, true]);
    expect(submitted.persisted.events.map((e) => [e.sequence, e.kind])).toEqual([[1, "submitted"]]);

    const claimed = await transaction(
      claimJobs({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 5 }, { maxRecovered: 10 }),
    );
    expect(claimed.value.leases).toHaveLength(1);
    expect(claimed.value.heldBack).toBeNull();
    const [lease] = claimed.value.leases;
    const jobId = lease.job.id;

    const beat = await transaction(heartbeatJob(jobId, lease.leaseToken, 120_000), NOW + 1000);
    expect(beat.value.leaseExpireTime).toBe(NOW + 1000 + 120_000);
    const done = await transaction(completeJob(jobId, lease.leaseToken, '"ok"'), NOW + 2000);
    expect(done.value).toMatchObject({ state: "completed", resultJson: '"ok"' });
    expect(done.persisted.events.map((e) => [e.sequence, e.kind])).toEqual([[4, "completed"]]);
    const counts = db.prepare("SELECT state, count FROM job_counts WHERE count <> 0").all();
    expect(counts).toEqual([{ state: "completed", count: 1 }]);
  });

  it("refuses as it does over SQLite: a stale token, a changed request under a key, an unknown job", async () => {
    await transaction(submitJobs([newJob({ idempotencyKey: "k" })]));
    const [lease] = (
      await transaction(claimJobs({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 }, { maxRecovered: 10 }))
    ).value.leases;
    expect(await refusal(transaction(completeJob(lease.job.id, "not-the-token", null)))).toBe("LEASE_REJECTED");
    expect(await refusal(transaction(completeJob(lease.job.id, lease.leaseToken, null), NOW + 61_000))).toBe("LEASE_EXPIRED");
    expect(await refusal(transaction(submitJobs([newJob({ idempotencyKey: "k", priority: 9 })])))).toBe("IDEMPOTENCY_MISMATCH");
    expect(await refusal(transaction(heartbeatJob("01900000-0000-7000-8000-000000000000", "x")))).toBe("JOB_NOT_FOUND");
    // Nothing of the refused ones was written.
    expect((db.prepare("SELECT count(*) AS n FROM job_events").get() as { n: number }).n).toBe(2);
  });

  it("recovers expired leases in a claim, prunes, and pauses over the same port", async () => {
    await transaction(submitJobs([newJob({ maxAttempts: 1 })]));
    await transaction(claimJobs({ queue: "billing", workerId: "w", leaseDurationMs: 1000, maxJobs: 1 }, { maxRecovered: 10 }));
    const later = await transaction(
      claimJobs({ queue: "billing", workerId: "w2", leaseDurationMs: 1000, maxJobs: 1 }, { maxRecovered: 10 }),
      NOW + 5000,
    );
    expect(later.value).toEqual({ leases: [], heldBack: null, nextScheduleTime: null });
    expect(later.persisted.events.map((e) => e.kind)).toEqual(["lease_expired", "dead_lettered"]);
    const pruned = await transaction(pruneFinishedJobs({ finishedBefore: { dead: NOW + 10_000 }, limit: 10 }), NOW + 10_000);
    expect(pruned.value).toEqual({ pruned: [{ queue: "billing", state: "dead", jobs: 1 }], events: 4, exhausted: true });
    expect((await transaction(pauseQueue("billing"))).value).toBe(true);
    expect((await transaction(pauseQueue("billing"))).value).toBe(false);
  });

  it("creates a schedule and fires its run over the same port: SCHEDULED before SUBMITTED, once", async () => {
    const created = await transaction(createSchedule(newSchedule({ name: "every-minute", recurrence: { intervalMs: 60_000 } })));
    expect(created.value.nextRunTime).toBe(NOW + 60_000);
    expect((await transaction(fireDueSchedules(10), NOW + 59_999)).value).toEqual([]);
    const fired = await transaction(fireDueSchedules(10), NOW + 60_000);
    expect(fired.value.map((f) => [f.schedule, f.runTime, f.submitted])).toEqual([["every-minute", NOW + 60_000, true]]);
    expect(fired.persisted.events.map((e) => [e.kind, e.jobId])).toEqual([
      ["scheduled", fired.value[0].job.id],
      ["submitted", fired.value[0].job.id],
    ]);
    expect((await transaction(fireDueSchedules(10), NOW + 60_000)).value).toEqual([]);
    await transaction(deleteSchedule("every-minute"));
    expect(await refusal(transaction(deleteSchedule("every-minute")))).toBe("SCHEDULE_NOT_FOUND");
  });

  it("keeps a queue's limits in a claim over the same port, and says which one held jobs back", async () => {
    await transaction(submitJobs(Array.from({ length: 6 }, () => newJob())));
    const update = {
      config: { maxRunning: 3, rateLimit: 2, ratePeriodMs: 10_000, ...NO_GROUP_RULES },
      fields: ["maxRunning", "rateLimit", "ratePeriodMs"] as const,
    };
    const configured = await transaction(updateQueueConfig("billing", update));
    expect(configured.value).toEqual(update.config);
    expect(configured.persisted.queueControls).toEqual([{ queue: "billing", paused: false, config: update.config }]);
    const claim = (now: number) =>
      transaction(claimJobs({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 5 }, { maxRecovered: 10 }), now);
    const first = await claim(NOW);
    expect(first.value.leases).toHaveLength(2);
    expect(first.value.heldBack).toEqual({ limit: "rate_limit", until: NOW + 10_000 });
    const second = await claim(NOW + 10_000);
    expect(second.value.leases).toHaveLength(1);
    expect(second.value.heldBack).toEqual({ limit: "max_running" });
  });
});
