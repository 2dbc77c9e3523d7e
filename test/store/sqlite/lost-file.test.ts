/**
 * The SQLite store when its database file is removed, renamed or replaced
 * under it (docs/operations.md "The database file removed while serving").
 * The timer's look is pushed out of the way (an hour) wherever a case is
 * about the look before each commit's answer.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../../src/testing/index.js";
import { DatabaseRefusal } from "../../../src/store/database/database-refusal.js";
import type { DatabaseFileReport } from "../../../src/store/sqlite/lost-file.js";
import { openSqliteStore, type SqliteStore } from "../../../src/store/sqlite/sqlite-store.js";
import type { WriteOutcome } from "../../../src/store/store.js";
import { newJob } from "../contract/helpers.js";

const HOUR = 3_600_000;

describe("the SQLite store's database file lost under it", () => {
  const dirs: string[] = [];
  const stores: SqliteStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  function open(fileCheckIntervalMs = HOUR, monotonicNow?: () => number) {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-lost-"));
    dirs.push(dir);
    const reports: DatabaseFileReport[] = [];
    const outcomes: WriteOutcome[] = [];
    let onReport: ((r: DatabaseFileReport) => void) | undefined;
    const dbPath = join(dir, "jobs.db");
    const store = openSqliteStore({
      path: dbPath,
      clock: new ManualClock(),
      fileCheckIntervalMs,
      ...(monotonicNow !== undefined ? { monotonicNow } : {}),
      onDatabaseFile: (report) => {
        reports.push(report);
        onReport?.(report);
      },
    });
    store.onWriteOutcome((o) => outcomes.push(o));
    stores.push(store);
    /** Resolves with the first report of `kind`, already made or still to come. */
    const reported = <K extends DatabaseFileReport["kind"]>(kind: K) =>
      new Promise<Extract<DatabaseFileReport, { kind: K }>>((resolve) => {
        const found = reports.find((r) => r.kind === kind);
        if (found !== undefined) resolve(found as Extract<DatabaseFileReport, { kind: K }>);
        else onReport = (r) => r.kind === kind && resolve(r as Extract<DatabaseFileReport, { kind: K }>);
      });
    return { store, dir, path: dbPath, reports, outcomes, reported };
  }

  it("does not acknowledge a commit made after the file was removed, refuses every later write, and saves the jobs acknowledged before", async () => {
    const { store, path, outcomes, reported } = open();
    const [kept] = await store.submit([newJob({ payloadJson: `{"n":1}` })]);
    rmSync(path);

    // Commits into the open file, but the look before its answer finds the path empty.
    const late = store.submit([newJob({ payloadJson: `{"n":2}` })]);
    await expect(late).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE", metadata: { cause: "file_lost" } });
    await expect(late).rejects.toThrow(`${path} no longer exists (removed or renamed)`);
    expect(outcomes.at(-1)).toMatchObject({ ok: false, cause: "file_lost" });
    await expect(store.submit([newJob()])).rejects.toThrow("file_lost");
    await expect(store.checkWritable()).rejects.toThrow("file_lost");

    const lost = await reported("lost");
    expect(lost).toMatchObject({ path, reason: `${path} no longer exists (removed or renamed)` });
    const saved = await reported("saved");
    expect(saved.savedTo).toBe(lost.savingTo);
    const copy = new Database(saved.savedTo, { readonly: true });
    try {
      const ids = (copy.prepare("SELECT id FROM jobs").all() as Array<{ id: string }>).map((r) => r.id);
      expect(ids).toContain(kept.job.id);
      expect(saved.jobs).toBe(ids.length);
    } finally {
      copy.close();
    }
    // Reads go on from the open file.
    expect((await store.getJob(kept.job.id))?.payloadJson).toBe(`{"n":1}`);
  });

  it("notices on its timer, with no write to tell it", async () => {
    const { path, reported } = open(5);
    const other = `${path}.other`;
    writeFileSync(other, "");
    renameSync(other, path);
    expect((await reported("lost")).reason).toBe(`${path} is now another file (replaced)`);
    await reported("saved");
  });

  it("lets writes through again once the path names its file again", async () => {
    const { store, path, reported } = open(5);
    renameSync(path, `${path}.moved`);
    await reported("lost");
    await expect(store.submit([newJob()])).rejects.toThrow("file_lost");
    renameSync(`${path}.moved`, path);
    await reported("back");
    const [after] = await store.submit([newJob({ payloadJson: `{"after":true}` })]);
    expect((await store.getJob(after.job.id))?.payloadJson).toBe(`{"after":true}`);
  });

  it("says why the copy could not be saved, keeps refusing, and saves it once it can, 10 s later", async () => {
    let monotonic = 0;
    const { store, dir, path, reported } = open(5, () => monotonic);
    const [kept] = await store.submit([newJob()]);
    // The whole directory goes: nothing can be written beside the database.
    rmSync(dir, { recursive: true, force: true });
    const failed = await reported("saveFailed");
    expect(failed.path).toBe(path);
    expect(failed.error).toContain(dir);
    await expect(store.submit([newJob()])).rejects.toThrow("file_lost");

    mkdirSync(dir);
    monotonic += 10_000;
    const saved = await reported("saved");
    expect(saved.savedTo).toBe(failed.savingTo);
    expect(saved.jobs).toBe(1);
    expect((await store.getJob(kept.job.id))?.id).toBe(kept.job.id);
  });

  it("saves the copy in steps, the event loop turning between them, and the copy holds every job", async () => {
    const { store, path, reported } = open();
    // About 2 MiB of jobs: many more pages than one backup step copies.
    for (let i = 0; i < 20; i++)
      await store.submit(Array.from({ length: 100 }, () => newJob({ payloadJson: JSON.stringify({ pad: "x".repeat(900) }) })));
    rmSync(path);
    await expect(store.submit([newJob()])).rejects.toThrow("file_lost");
    await reported("lost");
    let turns = 0;
    let saving = true;
    const saved = reported("saved").finally(() => (saving = false));
    while (saving) {
      await new Promise((resolve) => setImmediate(resolve));
      turns++;
    }
    expect(turns).toBeGreaterThan(3);
    const copy = await saved;
    // The 2,000 acknowledged, and the one committed after the rm but refused (as in the first case).
    expect(copy.jobs).toBe(2001);
    const db = new Database(copy.savedTo, { readonly: true });
    try {
      expect(db.pragma("journal_mode", { simple: true })).toBe("delete");
      expect((db.prepare("SELECT count(*) AS n FROM jobs").get() as { n: number }).n).toBe(2001);
    } finally {
      db.close();
    }
  });

  it("refuses to open an empty database beside a saved copy of a lost one", () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-lost-"));
    dirs.push(dir);
    const path = join(dir, "jobs.db");
    writeFileSync(`${path}.saved-20261204T101010Z`, "");
    expect(() => openSqliteStore({ path, clock: new ManualClock() })).toThrow(DatabaseRefusal);
    expect(() => openSqliteStore({ path, clock: new ManualClock() })).toThrow(
      `leasequeue restore ${path}.saved-20261204T101010Z --db ${path}`,
    );
    // A database that exists opens as usual, copies beside it or not.
    writeFileSync(path, "");
    stores.push(openSqliteStore({ path, clock: new ManualClock() }));
  });
});
