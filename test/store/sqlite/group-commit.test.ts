/**
 * The SQLite group commit's hold: while the WAL's fsync runs, writes wait
 * and then go in one transaction; and the WAL sync telling when it is idle.
 * Driven directly (no server, no timing): the hold is a flag here.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/domain/clock.js";
import { submitJobs } from "../../../src/store/operations/submit.js";
import { GroupCommit } from "../../../src/store/sqlite/group-commit.js";
import { migrate } from "../../../src/store/sqlite/migrate.js";
import { prepareStatements } from "../../../src/store/sqlite/sql.js";
import { SqlitePort } from "../../../src/store/sqlite/sqlite-port.js";
import { WalSync } from "../../../src/store/sqlite/wal-sync.js";
import { newJob } from "../contract/helpers.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("GroupCommit hold", () => {
  const dbs: Database.Database[] = [];
  afterEach(() => {
    for (const db of dbs.splice(0)) db.close();
  });

  function groupCommit() {
    const db = new Database(":memory:");
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
