/**
 * The SQLite group commit's hold: while the WAL's fsync runs, writes wait
 * and then go in one transaction; its wait for another connection's write
 * lock, which keeps the event loop turning; and the WAL sync telling when
 * it is idle. Driven directly (no server): the hold is a flag here.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { submitJobs } from "../../../src/store/operations/submit.js";
import { BUSY_SLICE_MS, GroupCommit } from "../../../src/store/sqlite/group-commit.js";
import { migrate } from "../../../src/store/sqlite/migrate.js";
import { prepareStatements } from "../../../src/store/sqlite/sql.js";
import { SqlitePort } from "../../../src/store/sqlite/sqlite-port.js";
import { WalSync } from "../../../src/store/sqlite/wal-sync.js";
import { newJob } from "../contract/helpers.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("GroupCommit hold", () => {
  const dbs: Database.Database[] = [];
  const dirs: string[] = [];
  afterEach(() => {
    for (const db of dbs.splice(0)) db.close();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  function groupCommit(path = ":memory:", busyTimeoutMs = 5000) {
    const db = new Database(path, { timeout: BUSY_SLICE_MS });
    dbs.push(db);
    migrate(db);
    const stmts = prepareStatements(db);
    let holding = false;
    const transactions: number[] = [];
    const gc = new GroupCommit({
      db,
      port: new SqlitePort(db, stmts),
      clock: new ManualClock(),
      maxBatch: 256,
      busyTimeoutMs,
      began: () => (stmts.lastSequence.get() as { seq: number }).seq,
      ended: () => {},
      committed: (changes, answer) => {
        transactions.push(changes.events.length);
        answer();
      },
      failed: () => {},
      held: () => holding,
    });
    const jobs = () => (db.prepare("SELECT count(*) AS n FROM jobs").get() as { n: number }).n;
    return { gc, transactions, jobs, hold: (on: boolean) => (holding = on) };
  }

  /** A database file, and a second connection to it (as `leasequeue prune` or a sqlite3 shell would hold one). */
  function fileWithSecondConnection() {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-busy-"));
    dirs.push(dir);
    const path = join(dir, "jobs.db");
    const first = new Database(path);
    first.pragma("journal_mode = WAL");
    first.close();
    const other = new Database(path, { timeout: 0 });
    dbs.push(other);
    return { path, other };
  }

  it("waits for another connection's write lock on timers, the event loop turning meanwhile, then commits with what queued", async () => {
    const { path, other } = fileWithSecondConnection();
    const { gc, transactions } = groupCommit(path);
    other.exec("BEGIN IMMEDIATE");
    const first = gc.write(submitJobs([newJob()]));
    // Many turns of this thread pass while the write waits: the lock is not waited for inside one call.
    for (let i = 0; i < 20; i++) await turn();
    const second = gc.write(submitJobs([newJob()]));
    for (let i = 0; i < 20; i++) await turn();
    expect(transactions).toEqual([]);
    // The holder, on this same thread, can end its transaction only because the loop turns.
    other.exec("ROLLBACK");
    await Promise.all([first, second]);
    expect(transactions).toEqual([2]);
  });

  it("refuses as busy, with everything that queued behind it, a write whose lock is held past busyTimeoutMs; the next write waits afresh", async () => {
    const { path, other } = fileWithSecondConnection();
    const { gc, transactions } = groupCommit(path, 50);
    other.exec("BEGIN IMMEDIATE");
    const first = gc.write(submitJobs([newJob()]));
    await turn();
    const second = gc.write(submitJobs([newJob()]));
    await expect(first).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE", message: /SQLITE_BUSY/ });
    await expect(second).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE" });
    const third = gc.write(submitJobs([newJob()]));
    await turn();
    other.exec("ROLLBACK");
    await third;
    expect(transactions).toEqual([1]);
  });

  it("commits each turn's writes at once when not held", async () => {
    const { gc, transactions } = groupCommit();
    await gc.write(submitJobs([newJob()]));
    await gc.write(submitJobs([newJob()]));
    expect(transactions).toEqual([1, 1]);
  });

  it("keeps writes issued while held, over many turns, for one transaction after resume()", async () => {
    const { gc, transactions, jobs, hold } = groupCommit();
    hold(true);
    const answered: number[] = [];
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 5; i++) {
      writes.push(gc.write(submitJobs([newJob({ task: `t${i}` })])).then(() => answered.push(i)));
      await turn();
    }
    expect(transactions).toEqual([]);
    expect(jobs()).toBe(0);
    expect(answered).toEqual([]);
    hold(false);
    gc.resume();
    await Promise.all(writes);
    // One transaction, its operations in the order they were issued.
    expect(transactions).toEqual([5]);
    expect(answered).toEqual([0, 1, 2, 3, 4]);
    expect(jobs()).toBe(5);
  });

  it("does nothing on resume() with nothing queued", async () => {
    const { gc, transactions } = groupCommit();
    gc.resume();
    await turn();
    expect(transactions).toEqual([]);
  });
});

describe("WalSync idle notice", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("is syncing while an fsync runs, and tells when the last one returned with nothing waiting", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-walsync-"));
    dirs.push(dir);
    const wal = join(dir, "x.db-wal");
    writeFileSync(wal, "frames");
    let idle = 0;
    const sync = new WalSync(wal, () => idle++);
    expect(sync.syncing).toBe(false);
    const settled: Array<string> = [];
    sync.whenDurable(() => settled.push("first"));
    expect(sync.syncing).toBe(true);
    // Queued during the first fsync: a second fsync covers it, and only then is the sync idle.
    sync.whenDurable(() => settled.push(`second (idle told ${idle} times before)`));
    await sync.drain();
    expect(settled).toEqual(["first", "second (idle told 0 times before)"]);
    expect(idle).toBe(1);
    expect(sync.syncing).toBe(false);
    expect(sync.syncs).toBe(2);
    sync.close();
  });
});
