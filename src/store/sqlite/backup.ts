/**
 * `leasequeue backup` for SQLite: a consistent copy of a database that a
 * server may be writing to at the same time.
 */
import { renameSync, rmSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { JOB_STATES, type JobState } from "../../domain/job.js";
import { DatabaseRefusal } from "../database/database-refusal.js";
import {
  createEmptyFile,
  fileBytes,
  fsyncDirectory,
  fsyncFile,
  openExistingReadOnly,
  sameFile,
  temporaryPathBeside,
} from "./database-file.js";
import { MAINTENANCE_SQL } from "./sql.js";

export interface BackupOptions {
  /** Replace `target` if it exists (atomically: the old file stays whole until the new one is complete). Default false. */
  overwrite?: boolean;
}

export interface BackupResult {
  /** The backup file (absolute). */
  path: string;
  bytes: number;
  schemaVersion: number;
  jobs: Record<JobState, number>;
  totalJobs: number;
}

export function backupDatabase(databasePath: string, targetPath: string, options: BackupOptions = {}): BackupResult {
  const target = resolve(targetPath);
  const source = openExistingReadOnly(databasePath, "database");
  try {
    refuseUnsafeTarget(databasePath, target, options.overwrite === true);
    refuseIfNotLeaseQueue(source, databasePath);
    return copyDatabase(source, target);
  } finally {
    source.close();
  }
}

/**
 * Writes what `source` (an open connection: the backup command's own, or a
 * server's, see lost-file.ts) reads now to `target` as described below:
 * through a `.partial-*` name, fsynced, checked, then renamed.
 *
 * VACUUM INTO writes the copy from one read transaction, i.e. one snapshot
 * of the WAL database: everything committed before the backup began, nothing
 * half of a later commit. In WAL mode a reader never blocks the writer, so
 * the server keeps committing meanwhile (its WAL grows until the backup
 * ends, since a checkpoint cannot pass a reader's snapshot). The copy is a
 * single compact file in rollback-journal mode, with no -wal beside it.
 *
 * Chosen over the online backup API (better-sqlite3's db.backup()): that
 * copies a bounded number of pages per step and restarts from the first page
 * whenever another process writes between steps, so against a busy server it
 * never finishes; copying all pages in one step works but is no faster and
 * leaves a WAL-mode file with free pages.
 *
 * The copy is written to a temporary name beside the target (created empty
 * first, so a directory that takes no new file is refused by name), fsynced
 * (VACUUM INTO does not sync its output), checked (quick_check, schema
 * version, job count), and only then renamed onto the target: a backup
 * interrupted at any point leaves at most a `<file>.partial-*`, never a
 * file under the target name that looks complete.
 */
export function copyDatabase(source: Database.Database, target: string): BackupResult {
  const partial = partialCopyOf(target);
  try {
    source.prepare("VACUUM INTO ?").run(partial);
    return publishCopy(partial, target);
  } finally {
    // Gone once renamed; whatever an interrupted copy left otherwise.
    rmSync(partial, { force: true });
  }
}

/**
 * The same copy, written with SQLite's online backup (db.backup()): a
 * bounded number of pages per step, the event loop free between steps. For
 * a server saving what its connection still reads of a lost file
 * (lost-file.ts), whose event loop must keep answering meanwhile: nothing
 * writes the source then (the server refuses its own writes, and no other
 * process can open a file no path names), so the backup never restarts.
 * The copy is then switched to rollback-journal mode, as VACUUM INTO would
 * have written it, and checked and renamed the same way.
 */
export async function copyDatabaseInSteps(source: Database.Database, target: string): Promise<BackupResult> {
  const partial = partialCopyOf(target);
  try {
    await source.backup(partial);
    const copy = new Database(partial, { fileMustExist: true });
    try {
      copy.pragma("journal_mode = DELETE");
    } finally {
      copy.close();
    }
    return publishCopy(partial, target);
  } finally {
    rmSync(partial, { force: true });
  }
}

/** The temporary file a copy for `target` is written to, created empty beside it (a directory that takes no new file is refused by name). */
function partialCopyOf(target: string): string {
  const partial = temporaryPathBeside(target, "partial");
  createEmptyFile(partial, target);
  return partial;
}

/** A written copy fsynced, checked, then renamed onto `target` (its directory fsynced): a complete file under the target name, or none. */
function publishCopy(partial: string, target: string): BackupResult {
  fsyncFile(partial);
  const facts = verifyCopy(partial, target);
  renameSync(partial, target);
  fsyncDirectory(dirname(target));
  return { path: target, bytes: fileBytes(target), ...facts };
}

function refuseUnsafeTarget(databasePath: string, target: string, overwrite: boolean): void {
  const dir = statSync(dirname(target), { throwIfNoEntry: false });
  if (dir === undefined || !dir.isDirectory()) {
    throw new DatabaseRefusal("BAD_FILE", `cannot write ${target}: the directory ${dirname(target)} does not exist`);
  }
  const existing = statSync(target, { throwIfNoEntry: false });
  if (existing === undefined) return;
  if (sameFile(target, databasePath)) throw new DatabaseRefusal("WOULD_OVERWRITE", `${target} is the database itself`);
  if (!existing.isFile()) throw new DatabaseRefusal("WOULD_OVERWRITE", `${target} exists and is not a file`);
  if (!overwrite) {
    throw new DatabaseRefusal("WOULD_OVERWRITE", `${target} already exists; pass --force to replace it with a new backup`);
  }
}

function refuseIfNotLeaseQueue(db: Database.Database, path: string): void {
  const version = db.pragma("user_version", { simple: true }) as number;
  const tables = (db.prepare(MAINTENANCE_SQL.jobTables).get() as { n: number }).n;
  if (version === 0 || tables !== 3) {
    throw new DatabaseRefusal("BAD_FILE", `${path} is not a LeaseQueue database (schema version ${version}, no jobs table)`);
  }
}

/** Reads the finished copy back: it must pass quick_check; its schema version and jobs are what the backup reports. */
function verifyCopy(partial: string, target: string): Omit<BackupResult, "path" | "bytes"> {
  const copy = openExistingReadOnly(partial, "backup");
  try {
    const verdict = copy.pragma("quick_check", { simple: true });
    if (verdict !== "ok") throw new Error(`the copy written for ${target} fails quick_check: ${String(verdict)}`);
    const jobs = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
    for (const row of copy.prepare(MAINTENANCE_SQL.jobsByState).all() as Array<{ state: JobState; count: number }>) {
      jobs[row.state] = row.count;
    }
    return {
      schemaVersion: copy.pragma("user_version", { simple: true }) as number,
      jobs,
      totalJobs: Object.values(jobs).reduce((a, b) => a + b, 0),
    };
  } finally {
    copy.close();
  }
}
