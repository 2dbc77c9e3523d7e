/**
 * `leasequeue backup`, `check` and `restore` (docs/operations.md "Commands"),
 * run as the real command, against real server processes where it matters:
 * a backup of a database that a server keeps writing to, a check of a
 * corrupted copy, a restore that a running server must prevent.
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
  writeSync,
  closeSync,
} from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../src/domain/clock.js";
import { DatabaseRefusal } from "../../src/store/database/database-refusal.js";
import { unwritableDirectory } from "../../src/store/sqlite/database-file.js";
import { LATEST_SCHEMA_VERSION } from "../../src/store/sqlite/migrate.js";
import { openSqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { READY, writeLitequeueFile } from "../helpers/litequeue.js";
import { callJson, okJson, runCli, serversInTempDirs } from "../helpers/process.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases } from "../helpers/store.js";

const sandbox = serversInTempDirs("backup");
const start = sandbox.start;

/** A database with `n` jobs in several states (a store in this process, closed again); returns their ids. */
async function seed(dbPath: string, n: number): Promise<string[]> {
  const store = openSqliteStore({ path: dbPath, clock: systemClock, synchronous: "normal" });
  try {
    const outcomes = await store.submit(Array.from({ length: n }, (_, i) => newJob({ queue: `q${i % 3}`, payloadJson: `{"i":${i}}` })));
    const leases = await claimLeases(store, { queue: "q0", workerId: "w", leaseDurationMs: 60_000, maxJobs: Math.ceil(n / 6) });
    for (const l of leases.slice(0, Math.floor(leases.length / 2))) await store.complete(l.job.id, l.leaseToken, null);
    return outcomes.map((o) => o.job.id);
  } finally {
    await store.close();
  }
}

