/**
 * `leasequeue check` for SQLite: gathers the facts of store/database/database-check.ts
 * from a database file in one read transaction, so a check of a live
 * database (a server writing meanwhile) compares counts of one snapshot. The
 * connection is read-only: checking never changes the file.
 */
import type Database from "better-sqlite3";
import { reportOn, type DatabaseReport, type QueueStateCount } from "../database/database-check.js";
import { openExistingReadOnly } from "./database-file.js";
import { LATEST_SCHEMA_VERSION } from "./migrate.js";
import { MAINTENANCE_SQL } from "./sql.js";

export interface InspectOptions {
  /** PRAGMA quick_check instead of integrity_check: skips comparing indexes with their tables (much faster). Default false. */
  quick?: boolean;
  /** Names the file in messages. Default "database". */
  what?: string;
}

export function inspectDatabase(path: string, options: InspectOptions = {}): DatabaseReport {
  const db = openExistingReadOnly(path, options.what ?? "database");
  try {
    db.exec("BEGIN");
    // Nothing to commit: closing ends the read transaction (a COMMIT would
    // only repeat the complaint of a corrupt page already reported).
    return reportOn(gatherFacts(db, path, options.quick === true));
  } finally {
    db.close();
  }
}

function gatherFacts(db: Database.Database, path: string, quick: boolean) {
  const integrityProblems: string[] = [];
  /** Runs a read; a failure (a corrupt page) becomes an integrity problem instead of ending the check. */
  const attempt = <T>(what: string, read: () => T, fallback: T): T => {
    try {
      return read();
    } catch (err) {
      integrityProblems.push(`${what} failed: ${(err as Error).message}`);
      return fallback;
    }
  };
  const schemaVersion = db.pragma("user_version", { simple: true }) as number;
  const verdict = attempt(
    quick ? "quick_check" : "integrity_check",
    () => db.pragma(quick ? "quick_check" : "integrity_check", { simple: false }) as Array<Record<string, string>>,
    [],
  );
  for (const row of verdict) {
    const line = Object.values(row)[0];
    if (line !== "ok") integrityProblems.push(line);
  }
  const hasJobTables = attempt("reading the schema", () => (db.prepare(MAINTENANCE_SQL.jobTables).get() as { n: number }).n === 3, false);
  const counts = (sql: string) => attempt("counting jobs", () => db.prepare(sql).all() as QueueStateCount[], []);
  return {
    path,
    schemaVersion,
    latestSchemaVersion: LATEST_SCHEMA_VERSION,
    integrityProblems,
    hasJobTables,
    recordedCounts: hasJobTables ? counts(MAINTENANCE_SQL.recordedCounts) : [],
    actualCounts: hasJobTables ? counts(MAINTENANCE_SQL.actualCounts) : [],
    events: hasJobTables ? attempt("counting events", () => (db.prepare(MAINTENANCE_SQL.eventCount).get() as { n: number }).n, 0) : 0,
  };
}
