/**
 * Applying the numbered migrations (migrations.ts) to a database: at every
 * store open, and by `leasequeue migrate` through store/engine.ts.
 */
import Database from "better-sqlite3";
import { assertSchemaNotNewer } from "../schema-version.js";
import { MIGRATIONS } from "./migrations.js";

/** The schema version this release's migrations end at. */
export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/**
 * Applies pending migrations; returns the versions applied. Refuses
 * (DatabaseRefusal SCHEMA_TOO_NEW) a database that a newer release has
 * migrated past the last migration this one knows.
 */
export function migrate(db: Database.Database): number[] {
  const current = db.pragma("user_version", { simple: true }) as number;
  assertSchemaNotNewer(db.name, current, LATEST_SCHEMA_VERSION);
  const applied: number[] = [];
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
    applied.push(m.version);
  }
  return applied;
}

/** Opens (or creates) the database file in WAL mode, migrates it and closes it again. */
export function migrateFile(path: string, busyTimeoutMs = 5000): { applied: number[]; version: number } {
  const db = new Database(path, { timeout: busyTimeoutMs });
  try {
    db.pragma("journal_mode = WAL");
    const applied = migrate(db);
    return { applied, version: db.pragma("user_version", { simple: true }) as number };
  } finally {
    db.close();
  }
}
