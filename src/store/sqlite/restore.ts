/**
 * `leasequeue restore` for SQLite: replaces the database with a backup, with
 * the server stopped.
 */
import { existsSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { DatabaseReport } from "../database/database-check.js";
import { DatabaseRefusal } from "../database/database-refusal.js";
import {
  createEmptyFile,
  datedPathBeside,
  fileBytes,
  fsyncDirectory,
  fsyncFile,
  openExistingReadOnly,
  sameFile,
  temporaryPathBeside,
} from "./database-file.js";
import { takeExclusiveAccess } from "./exclusive-access.js";
import { inspectDatabase } from "./inspect.js";

export interface RestoreResult {
  /** The database (absolute), now the restored copy. */
  path: string;
  /** The backup restored from (absolute). */
  from: string;
  bytes: number;
  /** What the check of the backup found (its schema version, jobs, notes). */
  backup: DatabaseReport;
  /** Where the replaced database was kept, or undefined when there was none. */
  replacedKeptAs: string | undefined;
  /** Set when the replaced file was not a readable database (SQLite's complaint). */
  replacedUnreadable: string | undefined;
}

export interface RestoreOptions {
  /** Names the kept copy of the replaced database. Default: now. */
  now?: Date;
}

/**
 * Restores in five steps:
 * 1. The backup is checked in full (inspect.ts: integrity_check, a LeaseQueue
 *    schema no newer than this release, job_counts equal to the jobs); any
 *    problem refuses it and nothing else happens.
 * 2. A temporary file is created empty beside the database (same
 *    directory, so the final rename is atomic), before anything else is
 *    created there (the lock file, a -wal): a directory that takes no new
 *    file is refused by name (database-file.ts) and nothing is written.
 * 3. Sole use of the database is taken (exclusive-access.ts) and given back
 *    at once, so that a running server is reported before the long part.
 * 4. The backup is copied with VACUUM INTO into the temporary file, fsynced
 *    and read back (quick_check, the same schema version). A backup that is
 *    itself a WAL database with a -wal beside it is copied whole this way,
 *    which a byte copy would not do.
 * 5. Sole use is taken again, now for the swap. The exclusive connection is
 *    closed first: as the last user it checkpoints the old database's WAL
 *    into the old file and deletes it. The old database moves aside with
 *    whatever -wal or -journal is left (a pair SQLite can still open), its
 *    stale -shm is deleted (a -wal or -shm left at the path would otherwise
 *    be applied to the new file), and the copy is renamed onto the path.
 *    The lock file stays held throughout, so no server starts in between.
 */
export function restoreDatabase(backupPath: string, databasePath: string, options: RestoreOptions = {}): RestoreResult {
  const from = resolve(backupPath);
  const path = resolve(databasePath);
  if (sameFile(from, path)) throw new DatabaseRefusal("WOULD_OVERWRITE", `${from} is the database itself`);
  if (!statSync(dirname(path), { throwIfNoEntry: false })?.isDirectory()) {
    throw new DatabaseRefusal("BAD_FILE", `cannot restore to ${path}: the directory ${dirname(path)} does not exist`);
  }
  const backup = inspectDatabase(from, { what: "backup" });
  if (backup.problems.length > 0) {
    throw new DatabaseRefusal("BAD_FILE", `backup ${from} cannot be restored:\n${backup.problems.map((p) => `  - ${p}`).join("\n")}`);
  }
  let staged: string | undefined = temporaryPathBeside(path, "restoring");
  createEmptyFile(staged, path);
  try {
    takeExclusiveAccess(path, { allowUnreadable: true }).release();
    copyVerified(from, staged, backup.schemaVersion);
    const access = takeExclusiveAccess(path, { allowUnreadable: true });
    try {
      access.db?.close();
      const replacedKeptAs = moveAside(path, options.now ?? new Date());
      renameSync(staged, path);
      staged = undefined;
      fsyncDirectory(dirname(path));
      return { path, from, bytes: fileBytes(path), backup, replacedKeptAs, replacedUnreadable: access.unreadable };
    } finally {
      access.release();
    }
  } finally {
    if (staged !== undefined) rmSync(staged, { force: true });
  }
}

/** Copies the backup into `staged` (an empty file) in one snapshot, makes it durable, and reads it back. */
function copyVerified(from: string, staged: string, schemaVersion: number): void {
  const source = openExistingReadOnly(from, "backup");
  try {
    source.prepare("VACUUM INTO ?").run(staged);
  } finally {
    source.close();
  }
  fsyncFile(staged);
  const copy = openExistingReadOnly(staged, "copy of the backup");
  try {
    const verdict = copy.pragma("quick_check", { simple: true });
    const version = copy.pragma("user_version", { simple: true });
    if (verdict !== "ok" || version !== schemaVersion) {
      throw new Error(`the copy of ${from} does not read back (quick_check ${String(verdict)}, schema version ${String(version)})`);
    }
  } finally {
    copy.close();
  }
}

/**
 * Renames the database and what is left of its -wal or -journal to
 * `<db>.replaced-<time>` (+ the same suffixes), and deletes its -shm.
 * Returns the new name of the database file, or undefined if there was none.
 */
function moveAside(path: string, now: Date): string | undefined {
  const aside = datedPathBeside(path, "replaced", now);
  const hadDatabase = existsSync(path);
  for (const suffix of ["", "-wal", "-journal"]) {
    if (existsSync(path + suffix)) renameSync(path + suffix, aside + suffix);
  }
  rmSync(`${path}-shm`, { force: true });
  return hadDatabase ? aside : undefined;
}
