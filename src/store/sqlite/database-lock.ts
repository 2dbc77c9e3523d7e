/**
 * "A LeaseQueue process owns this database": a server holds this lock from
 * open to close; `restore` and `import-litequeue` hold it while they work.
 * So a restore or import refuses to run under a server, and a server cannot
 * start (it waits, then refuses) while one of them runs.
 */
import Database from "better-sqlite3";
import { DatabaseRefusal } from "../database/database-refusal.js";
import { refuseUnwritableDirectory } from "./database-file.js";

export interface DatabaseLock {
  /** The lock file, `<database>.lock`. */
  readonly path: string;
  /** Gives the lock up; idempotent. */
  release(): void;
}

export function lockFileOf(databasePath: string): string {
  return `${databasePath}.lock`;
}

/**
 * Takes the lock of `databasePath`, waiting up to `waitMs` for its holder to
 * let go; throws DatabaseRefusal (IN_USE) when it does not.
 *
 * The lock is SQLite's own file locking on a separate empty file, `<db>.lock`:
 * its owner keeps a write transaction open on it (BEGIN IMMEDIATE, a
 * RESERVED lock) for as long as it lives. Node has no flock; these POSIX
 * locks are released by the kernel when the process ends, however it ends,
 * so a crashed server never leaves a stale lock, and SQLite also makes them
 * conflict between connections of one process. With journal_mode=MEMORY
 * nothing is ever written: the file stays empty.
 *
 * Why a separate file, when an open WAL database already holds a SHARED lock
 * on its file that an exclusive attempt runs into (see exclusive-access.ts)?
 * Those locks belong to the file's inode. A restore renames a new file over
 * the path; a server starting at that moment could open the old inode,
 * wait for the restore's lock, and then run on a file nobody can see any
 * more. This lock belongs to the path, so it also covers the swap.
 */
export function acquireDatabaseLock(databasePath: string, waitMs: number): DatabaseLock {
  const path = lockFileOf(databasePath);
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { timeout: waitMs });
    db.pragma("journal_mode = MEMORY");
    db.exec("BEGIN IMMEDIATE");
  } catch (err) {
    db?.close();
    if (err instanceof Database.SqliteError && err.code.startsWith("SQLITE_BUSY")) {
      throw new DatabaseRefusal(
        "IN_USE",
        `${databasePath} is in use by another LeaseQueue process (a server, a restore or an import holds ${path}); stop it first`,
      );
    }
    // A directory that takes no new file (permissions, a read-only file system) is named, as the commands do.
    if (err instanceof Database.SqliteError && err.code.startsWith("SQLITE_CANTOPEN")) refuseUnwritableDirectory(databasePath);
    throw new Error(`cannot take the lock ${path}: ${(err as Error).message}`, { cause: err });
  }
  const held = db;
  return {
    path,
    release() {
      if (held.open) held.close();
    },
  };
}
