/**
 * Where the upper floors (app.ts, cli.ts, commands/) reach a database
 * without knowing its engine: open a store, migrate, and hold the database
 * for a server. Only SQLite exists today; a PostgreSQL location joins
 * `DatabaseLocation` and each function picks the engine by its kind.
 */
import type { Clock } from "../domain/clock.js";
import { acquireDatabaseLock } from "./sqlite/database-lock.js";
import { migrateFile } from "./sqlite/migrate.js";
import { openSqliteStore } from "./sqlite/sqlite-store.js";
import type { Store } from "./store.js";

/** Which database, and how to use it. */
export type DatabaseLocation = {
  engine: "sqlite";
  /** The database file. */
  path: string;
  /** "full": every commit is fsynced before it is answered; "normal": a power loss may take the latest ones. */
  synchronous: "full" | "normal";
};

/** How long a server waits for another process's hold on a SQLite file before it refuses to start. */
export const HOLD_WAIT_MS = 5000;

/** A database held for one server until released. */
export interface DatabaseHold {
  /** Gives the database up; idempotent. */
  release(): void;
}

/** Opens a store on the database (migrating it first). */
export function openStore(location: DatabaseLocation, clock: Clock): Store {
  return openSqliteStore({ path: location.path, clock, synchronous: location.synchronous });
}

/** Applies pending migrations; says which and the schema version reached. Refuses (DatabaseRefusal) a newer schema. */
export function migrateDatabase(location: DatabaseLocation): { applied: number[]; version: number } {
  return migrateFile(location.path);
}

/**
 * Holds the database for a server, for as long as it runs. SQLite: one
 * server per file. SQLite has one writer at a time, so a second server
 * would add no capacity, only waits for the write lock that block its
 * event loop (better-sqlite3 waits synchronously); and `restore` and
 * `import-litequeue` must refuse to run under a server. So the server
 * takes `<db>.lock` (sqlite/database-lock.ts), waiting up to HOLD_WAIT_MS
 * for a restore or an import to finish, else refusing with DatabaseRefusal
 * IN_USE. Stores themselves may open a file several times (their commits
 * are announced across instances, see Store).
 */
export function holdDatabase(location: DatabaseLocation, waitMs = HOLD_WAIT_MS): DatabaseHold {
  if (location.path === ":memory:") return { release() {} };
  return acquireDatabaseLock(location.path, waitMs);
}
