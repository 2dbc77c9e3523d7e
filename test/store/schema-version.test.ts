/**
 * The schema-version rules (store/database/schema-version.ts): a newer release
 * migrates an older database; an older release refuses a newer one, with a
 * clear message, and changes nothing. And the hold that keeps one server
 * at a time on a database file (store/engine.ts, sqlite/database-lock.ts),
 * while stores may open it several times.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/app.js";
import { resolveConfig } from "../../src/config/config.js";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import { DatabaseRefusal } from "../../src/store/database/database-refusal.js";
import { holdDatabase } from "../../src/store/engine.js";
import { takeExclusiveAccess } from "../../src/store/sqlite/exclusive-access.js";
import { MIGRATIONS } from "../../src/store/sqlite/migrations.js";
import { LATEST_SCHEMA_VERSION } from "../../src/store/sqlite/migrate.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { runCli } from "../helpers/process.js";
import { newJob } from "./contract/helpers.js";

let dir: string;
const stores: SqliteStore[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-schema-"));
});

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(path: string, busyTimeoutMs = 0): SqliteStore {
  const store = openSqliteStore({ path, clock: new ManualClock(), busyTimeoutMs });
  stores.push(store);
  return store;
}

function refusal(run: () => unknown): DatabaseRefusal {
  try {
    run();
  } catch (err) {
    if (err instanceof DatabaseRefusal) return err;
    throw err;
  }
  throw new Error("expected a DatabaseRefusal");
}

const ID = "019ad5a2-7b3c-7def-8123-456789abcdef";

/** A database as the first release left it: migration 1 only, one queued job. */
function versionOneDatabase(path: string): void {
  const db = new Database(path);
  try {
    db.pragma("journal_mode = WAL");
    db.exec(MIGRATIONS.find((m) => m.version === 1)!.sql);
    db.pragma("user_version = 1");
    db.prepare(
      `INSERT INTO jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
         schedule_time, create_time, update_time, deliveries) VALUES (?, 'billing', 'invoice', '{"n":1}', 0, 'queued', 0, 3, 15000, 1, 1, 1, 0)`,
    ).run(ID);
    db.prepare("INSERT INTO job_counts (queue, state, count) VALUES ('billing', 'queued', 1)").run();
  } finally {
    db.close();
  }
}

function userVersion(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.pragma("user_version", { simple: true }) as number;
  } finally {
    db.close();
  }
}

describe("schema versions", () => {
  it("a newer release migrates an older database at open, keeping its jobs", async () => {
    const path = join(dir, "jobs.db");
    versionOneDatabase(path);
    const store = open(path);
    expect(userVersion(path)).toBe(LATEST_SCHEMA_VERSION);
    expect(await store.getJob(ID)).toMatchObject({ id: ID, queue: "billing", state: "queued", payloadJson: '{"n":1}' });
    expect((await store.queueCounts())[0]?.counts.queued).toBe(1);
  });

  it("an older release refuses a newer database with a message saying what to do, and changes nothing", async () => {
    const path = join(dir, "jobs.db");
    await open(path).close();
    stores.pop();
    const db = new Database(path);
    db.pragma(`user_version = ${LATEST_SCHEMA_VERSION + 1}`);
    db.close();

    const err = refusal(() => open(path));
    expect(err.reason).toBe("SCHEMA_TOO_NEW");
    expect(err.message).toBe(
      `${path} has schema version ${LATEST_SCHEMA_VERSION + 1}, newer than this LeaseQueue release knows (up to ${LATEST_SCHEMA_VERSION}): ` +
        "a newer release migrated it. Run that release (or a later one), or restore a backup taken before the upgrade.",
    );
    expect(userVersion(path)).toBe(LATEST_SCHEMA_VERSION + 1);
  });

  it("serve and migrate exit 1 with that message", async () => {
    const path = join(dir, "jobs.db");
    versionOneDatabase(path);
    const db = new Database(path);
    db.pragma(`user_version = ${LATEST_SCHEMA_VERSION + 1}`);
    db.close();
    for (const args of [["migrate"], ["serve", "--port", "0", "--metrics-port", "0"]]) {
      const r = await runCli([...args, "--db", path]);
      expect(r.code, r.stdout).toBe(1);
      expect(r.stderr).toContain(`has schema version ${LATEST_SCHEMA_VERSION + 1}, newer than this LeaseQueue release knows`);
      expect(r.stderr).not.toContain("    at ");
    }
    expect(userVersion(path)).toBe(LATEST_SCHEMA_VERSION + 1);
  });
});

