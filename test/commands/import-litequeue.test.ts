/**
 * `leasequeue import-litequeue` (docs/operations.md "Import from litequeue"),
 * run as the real command against litequeue databases built with litequeue's
 * own schema.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { DONE, FAILED, LOCKED, LOOSE_LITEQUEUE_SCHEMA, READY, writeLitequeueFile, type LitequeueMessage } from "../helpers/litequeue.js";
import { okJson, runCli, serversInTempDirs } from "../helpers/process.js";

const sandbox = serversInTempDirs("import");
const start = sandbox.start;

/** 2025-12-01T09:06:40Z in nanoseconds; each message is a second later than the one before. */
const T0 = 1_764_580_000_000_000_000n;
const ns = (seconds: number, extraNs = 0n) => T0 + BigInt(seconds) * 1_000_000_000n + extraNs;
const epochMs = (seconds: number, extraMs = 0) => Number(T0 / 1_000_000n) + seconds * 1000 + extraMs;

/** UUIDv7s as litequeue writes them (str(uuid7()): lower case, canonical), ordered like their in_time. */
const ids = Array.from({ length: 6 }, (_, i) => `019ad5a2-7b3c-7def-8123-4567890abc${String(i).padStart(2, "0")}`);

/** One message in each status, JSON and non-JSON data, the times litequeue sets for each. */
const MESSAGES: LitequeueMessage[] = [
  { data: '{"to":"ada@example.com"}', message_id: ids[0], status: READY, in_time: ns(0) },
  { data: "plain text, not JSON", message_id: ids[1], status: LOCKED, in_time: ns(1), lock_time: ns(30, 999_999n) },
  { data: "[1, 2, 3]", message_id: ids[2], status: DONE, in_time: ns(2), lock_time: ns(40), done_time: ns(45, 123_456_789n) },
  { data: "{broken json", message_id: ids[3], status: FAILED, in_time: ns(3), lock_time: ns(50), done_time: ns(51) },
  { data: "42", message_id: ids[4], status: READY, in_time: ns(4) },
  { data: '"a JSON string"', message_id: ids[5], status: READY, in_time: ns(5) },
];

function litequeueFile(messages = MESSAGES, schema?: string): string {
  const path = join(sandbox.dir(), `litequeue-${Math.random().toString(36).slice(2)}.queue.sqlite3`);
  writeLitequeueFile(path, messages, schema);
  return path;
}

function importCli(file: string, db: string, ...flags: string[]) {
  return runCli(["import-litequeue", file, "--db", db, ...flags]);
}

/** Everything an import may write, to compare before and after. */
function dump(dbPath: string): unknown {
  const db = new Database(dbPath, { readonly: true });
  try {
    return {
      jobs: db.prepare("SELECT * FROM jobs ORDER BY id").all(),
      events: db.prepare("SELECT * FROM job_events ORDER BY sequence").all(),
      counts: db.prepare("SELECT * FROM job_counts ORDER BY queue, state").all(),
      sequence: db.prepare("SELECT * FROM sqlite_sequence").all(),
    };
  } finally {
    db.close();
  }
}

function fileHash(path: string): string {
  return existsSync(path) ? createHash("sha256").update(readFileSync(path)).digest("hex") : "absent";
}

