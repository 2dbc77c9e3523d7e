/**
 * Applying the numbered migrations (migrations.ts) to a database: at every
 * store open, and by `leasequeue migrate` through store/engine.ts.
 */
import Database from "better-sqlite3";
import { assertSchemaNotNewer } from "../database/schema-version.js";
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
      if (m.rebuild !== undefined) rebuildTable(db, m.rebuild.table, m.rebuild.create);
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
    applied.push(m.version);
  }
  return applied;
}

/** Migration.rebuild: `create` makes `<table>_rebuilt`, which replaces `table` with its rows, indexes and triggers. */
function rebuildTable(db: Database.Database, table: string, create: string): void {
  const columns = (db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name).join(", ");
  const kept = db
    .prepare("SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name")
    .all(table) as Array<{ sql: string }>;
  db.exec(create);
  db.exec(`INSERT INTO ${table}_rebuilt (${columns}) SELECT ${columns} FROM ${table}`);
  db.exec(`DROP TABLE ${table}`);
  db.exec(`ALTER TABLE ${table}_rebuilt RENAME TO ${table}`);
  for (const { sql } of kept) db.exec(sql);
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