describe("one server per database file", () => {
  const quietly = { log: silentLogger, databaseHoldWaitMs: 0 };
  const configOf = (path: string) => resolveConfig({ db: path, port: "0", "metrics-port": "0" }, {});

  async function startRefusal(path: string): Promise<DatabaseRefusal> {
    const err = await startServer(configOf(path), quietly).then(
      async (server) => {
        await server.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    if (err instanceof DatabaseRefusal) return err;
    throw new Error(`expected the server to refuse to start, got ${String(err)}`);
  }

  it("refuses to start in a directory that takes no new file, naming the directory", async () => {
    // sysfs refuses new files even for root.
    const err = await startRefusal("/sys/jobs.db");
    expect(err.reason).toBe("BAD_FILE");
    expect(err.message).toBe("cannot write /sys/jobs.db: the directory /sys is not writable (EACCES)");
  });

  it("refuses a second server on the file while the first runs, and starts one once it stopped", async () => {
    const path = join(dir, "jobs.db");
    const first = await startServer(configOf(path), quietly);
    const err = await startRefusal(path).finally(() => first.close());
    expect(err.reason).toBe("IN_USE");
    expect(err.message).toBe(
      `${path} is in use by another LeaseQueue process (a server, a restore or an import holds ${path}.lock); stop it first`,
    );
    const again = await startServer(configOf(path), quietly);
    await again.close();
  });

  it("a start refused for the schema lets go of the hold: the next one is refused for the same reason, not as in use", async () => {
    const path = join(dir, "jobs.db");
    versionOneDatabase(path);
    const db = new Database(path);
    db.pragma(`user_version = ${LATEST_SCHEMA_VERSION + 1}`);
    db.close();
    expect((await startRefusal(path)).reason).toBe("SCHEMA_TOO_NEW");
    expect((await startRefusal(path)).reason).toBe("SCHEMA_TOO_NEW");
  });

  it("stores open the file beside a server's hold (as leasequeue prune does), while sole use is refused", async () => {
    const path = join(dir, "jobs.db");
    const hold = holdDatabase({ engine: "sqlite", path, synchronous: "normal" }, 0);
    try {
      const store = open(path);
      await store.submit([newJob()]);
      expect(refusal(() => takeExclusiveAccess(path)).message).toContain(`${path}.lock`);
      expect(refusal(() => holdDatabase({ engine: "sqlite", path, synchronous: "normal" }, 0)).reason).toBe("IN_USE");
    } finally {
      hold.release();
    }
  });

  it("sole use is refused while a store, or a plain SQLite connection, has the file open", async () => {
    const path = join(dir, "jobs.db");
    const store = open(path);
    expect(refusal(() => takeExclusiveAccess(path)).message).toContain("is open in another process");
    await store.close();
    stores.pop();

    const other = new Database(path);
    other.prepare("SELECT count(*) FROM jobs").get();
    try {
      expect(refusal(() => takeExclusiveAccess(path)).message).toContain("is open in another process");
    } finally {
      other.close();
    }
    const access = takeExclusiveAccess(path);
    try {
      // While it is held, neither a store nor a server can open the database.
      expect(refusal(() => open(path)).reason).toBe("IN_USE");
      expect((await startRefusal(path)).reason).toBe("IN_USE");
    } finally {
      access.release();
    }
    open(path);
  });
});