describe("leasequeue import-litequeue", () => {
  it("imports every message with its id, times and payload, and counts and events to match", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    const r = await importCli(litequeueFile(), db, "--queue", "emails");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('queue "emails", task "litequeue"');
    expect(r.stdout).toMatch(/imported: +6 \(queued 4, completed 1, dead 1\)/);
    expect(r.stdout).toMatch(/already present: 0/);

    const { jobs, events, counts } = dump(db) as { jobs: any[]; events: any[]; counts: any[] };
    const byId = new Map(jobs.map((j) => [j.id, j]));
    const ms = (n: bigint) => Number(n / 1_000_000n);
    expect(byId.get(ids[0])).toMatchObject({
      queue: "emails",
      task: "litequeue",
      state: "queued",
      payload: '{"to":"ada@example.com"}',
      create_time: ms(ns(0)),
      schedule_time: ms(ns(0)),
      finish_time: null,
      attempts: 0,
      deliveries: 0,
    });
    expect(byId.get(ids[1])).toMatchObject({
      state: "queued",
      payload: '"plain text, not JSON"',
      create_time: ms(ns(1)),
      update_time: ms(ns(30)),
      deliveries: 1,
      attempts: 0,
    });
    expect(byId.get(ids[2])).toMatchObject({
      state: "completed",
      payload: "[1,2,3]",
      create_time: ms(ns(2)),
      finish_time: ms(ns(45)) + 123,
      attempts: 1,
    });
    expect(byId.get(ids[3])).toMatchObject({ state: "dead", payload: '"{broken json"', finish_time: ms(ns(51)), attempts: 1 });
    expect(byId.get(ids[4])).toMatchObject({ state: "queued", payload: "42" });
    expect(byId.get(ids[5])).toMatchObject({ state: "queued", payload: '"a JSON string"' });

    expect(events.map((e) => [e.sequence, e.job_id, e.kind, e.from_state, e.to_state, e.message])).toEqual([
      [1, ids[0], "submitted", null, "queued", "imported from litequeue (status READY)"],
      [2, ids[1], "submitted", null, "queued", "imported from litequeue (status LOCKED)"],
      [3, ids[2], "submitted", null, "completed", "imported from litequeue (status DONE)"],
      [4, ids[3], "submitted", null, "dead", "imported from litequeue (status FAILED)"],
      [5, ids[4], "submitted", null, "queued", "imported from litequeue (status READY)"],
      [6, ids[5], "submitted", null, "queued", "imported from litequeue (status READY)"],
    ]);
    expect(counts).toEqual([
      { queue: "emails", state: "completed", count: 1 },
      { queue: "emails", state: "dead", count: 1 },
      { queue: "emails", state: "queued", count: 4 },
    ]);
    const check = await runCli(["check", "--db", db]);
    expect(check.code, check.stderr).toBe(0);
  });

  it("leaves jobs that a server serves by their litequeue ids: GetJob, Claim oldest first, Redrive, Cancel", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    expect((await importCli(litequeueFile(), db, "--queue", "emails", "--task", "welcome.send")).code).toBe(0);
    // The DONE message finished in 2025: the default retention would prune it at start.
    const s = await start(db, ["--retention", "0s"]);

    const { job: done } = await okJson(s.apiUrl, "GetJob", { jobId: ids[2] });
    expect(done).toMatchObject({ id: ids[2], queue: "emails", task: "welcome.send", state: "JOB_STATE_COMPLETED", payload: [1, 2, 3] });
    expect(Date.parse(done.createTime)).toBe(epochMs(2));
    expect(Date.parse(done.finishTime)).toBe(epochMs(45, 123));

    const { leases } = await okJson(s.apiUrl, "Claim", { queue: "emails", workerId: "w1", maxJobs: 10 });
    expect(leases.map((l: any) => l.job.id)).toEqual([ids[0], ids[1], ids[4], ids[5]]);
    expect(leases[1].job.payload).toBe("plain text, not JSON");

    const { job: redriven } = await okJson(s.apiUrl, "Redrive", { jobId: ids[3] });
    expect(redriven.state).toBe("JOB_STATE_QUEUED");
    const { job: cancelled } = await okJson(s.apiUrl, "Cancel", { jobId: ids[3], reason: "not needed after the move" });
    expect(cancelled.state).toBe("JOB_STATE_CANCELLED");
  });

  it("is a no-op the second time", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    const file = litequeueFile();
    expect((await importCli(file, db, "--queue", "emails")).code).toBe(0);
    const before = dump(db);
    const again = await importCli(file, db, "--queue", "emails");
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/imported: +0\n/);
    expect(again.stdout).toMatch(/already present: 6\n/);
    expect(dump(db)).toEqual(before);

    // Into another queue the same ids are still the same jobs: nothing is imported twice.
    const elsewhere = await importCli(file, db, "--queue", "other");
    expect(elsewhere.stdout).toMatch(/already present: 6 \(6 of them in another queue\)/);
    expect(dump(db)).toEqual(before);
  });

  it("--dry-run reports the counts and writes nothing, not even a new database", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    const dry = await importCli(litequeueFile(), db, "--queue", "emails", "--dry-run");
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/would import: +6 \(queued 4, completed 1, dead 1\)/);
    expect(dry.stdout).toContain("dry run: nothing was written");
    expect(existsSync(db)).toBe(false);
    expect(existsSync(`${db}.lock`)).toBe(false);

    expect((await importCli(litequeueFile(MESSAGES.slice(0, 2)), db, "--queue", "emails")).code).toBe(0);
    const file = fileHash(db);
    const before = dump(db);
    const partly = await importCli(litequeueFile(), db, "--queue", "emails", "--dry-run");
    expect(partly.code, partly.stderr).toBe(0);
    expect(partly.stdout).toMatch(/would import: +4 \(queued 2, completed 1, dead 1\)/);
    expect(partly.stdout).toMatch(/already present: 2\n/);
    expect(dump(db)).toEqual(before);
    // A read-only SQLite connection may leave an empty -wal and a -shm (its shared index) beside the file; no data.
    expect(fileHash(db)).toBe(file);
    expect(existsSync(`${db}-wal`) ? statSync(`${db}-wal`).size : 0).toBe(0);
  });

  it("refuses bad rows, naming each, and writes nothing", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    const file = litequeueFile(
      [
        MESSAGES[0],
        { data: "x", message_id: ids[1], status: "locked", in_time: ns(1) },
        { data: "x", message_id: null, status: READY, in_time: ns(2) },
        { data: "x", message_id: ids[3], status: 7, in_time: ns(3) },
        { data: "x", message_id: ids[4], status: 1.5, in_time: ns(4) },
        { data: "x", message_id: "not-a-uuid", status: READY, in_time: ns(5) },
        { data: "x", message_id: ids[5], status: DONE, in_time: 1_764_580_000 },
      ],
      LOOSE_LITEQUEUE_SCHEMA,
    );
    const r = await importCli(file, db, "--queue", "emails");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("6 row(s) cannot be imported; nothing was written");
    expect(r.stderr).toContain(`row 2 (message_id ${ids[1]}): status is the text "locked", not an integer`);
    expect(r.stderr).toContain("row 3: message_id is NULL");
    expect(r.stderr).toContain(`row 4 (message_id ${ids[3]}): status 7 is not a litequeue status`);
    expect(r.stderr).toContain(`row 5 (message_id ${ids[4]}): status is the real number 1.5, not an integer`);
    expect(r.stderr).toContain('row 6 (message_id not-a-uuid): message_id "not-a-uuid" is not a UUID');
    expect(r.stderr).toContain(`row 7 (message_id ${ids[5]}): in_time 1764580000 is not a time in nanoseconds`);
    expect(existsSync(db)).toBe(false);

    const dry = await importCli(file, db, "--queue", "emails", "--dry-run");
    expect(dry.code).toBe(1);
    expect(dry.stderr).toContain("6 row(s) cannot be imported");

    // Without litequeue's unique index one id may appear twice (here in two letter cases): which row is the job?
    const twice = litequeueFile([MESSAGES[0], { ...MESSAGES[1], message_id: ids[0].toUpperCase() }], LOOSE_LITEQUEUE_SCHEMA);
    const duplicate = await importCli(twice, db, "--queue", "emails");
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain(`message_id ${ids[0]} appear(s) in more than one row`);
    expect(existsSync(db)).toBe(false);
  });

  it("checks --queue and --task by Submit's rules", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    const file = litequeueFile();
    const missing = await importCli(file, db);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--queue: is required");
    const bad = await importCli(file, db, "--queue", "bad queue!");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--queue: must be 1-64 characters of [A-Za-z0-9._:-]");
    const badTask = await importCli(file, db, "--queue", "emails", "--task", "has space");
    expect(badTask.code).toBe(2);
    expect(badTask.stderr).toContain("--task: must be 1-64 characters");
    expect(existsSync(db)).toBe(false);
  });

  it("refuses while a server holds the database, and a file that is not litequeue's", async () => {
    const db = join(sandbox.dir(), "jobs.db");
    const s = await start(db);
    const busy = await importCli(litequeueFile(), db, "--queue", "emails");
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/is in use by another LeaseQueue process .*stop it first/);
    expect((await okJson(s.apiUrl, "GetStats", {})).queues ?? []).toEqual([]);

    const notLitequeue = await importCli(db, join(sandbox.dir(), "other.db"), "--queue", "emails");
    expect(notLitequeue.code).toBe(1);
    expect(notLitequeue.stderr).toContain('is not a litequeue database: it has no table "Queue"');
    const missing = await importCli(join(sandbox.dir(), "nowhere.sqlite3"), join(sandbox.dir(), "other.db"), "--queue", "emails");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("does not exist");
  });

  it("refuses a database directory that takes no new file, naming the directory, and writes nothing", async () => {
    // sysfs holds no regular files: creating one fails for every user, root included.
    const r = await importCli(litequeueFile(), "/sys/jobs.db", "--queue", "emails");
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(
      /^leasequeue import-litequeue: cannot write \/sys\/jobs\.db: the directory \/sys is not writable \(E[A-Z]+\)$/,
    );
  });

  it("refuses a file whose Queue is a view or lacks litequeue's columns, before looking at the database, naming litequeue's columns", async () => {
    const schemaFile = (sql: string) => {
      const path = join(sandbox.dir(), `not-litequeue-${Math.random().toString(36).slice(2)}.sqlite3`);
      const db = new Database(path);
      db.exec(sql);
      db.close();
      return path;
    };
    const columns = "data TEXT, message_id TEXT, status INTEGER, in_time INTEGER, lock_time INTEGER, done_time INTEGER";
    const view = schemaFile(`CREATE TABLE messages (${columns}); CREATE VIEW "Queue" AS SELECT * FROM messages`);
    const brokenView = schemaFile(`CREATE TABLE messages (${columns}); CREATE VIEW "Queue" AS SELECT * FROM messages; DROP TABLE messages`);
    const withoutRowid = schemaFile(
      `CREATE TABLE "Queue" (${columns.replace("message_id TEXT", "message_id TEXT PRIMARY KEY")}) WITHOUT ROWID`,
    );
    const fewColumns = schemaFile(`CREATE TABLE "Queue" (data TEXT, message_id TEXT, status INTEGER)`);
    const expected = 'expected litequeue\'s table "Queue" with the columns data, message_id, status, in_time, lock_time, done_time';
    const refusals: Array<[string, string]> = [
      [view, 'its "Queue" is a view, not a table'],
      [brokenView, 'its "Queue" is a view, not a table'],
      [withoutRowid, 'its "Queue" is a WITHOUT ROWID table'],
      [fewColumns, 'its table "Queue" lacks the column(s) in_time, lock_time, done_time'],
    ];

    const idle = join(sandbox.dir(), "idle.db");
    const held = join(sandbox.dir(), "held.db");
    await start(held);
    for (const [file, found] of refusals) {
      const alone = await importCli(file, idle, "--queue", "emails");
      expect(alone.code, alone.stderr).toBe(1);
      expect(alone.stderr.trim()).toBe(`leasequeue import-litequeue: ${file} is not a litequeue database: ${found}; ${expected}`);
      const underServer = await importCli(file, held, "--queue", "emails");
      expect(underServer.code).toBe(1);
      expect(underServer.stderr).toBe(alone.stderr);
    }
    expect(existsSync(idle)).toBe(false);
  }, 30_000); // nine command-line runs and a server: seconds each on a busy machine
});
