/**
 * Where the upper floors (app.ts, cli.ts, commands/) reach a database
 * without knowing its engine: open a store, migrate, and hold the database
 * for a server. `DatabaseLocation` names the engine; each function picks
 * the engine by its kind.
 */
import pg from "pg";
import type { Clock } from "../domain/clock.js";
import { migratePostgres } from "./postgres/migrate.js";
import { openPgStore } from "./postgres/pg-store.js";
import { clientConfig } from "./postgres/pool.js";
import { acquireDatabaseLock } from "./sqlite/database-lock.js";
import type { DatabaseFileReport } from "./sqlite/lost-file.js";

export type { DatabaseFileReport };
import { migrateFile } from "./sqlite/migrate.js";
import { openSqliteStore } from "./sqlite/sqlite-store.js";
import type { Store } from "./store.js";

/** Which database, and how to use it. */
export type DatabaseLocation =
  | {
      engine: "sqlite";
      /** The database file. */
      path: string;
      /** "full": every commit is fsynced before it is answered; "normal": a power loss may take the latest ones. */
      synchronous: "full" | "normal";
    }
  | {
      engine: "postgres";
      /** postgres:// URL, password included: never log it (config.ts redactDatabaseUrl). */
      url: string;
      schema: string;
      poolSize: number;
      /** statement_timeout of each connection in ms; 0: none. */
      statementTimeoutMs: number;
    };

/** The settings that name a database (config.ts Config has them). */
export interface DatabaseSettings {
  databasePath: string;
  sqliteSynchronous: "full" | "normal";
  postgres?: { url: string; schema: string; poolSize: number; statementTimeoutMs: number };
}

/** The database the settings name: PostgreSQL when a URL is set, else the SQLite file. */
export function databaseLocation(settings: DatabaseSettings): DatabaseLocation {
  if (settings.postgres !== undefined) {
    const { url, schema, poolSize, statementTimeoutMs } = settings.postgres;
    return { engine: "postgres", url, schema, poolSize, statementTimeoutMs };
  }
  return { engine: "sqlite", path: settings.databasePath, synchronous: settings.sqliteSynchronous };
}

/** How long a server waits for another process's hold on a SQLite file before it refuses to start. */
export const HOLD_WAIT_MS = 5000;

/** A database held for one server until released. */
export interface DatabaseHold {
  /** Gives the database up; idempotent. */
  release(): void;
}

export interface OpenStoreOptions {
  /** PostgreSQL: told when the listening connection fails (it reconnects by itself). */
  onListenerError?(error: Error, retryInMs: number): void;
  /** PostgreSQL: the database's clock as a test moves it (default: the database's own, read with a query). */
  databaseClock?: Clock;
  /** PostgreSQL: a measurement of the database's clock failed or was not trusted (the store keeps its last offset). */
  onClockUnmeasured?(reason: string, offsetMs: number): void;
  /** SQLite: the host's wall clock jumped against its monotonic clock by more than a second. */
  onClockJump?(jumpMs: number): void;
  /** SQLite: the database file was removed, renamed or replaced, saved, or is back (sqlite/lost-file.ts). */
  onDatabaseFile?(report: DatabaseFileReport): void;
}

/**
 * Opens a store on the database (migrating it first). `clock` is the
 * host's; the store's own clock (Store.clock) is what the rest of the
 * server uses: on PostgreSQL it follows the database's.
 */
export async function openStore(location: DatabaseLocation, clock: Clock, options: OpenStoreOptions = {}): Promise<Store> {
  if (location.engine === "sqlite")
    return openSqliteStore({
      path: location.path,
      clock,
      synchronous: location.synchronous,
      ...(options.onClockJump !== undefined ? { onClockJump: (jumpMs: number) => options.onClockJump?.(jumpMs) } : {}),
      onDatabaseFile: (report) => options.onDatabaseFile?.(report),
    });
  return openPgStore({
    url: location.url,
    schema: location.schema,
    poolSize: location.poolSize,
    statementTimeoutMs: location.statementTimeoutMs,
    clock,
    ...(options.databaseClock !== undefined ? { databaseClock: options.databaseClock } : {}),
    onListenerError: (error, retryInMs) => options.onListenerError?.(error, retryInMs),
    onClockUnmeasured: (reason, offsetMs) => options.onClockUnmeasured?.(reason, offsetMs),
  });
}

/** Applies pending migrations; says which and the schema version reached. Refuses (DatabaseRefusal) a newer schema. */
export async function migrateDatabase(location: DatabaseLocation): Promise<{ applied: number[]; version: number }> {
  if (location.engine === "sqlite") return migrateFile(location.path);
  const client = new pg.Client(clientConfig({ ...location, applicationName: "leasequeue-migrate" }));
  await client.connect();
  try {
    const { applied, version } = await migratePostgres(client, location.schema);
    return { applied, version };
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Holds the database for a server, for as long as it runs.
 *
 * SQLite: one server per file. SQLite has one writer at a time, so a second
 * server would add no capacity, only waits for the write lock that block
 * its event loop (better-sqlite3 waits synchronously); and `restore` and
 * `import-litequeue` must refuse to run under a server. So the server
 * takes `<db>.lock` (sqlite/database-lock.ts), waiting up to HOLD_WAIT_MS
 * for a restore or an import to finish, else refusing with DatabaseRefusal
 * IN_USE. Stores themselves may open a file several times (their commits
 * are announced across instances, see Store).
 *
 * PostgreSQL: nothing to hold; any number of servers share a schema.
 */
export function holdDatabase(location: DatabaseLocation, waitMs = HOLD_WAIT_MS): DatabaseHold {
  if (location.engine === "postgres" || location.path === ":memory:") return { release() {} };
  return acquireDatabaseLock(location.path, waitMs);
}

/** How a location is named in logs and messages (a URL without its password). */
export function describeLocation(location: DatabaseLocation, redact: (url: string) => string): Record<string, string> {
  return location.engine === "sqlite"
    ? { engine: "sqlite", path: location.path, synchronous: location.synchronous }
    : { engine: "postgres", url: redact(location.url), schema: location.schema, poolSize: String(location.poolSize) };
}