function withDb<T>(path: string, read: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

function jobIds(path: string): Set<string> {
  return withDb(path, (db) => new Set(db.prepare("SELECT id FROM jobs").pluck().all() as string[]));
}

function hash(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** Overwrites the start of the page holding the root of `table` (its b-tree page header) with 0xFF bytes. */
function corruptPageOf(path: string, table: string): void {
  const { rootpage, pageSize } = withDb(path, (db) => ({
    rootpage: db.prepare("SELECT rootpage FROM sqlite_master WHERE name = ?").pluck().get(table) as number,
    pageSize: db.pragma("page_size", { simple: true }) as number,
  }));
  const fd = openSync(path, "r+");
  try {
    writeSync(fd, Buffer.alloc(32, 0xff), 0, 32, (rootpage - 1) * pageSize);
  } finally {
    closeSync(fd);
  }
}

function setUserVersion(path: string, version: number): void {
  const db = new Database(path);
  try {
    db.pragma(`user_version = ${version}`);
  } finally {
    db.close();
  }
}

describe("leasequeue backup", () => {
  it("copies a database that a server keeps writing to: the copy holds every job acknowledged before it began, and restores", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 3000);
    const s = await start(live);
    const acknowledged: string[] = [];
    let writing = true;
    let acknowledgedDuringBackup = 0;
    let backupRunning = false;
    let reached!: () => void;
    const twoHundred = new Promise<void>((resolve) => (reached = resolve));
    const writers = Array.from({ length: 4 }, async (_, w) => {
      for (let i = 0; writing; i++) {
        if (w < 3) {
          const { job } = await okJson(s.apiUrl, "Submit", { queue: `q${w}`, task: "t", payload: { w, i, pad: "x".repeat(200) } });
          acknowledged.push(job.id);
          if (acknowledged.length === 200) reached();
        } else {
          const { leases } = await okJson(s.apiUrl, "Claim", { queue: "q1", workerId: "w3", maxJobs: 5 });
          for (const l of leases ?? []) await okJson(s.apiUrl, "Complete", { jobId: l.job.id, leaseToken: l.leaseToken });
        }
        if (backupRunning) acknowledgedDuringBackup++;
      }
    });
    // 200 writes acknowledged, or a writer's failure, whichever comes first.
    await Promise.race([twoHundred, Promise.all(writers)]);

    const before = [...acknowledged];
    const target = join(sandbox.dir(), "backup.db");
    backupRunning = true;
    const backup = await runCli(["backup", target, "--db", live]);
    backupRunning = false;
    writing = false;
    await Promise.all(writers);
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toContain(`backup written: ${target}`);
    expect(backup.stdout).toMatch(new RegExp(`schema version: ${LATEST_SCHEMA_VERSION}\\n`));
    console.info(
      `backup: ${acknowledgedDuringBackup} writes acknowledged while it ran; ${acknowledged.length - before.length} after it began`,
    );

    const saved = jobIds(target);
    expect(before.filter((id) => !saved.has(id))).toEqual([]);
    const total = Number(/jobs: +(\d+)/.exec(backup.stdout)![1]);
    expect(total).toBe(saved.size);
    expect(readdirSync(sandbox.dir()).filter((f) => f.includes(".partial-"))).toEqual([]);
    const check = await runCli(["check", "--db", target]);
    expect(check.code, check.stdout + check.stderr).toBe(0);

    const restoredPath = join(sandbox.dir(), "restored.db");
    const restore = await runCli(["restore", target, "--db", restoredPath]);
    expect(restore.code, restore.stderr).toBe(0);
    expect(restore.stdout).toContain("replaced:       nothing (there was no database)");
    const restored = await start(restoredPath);
    for (const id of [before[0], before[before.length - 1]]) {
      expect((await okJson(restored.apiUrl, "GetJob", { jobId: id })).job.id).toBe(id);
    }
    const stats = await okJson(restored.apiUrl, "GetStats", {});
    const statTotal = ["queued", "running", "retry", "completed", "dead", "cancelled"].reduce((n, k) => n + Number(stats.total[k] ?? 0), 0);
    expect(statTotal).toBe(saved.size);
    expect((await callJson(restored.apiUrl, "Submit", { queue: "q0", task: "after-restore" })).status).toBe(200);
  }, 60_000);

  it("refuses to overwrite a file unless --force, and never the database itself", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 10);
    const target = join(sandbox.dir(), "backup.db");
    writeFileSync(target, "an older backup");
    const refused = await runCli(["backup", target, "--db", live]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${target} already exists; pass --force to replace it`);
    expect(readFileSync(target, "utf8")).toBe("an older backup");

    const forced = await runCli(["backup", target, "--force", "--db", live]);
    expect(forced.code, forced.stderr).toBe(0);
    expect(jobIds(target).size).toBe(10);

    const itself = await runCli(["backup", live, "--force", "--db", live]);
    expect(itself.code).toBe(1);
    expect(itself.stderr).toContain("is the database itself");
    const nowhere = await runCli(["backup", join(sandbox.dir(), "no-such-sandbox.dir()", "b.db"), "--db", live]);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toContain("does not exist");
    const noDatabase = await runCli(["backup", join(sandbox.dir(), "b2.db"), "--db", join(sandbox.dir(), "missing.db")]);
    expect(noDatabase.code).toBe(1);
    expect(noDatabase.stderr).toContain("does not exist");
    expect(existsSync(join(sandbox.dir(), "missing.db"))).toBe(false);
    expect(readdirSync(sandbox.dir()).filter((f) => f.includes(".partial-"))).toEqual([]);
  });

  it("refuses a directory that takes no new file, naming the directory", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 3);
    // sysfs holds no regular files: creating one fails for every user, root included.
    const r = await runCli(["backup", "/sys/b.db", "--db", live]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^leasequeue backup: cannot write \/sys\/b\.db: the directory \/sys is not writable \(E[A-Z]+\)$/);
  });

  it("names the directory for a permission or read-only refusal, and leaves other errors as they are", () => {
    const failure = (code: string) => Object.assign(new Error(`${code}: open failed`), { code });
    for (const code of ["EACCES", "EPERM", "EROFS"]) {
      const refusal = unwritableDirectory(failure(code), "/backups/nightly/b.db");
      expect(refusal).toBeInstanceOf(DatabaseRefusal);
      expect(refusal?.message).toBe(`cannot write /backups/nightly/b.db: the directory /backups/nightly is not writable (${code})`);
    }
    expect(unwritableDirectory(failure("ENOSPC"), "/backups/b.db")).toBeUndefined();
    expect(unwritableDirectory(new Error("not a system error"), "/backups/b.db")).toBeUndefined();
  });
});

describe("leasequeue check", () => {
  it("passes a sound database, a live one too, and reports its schema version and jobs", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 60);
    const s = await start(live);
    await okJson(s.apiUrl, "Submit", { queue: "q9", task: "t" });
    const r = await runCli(["check", "--db", live]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(`schema version: ${LATEST_SCHEMA_VERSION} (this release: ${LATEST_SCHEMA_VERSION})`);
    expect(r.stdout).toContain("integrity:      ok (integrity_check)");
    expect(r.stdout).toMatch(/jobs: +61 \(queued \d+, running \d+, completed \d+\) in 4 queue\(s\)/);
    expect(r.stdout).toContain("job_counts:     match the jobs");
    expect(r.stdout).toContain("result: ok");
    expect(r.stderr).toBe("");
    const quick = await runCli(["check", "--quick", "--db", live]);
    expect(quick.code).toBe(0);
    expect(quick.stdout).toContain("integrity:      ok (quick_check)");
  });

  it("fails on a corrupted copy, a newer schema, counts that differ from the jobs, and a file that is not a database", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 600);
    const corrupted = join(sandbox.dir(), "corrupted.db");
    copyFileSync(live, corrupted);
    corruptPageOf(corrupted, "jobs_queue_state_recent");
    for (const flags of [[], ["--quick"]]) {
      const r = await runCli(["check", ...flags, "--db", corrupted]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^leasequeue check: integrity: /m);
      expect(r.stdout).toMatch(/result: \d+ problem\(s\)/);
    }

    const newer = join(sandbox.dir(), "newer.db");
    copyFileSync(live, newer);
    setUserVersion(newer, LATEST_SCHEMA_VERSION + 1);
    const tooNew = await runCli(["check", "--db", newer]);
    expect(tooNew.code).toBe(1);
    expect(tooNew.stderr).toContain(
      `has schema version ${LATEST_SCHEMA_VERSION + 1}, newer than this LeaseQueue release knows (up to ${LATEST_SCHEMA_VERSION})`,
    );

    const miscounted = join(sandbox.dir(), "miscounted.db");
    copyFileSync(live, miscounted);
    const db = new Database(miscounted);
    db.prepare("UPDATE job_counts SET count = count + 2 WHERE queue = 'q1' AND state = 'queued'").run();
    db.close();
    const counts = await runCli(["check", "--db", miscounted]);
    expect(counts.code).toBe(1);
    expect(counts.stderr).toMatch(/job_counts records (\d+) queued jobs in queue "q1", but the jobs table holds (\d+)/);
    expect(counts.stdout).toContain("job_counts:     1 count(s) differ from the jobs");

    const text = join(sandbox.dir(), "notes.txt");
    writeFileSync(text, "not a database at all, but long enough to have a header of sorts ".repeat(20));
    const notDb = await runCli(["check", "--db", text]);
    expect(notDb.code).toBe(1);
    expect(notDb.stderr).toContain("is not a SQLite database");
    const missing = await runCli(["check", "--db", join(sandbox.dir(), "missing.db")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("does not exist");
    expect(existsSync(join(sandbox.dir(), "missing.db"))).toBe(false);
  });
});

describe("leasequeue restore", () => {
  it("replaces a stopped server's database with the backup, keeps the replaced one, and the server starts on it", async () => {
    const live = join(sandbox.dir(), "live.db");
    const first = await seed(live, 30);
    const s = await start(live);
    const backup = join(sandbox.dir(), "backup.db");
    expect((await runCli(["backup", backup, "--db", live])).code).toBe(0);
    const { job: later } = await okJson(s.apiUrl, "Submit", { queue: "q0", task: "after-the-backup" });
    await s.stop();

    const r = await runCli(["restore", backup, "--db", live]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`restored: ${live}`);
    const kept = /kept as (\S+)/.exec(r.stdout)![1];
    expect(kept).toMatch(/live\.db\.replaced-\d{8}T\d{6}Z$/);
    expect(jobIds(kept).has(later.id)).toBe(true);
    expect(jobIds(live).has(later.id)).toBe(false);

    const again = await start(live);
    expect((await okJson(again.apiUrl, "GetJob", { jobId: first[7] })).job.id).toBe(first[7]);
    expect((await callJson(again.apiUrl, "GetJob", { jobId: later.id })).status).toBe(404);
    expect((await callJson(again.apiUrl, "Submit", { queue: "q0", task: "after-restore" })).status).toBe(200);
  });

  it("discards a crashed server's -wal and -shm with the database they belong to", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 20);
    const backup = join(sandbox.dir(), "backup.db");
    expect((await runCli(["backup", backup, "--db", live])).code).toBe(0);
    const s = await start(live);
    const { job: unsaved } = await okJson(s.apiUrl, "Submit", { queue: "q0", task: "only-in-the-wal" });
    await s.stop("SIGKILL");
    expect(existsSync(`${live}-wal`)).toBe(true);

    const r = await runCli(["restore", backup, "--db", live]);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(`${live}-wal`)).toBe(false);
    expect(existsSync(`${live}-shm`)).toBe(false);
    const kept = /kept as (\S+)/.exec(r.stdout)![1];
    expect(jobIds(kept).has(unsaved.id)).toBe(true);

    const again = await start(live);
    expect((await callJson(again.apiUrl, "GetJob", { jobId: unsaved.id })).status).toBe(404);
    const check = await runCli(["check", "--db", live]);
    expect(check.code, check.stderr).toBe(0);
  });

  it("replaces a database file that is no database any more", async () => {
    const live = join(sandbox.dir(), "live.db");
    const ids = await seed(live, 5);
    const backup = join(sandbox.dir(), "backup.db");
    expect((await runCli(["backup", backup, "--db", live])).code).toBe(0);
    writeFileSync(live, "overwritten by accident ".repeat(200));
    const r = await runCli(["restore", backup, "--db", live]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("note: the replaced file was not a readable database (SQLITE_NOTADB");
    expect(jobIds(live)).toEqual(new Set(ids));
  });

  it("refuses while a server holds the database, or any other process has it open", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 10);
    const backup = join(sandbox.dir(), "backup.db");
    expect((await runCli(["backup", backup, "--db", live])).code).toBe(0);
    const s = await start(live);
    const r = await runCli(["restore", backup, "--db", live]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/is in use by another LeaseQueue process \(a server, a restore or an import holds .*\.lock\); stop it first/);
    expect((await callJson(s.apiUrl, "Submit", { queue: "q0", task: "still-serving" })).status).toBe(200);
    await s.stop();
    expect(readdirSync(sandbox.dir()).filter((f) => f.includes(".replaced-") || f.includes(".restoring-"))).toEqual([]);

    // A server of an older release holds no lock file, but its connection keeps the file open.
    const other = new Database(live);
    other.pragma("journal_mode = WAL");
    other.prepare("SELECT count(*) FROM jobs").get();
    try {
      const open = await runCli(["restore", backup, "--db", live]);
      expect(open.code).toBe(1);
      expect(open.stderr).toContain("is open in another process");
    } finally {
      other.close();
    }
    expect(readdirSync(sandbox.dir()).filter((f) => f.includes(".replaced-") || f.includes(".restoring-"))).toEqual([]);
  });

  it("refuses a bad backup, with a message, and leaves the database as it was", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 600);
    const backup = join(sandbox.dir(), "backup.db");
    expect((await runCli(["backup", backup, "--db", live])).code).toBe(0);
    const before = hash(live);

    const corrupted = join(sandbox.dir(), "corrupted.db");
    copyFileSync(backup, corrupted);
    corruptPageOf(corrupted, "jobs");
    const bad = await runCli(["restore", corrupted, "--db", live]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`backup ${corrupted} cannot be restored:`);
    expect(bad.stderr).toMatch(/- integrity: /);

    const newer = join(sandbox.dir(), "newer.db");
    copyFileSync(backup, newer);
    setUserVersion(newer, LATEST_SCHEMA_VERSION + 1);
    const tooNew = await runCli(["restore", newer, "--db", live]);
    expect(tooNew.code).toBe(1);
    expect(tooNew.stderr).toContain("newer than this LeaseQueue release knows");

    const text = join(sandbox.dir(), "notes.txt");
    writeFileSync(text, "not a database ".repeat(100));
    const notDb = await runCli(["restore", text, "--db", live]);
    expect(notDb.code).toBe(1);
    expect(notDb.stderr).toContain("is not a SQLite database");

    const empty = join(sandbox.dir(), "empty.db");
    new Database(empty).close();
    const notOurs = await runCli(["restore", empty, "--db", live]);
    expect(notOurs.code).toBe(1);
    expect(notOurs.stderr).toContain("is not a LeaseQueue database");

    const missing = await runCli(["restore", join(sandbox.dir(), "missing.db"), "--db", live]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("does not exist");

    expect(hash(live)).toBe(before);
    expect(readdirSync(sandbox.dir()).filter((f) => f.includes(".replaced-") || f.includes(".restoring-"))).toEqual([]);
  });

  it("refuses a database directory that takes no new file, naming the directory, before taking the lock", async () => {
    const live = join(sandbox.dir(), "live.db");
    await seed(live, 3);
    const backup = join(sandbox.dir(), "backup.db");
    expect((await runCli(["backup", backup, "--db", live])).code).toBe(0);
    // sysfs holds no regular files: creating one fails for every user, root included.
    const r = await runCli(["restore", backup, "--db", "/sys/x.db"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(/^leasequeue restore: cannot write \/sys\/x\.db: the directory \/sys is not writable \(E[A-Z]+\)$/);
  });
});

describe("the maintenance commands on the command line", () => {
  it("are listed by --help, and misuse is a usage error (exit 2) that touches nothing", async () => {
    const help = await runCli(["--help"]);
    for (const usage of [
      "leasequeue backup FILE [--force]",
      "leasequeue check [--quick]",
      "leasequeue restore BACKUP",
      "leasequeue import-litequeue FILE --queue NAME [--task NAME] [--dry-run]",
    ]) {
      expect(help.stdout).toContain(usage);
    }
    const db = join(sandbox.dir(), "never.db");
    const misuse = [
      [["backup", "--db", db], "backup takes FILE, got none"],
      [["restore", "a.db", "b.db", "--db", db], 'restore takes BACKUP, got "a.db b.db"'],
      [["check", "--force", "--db", db], "--force is not an option of check"],
      [["serve", "--queue", "q", "--db", db], "--queue is not an option of serve"],
    ] as const;
    for (const [args, message] of misuse) {
      const r = await runCli([...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(message);
    }
    expect(readdirSync(sandbox.dir())).toEqual([]);
  });

  it("name a database directory the user cannot write: check cannot read a WAL database there, restore and import write nothing", async () => {
    const backup = join(sandbox.dir(), "backup.db");
    await seed(join(sandbox.dir(), "source.db"), 5);
    expect((await runCli(["backup", backup, "--db", join(sandbox.dir(), "source.db")])).code).toBe(0);
    const litequeue = join(sandbox.dir(), "emails.sqlite3");
    writeLitequeueFile(litequeue, [
      { data: "{}", message_id: "019ad5a2-7b3c-7def-8123-4567890abc00", status: READY, in_time: 1_764_580_000_000_000_000n },
    ]);
    // In rollback-journal mode it reads in a directory the user cannot write, as the backup does.
    const lq = new Database(litequeue);
    lq.pragma("journal_mode = DELETE");
    lq.close();
    const dir = join(sandbox.dir(), "read-only");
    mkdirSync(dir);
    const live = join(dir, "live.db");
    await seed(live, 5);
    expect(readdirSync(dir)).toEqual(["live.db"]);
    const before = hash(live);
    // Root writes any directory: as root, the commands run as nobody.
    const user = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;
    const asUser = (args: string[]) => runCli(args, {}, undefined, user);
    chmodSync(sandbox.dir(), 0o755);
    chmodSync(dir, 0o555);
    try {
      const notWritable = `the directory ${dir} is not writable (EACCES)`;
      const check = await asUser(["check", "--db", live]);
      expect(check.code).toBe(1);
      expect(check.stderr.trim()).toBe(
        `leasequeue check: cannot read database ${live} (in WAL mode, SQLite must create ${live}-shm to read it): ${notWritable}`,
      );
      const restore = await asUser(["restore", backup, "--db", live]);
      expect(restore.code).toBe(1);
      expect(restore.stderr.trim()).toBe(`leasequeue restore: cannot write ${live}: ${notWritable}`);
      const imported = await asUser(["import-litequeue", litequeue, "--queue", "emails", "--db", live]);
      expect(imported.code).toBe(1);
      expect(imported.stderr.trim()).toBe(`leasequeue import-litequeue: cannot write ${live}: ${notWritable}`);
    } finally {
      chmodSync(dir, 0o755);
    }
    expect(readdirSync(dir)).toEqual(["live.db"]);
    expect(hash(live)).toBe(before);
  }, 60_000);
});
