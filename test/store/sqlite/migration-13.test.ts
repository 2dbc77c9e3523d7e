/**
 * SQLite migration 13 (dependencies) rebuilds `jobs` for its new state
 * CHECK (store/sqlite/migrate.ts Migration.rebuild): a database at version 12
 * keeps its rows, and ends with the same indexes and triggers, statement for
 * statement, as a database created at 13, the fair-queue triggers working.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { migrate } from "../../../src/store/sqlite/migrate.js";
import { MIGRATIONS } from "../../../src/store/sqlite/migrations.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function database(): Database.Database {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-m13-"));
  dirs.push(dir);
  return new Database(join(dir, "jobs.db"));
}

const schema = (db: Database.Database) =>
  db.prepare("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all() as Array<{
    type: string;
    name: string;
    sql: string;
  }>;

describe("SQLite migration 13", () => {
  it("keeps the rows of a version-12 database and ends with the schema of a new one", () => {
    const old = database();
    for (const m of MIGRATIONS.filter((m) => m.version <= 12)) old.exec(m.sql);
    old.pragma("user_version = 12");
    old.exec(
      `INSERT INTO queue_configs (queue, max_running, rate_limit, rate_period_ms, update_time, fair) VALUES ('fair', 0, 0, 1000, 0, 1)`,
    );
    const insert = old.prepare(`INSERT INTO jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
      schedule_time, create_time, update_time, deliveries, group_key, traceparent) VALUES (?, ?, 't', '{"a":1}', 0, ?, 0, 3, 1000, 5, 5, 5, 0, ?, ?)`);
    insert.run("j1", "fair", "queued", "tenant-a", null);
    insert.run("j2", "other", "completed", "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    const before = old.prepare("SELECT * FROM jobs ORDER BY id").all();

    expect(migrate(old)).toEqual([13]);
    const after = old.prepare("SELECT * FROM jobs ORDER BY id").all() as Array<Record<string, unknown>>;
    expect(after).toEqual(
      (before as Array<Record<string, unknown>>).map((row) => ({
        ...row,
        depends_on: null,
        dependency_policy: null,
        deps_total: 0,
        deps_completed: 0,
        deps_failed: 0,
        has_dependents: 0,
      })),
    );
    const fresh = database();
    migrate(fresh);
    expect(schema(old)).toEqual(schema(fresh));
    // The state CHECK takes 'waiting' now, and the fair-queue triggers were made again.
    old.exec("DELETE FROM queue_groups");
    old.prepare("UPDATE jobs SET state = 'waiting' WHERE id = 'j1'").run();
    old.prepare("UPDATE jobs SET state = 'queued', schedule_time = 7 WHERE id = 'j1'").run();
    expect(old.prepare("SELECT due_time FROM queue_groups WHERE queue = 'fair'").get()).toEqual({ due_time: 7 });
    expect(() => old.prepare("UPDATE jobs SET state = 'sleeping' WHERE id = 'j1'").run()).toThrow(/CHECK/);
    old.close();
    fresh.close();
  });
});
