/**
 * Sole use of a database file, for the commands that must not share it
 * (restore replaces the file, import writes one long transaction that a
 * running server would not announce to its streams).
 */
import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import { DatabaseRefusal } from "../database/database-refusal.js";
import { acquireDatabaseLock, type DatabaseLock } from "./database-lock.js";

export interface ExclusiveAccess {
  readonly lock: DatabaseLock;
  /** The connection holding the file's EXCLUSIVE lock; undefined when there was no database file yet (or it is unreadable). */
  readonly db: Database.Database | undefined;
  /** Set (with SQLite's complaint) when `allowUnreadable` let through a file that is not a readable database. */
  readonly unreadable: string | undefined;
  /** Closes the connection (if still open) and releases the lock. */
  release(): void;
}

export interface ExclusiveAccessOptions {
  /** Create the database (in WAL mode) when it does not exist. Default false. */
  create?: boolean;
  /**
   * Accept a file that SQLite cannot read as a database (restore replaces
   * it anyway); then only the lock file vouches that no server uses it,
   * which holds for every server that could open it. Default false.
   */
  allowUnreadable?: boolean;
}

/**
 * Takes sole use of `path`, or throws DatabaseRefusal (IN_USE) naming who may hold it.
 *
 * Two locks, both taken without waiting:
 * - the LeaseQueue lock `<db>.lock` (database-lock.ts), which every server
 *   of this release holds while it runs and which covers the path;
 * - an EXCLUSIVE lock on the database file itself, taken by a connection in
 *   locking_mode=EXCLUSIVE. In WAL mode every open connection keeps a SHARED
 *   lock on the file between transactions (SQLite uses it to find the last
 *   connection to close), so this fails while anyone has the file open: a
 *   server of an older release that knows no lock file, a `backup` or a
 *   `check` still running, any other SQLite client. In EXCLUSIVE locking
 *   mode the connection keeps the WAL index in its own memory, never in
 *   the `-shm` file, and holds the lock until it closes.
 */
export function takeExclusiveAccess(path: string, options: ExclusiveAccessOptions = {}): ExclusiveAccess {
  const lock = acquireDatabaseLock(path, 0);
  let db: Database.Database | undefined;
  let unreadable: string | undefined;
  try {
    if (existsSync(path) || options.create === true) db = openExclusively(path);
  } catch (err) {
    if (options.allowUnreadable === true && isUnreadable(err)) {
      unreadable = `${(err as Error & { code: string }).code}: ${(err as Error).message}`;
    } else {
      lock.release();
      throw err;
    }
  }
  return {
    lock,
    db,
    unreadable,
    release() {
      if (db?.open) db.close();
      lock.release();
    },
  };
}

function openExclusively(path: string): Database.Database {
  const db = new Database(path, { timeout: 0 });
  try {
    db.pragma("locking_mode = EXCLUSIVE");
    // A new file becomes a WAL database, as the server would make it.
    if (db.pragma("journal_mode", { simple: true }) !== "wal") db.pragma("journal_mode = WAL");
    db.exec("BEGIN EXCLUSIVE");
    db.exec("COMMIT");
    return db;
  } catch (err) {
    db.close();
    if (err instanceof Database.SqliteError && err.code.startsWith("SQLITE_BUSY")) {
      throw new DatabaseRefusal(
        "IN_USE",
        `${path} is open in another process (a LeaseQueue server of an older release, a backup or check still running, ` +
          `or another SQLite client); stop it first`,
      );
    }
    throw err;
  }
}

function isUnreadable(err: unknown): boolean {
  return err instanceof Database.SqliteError && /^SQLITE_(NOTADB|CORRUPT)/.test(err.code);
}
