/**
 * Writes imported jobs (store/import/litequeue-mapping.ts) into a LeaseQueue
 * database: all in one transaction, each job with its event, and job_counts
 * adjusted once at the end by the sums, as a commit of the store would,
 * with the queued, retry and running ones added to the queues' activity of
 * the minute of the commit (docs/api.md "Queue activity": the gauges are
 * counted back from the counts, so every count change has its sample).
 * A job whose id is already stored is skipped, so an import run twice adds
 * nothing the second time. The caller holds sole use of the database
 * (exclusive-access.ts): a running server would not announce these events
 * to its streams, nor wake its waiting claims for these jobs.
 */
import { existsSync } from "node:fs";
import type Database from "better-sqlite3";
import type { EventDraft, JobState, StoredJob } from "../../domain/job.js";
import { LEASE_WAIT_BUCKETS, minuteOf } from "../../domain/queue-activity.js";
import { activityValues } from "../rows/activity-columns.js";
import { assertSchemaNotNewer } from "../database/schema-version.js";
import { openExistingReadOnly, refuseUnwritableDirectory } from "./database-file.js";
import { takeExclusiveAccess } from "./exclusive-access.js";
import { LATEST_SCHEMA_VERSION, migrate } from "./migrate.js";
import { jobRow } from "./rows.js";
import { MAINTENANCE_SQL, SQL } from "./sql.js";

export type ImportOutcome = "imported" | "present" | "present-in-another-queue";

export interface JobImport {
  /** Stores the job and its event unless a job with its id exists (in dry run: only says which). */
  add(job: StoredJob, event: EventDraft): ImportOutcome;
  /** Commits everything added (a dry run has nothing to commit). */
  commit(): void;
  /** Writes nothing: rolls back everything added. */
  abort(): void;
}

/**
 * Starts an import into `db`. `write: false` (a dry run) only reads; `db`
 * may then be undefined, for a database that does not exist yet.
 */
export function startJobImport(db: Database.Database | undefined, options: { write: boolean }): JobImport {
  if (options.write && db === undefined) throw new Error("an import that writes needs a database");
  const queueOf = db?.prepare(MAINTENANCE_SQL.queueOfJob).pluck();
  const insertJob = options.write ? db!.prepare(SQL.insertJob) : undefined;
  const insertEvent = options.write ? db!.prepare(MAINTENANCE_SQL.insertEvent) : undefined;
  const counts = new Map<string, { queue: string; state: JobState; delta: number }>();
  if (options.write) db!.exec("BEGIN IMMEDIATE");
  return {
    add(job, event) {
      const storedQueue = queueOf?.get(job.id) as string | undefined;
      if (storedQueue !== undefined) return storedQueue === job.queue ? "present" : "present-in-another-queue";
      if (insertJob !== undefined && insertEvent !== undefined) {
        insertJob.run(jobRow(job));
        const e = event;
        insertEvent.run(e.jobId, e.queue, e.kind, e.fromState, e.toState, e.eventTime, e.workerId, e.attempt, e.message, e.groupKey);
        const key = `${job.queue}\0${job.state}`;
        const entry = counts.get(key) ?? { queue: job.queue, state: job.state, delta: 0 };
        entry.delta++;
        counts.set(key, entry);
      }
      return "imported";
    },
    commit() {
      if (!options.write) return;
      const adjust = db!.prepare(SQL.adjustCount);
      for (const c of counts.values()) adjust.run(c.queue, c.state, c.delta);
      const activity = db!.prepare(SQL.addActivity);
      const minute = minuteOf(Date.now());
      const gauges = new Map<string, { queued: number; retry: number; running: number }>();
      for (const c of counts.values()) {
        if (c.state !== "queued" && c.state !== "retry" && c.state !== "running") continue;
        const g = gauges.get(c.queue) ?? { queued: 0, retry: 0, running: 0 };
        g[c.state] += c.delta;
        gauges.set(c.queue, g);
      }
      for (const [queue, g] of gauges) {
        const values = activityValues({
          queue,
          minute,
          completed: 0,
          failed: 0,
          ...g,
          leaseWaits: new Array<number>(LEASE_WAIT_BUCKETS).fill(0),
        });
        activity.run(queue, minute, ...values);
      }
      db!.exec("COMMIT");
    },
    abort() {
      if (options.write && db!.inTransaction) db!.exec("ROLLBACK");
    },
  };
}

export interface ImportTargetDatabase {
  /** The connection to import into; undefined in a dry run when there is no LeaseQueue database yet. */
  db: Database.Database | undefined;
  release(): void;
}

/**
 * The database to import into. Writing: sole use of it (created and
 * migrated when needed; a newer schema is refused), after refusing by name a
 * directory that takes no new file (the lock file, the database and its -wal
 * are created there). Dry run: a read-only look, which creates and migrates
 * nothing but refuses a newer schema as the real run would.
 */
export function openImportTarget(path: string, options: { write: boolean }): ImportTargetDatabase {
  if (options.write) {
    refuseUnwritableDirectory(path);
    const access = takeExclusiveAccess(path, { create: true });
    try {
      migrate(access.db!);
    } catch (err) {
      access.release();
      throw err;
    }
    return { db: access.db, release: () => access.release() };
  }
  if (!existsSync(path)) return { db: undefined, release: () => {} };
  const db = openExistingReadOnly(path, "database");
  try {
    assertSchemaNotNewer(path, db.pragma("user_version", { simple: true }) as number, LATEST_SCHEMA_VERSION);
    if ((db.prepare(MAINTENANCE_SQL.jobTables).get() as { n: number }).n !== 3) {
      db.close();
      return { db: undefined, release: () => {} };
    }
  } catch (err) {
    db.close();
    throw err;
  }
  return { db, release: () => db.close() };
}
