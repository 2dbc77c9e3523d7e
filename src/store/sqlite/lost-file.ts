/**
 * The database file removed, renamed or replaced under a running server
 * (docs/operations.md "The database file removed while serving").
 */
import { readdirSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import type Database from "better-sqlite3";
import { QueueError } from "../../domain/errors.js";
import { DatabaseRefusal } from "../database/database-refusal.js";
import { copyDatabaseInSteps } from "./backup.js";
import { datedPathBeside } from "./database-file.js";

/** Saved copies are named `<db>.saved-<UTC time>`. */
const SAVED_PURPOSE = "saved";

/** How long after a failed copy the next try comes (the directory recreated, room made). */
const SAVE_RETRY_MS = 10_000;

/** What the store tells about its database file, in the order it happens. */
export type DatabaseFileReport =
  /** The path no longer names the open file: writes are refused from now on, and a copy is being saved to `savingTo`. */
  | { kind: "lost"; path: string; reason: string; savingTo: string }
  /** The copy is complete (checked as a backup is). */
  | { kind: "saved"; path: string; savedTo: string; jobs: number; bytes: number }
  /** The copy could not be made (the directory is gone, the disk is full...): it is tried again every 10 s until `saved`. */
  | { kind: "saveFailed"; path: string; savingTo: string; error: string }
  /** The path names the open file again: writes are let through again. */
  | { kind: "back"; path: string };

export interface DatabaseFileWatchOptions {
  /** The database file, as the store opened it. */
  path: string;
  /** The store's connection: the copy is read through it. */
  db: Database.Database;
  /** How often the timer looks. */
  intervalMs: number;
  /** Monotonic milliseconds, for the retries of a failed copy. Default performance.now. */
  monotonicNow?: () => number;
  /** Told when the file is found lost (with the refusal writes get from now on) and when it is back (undefined). */
  changed(lost: QueueError | undefined): void;
  report(report: DatabaseFileReport): void;
}

/**
 * SQLite keeps using the file it opened, whatever happens to its name: after
 * an `rm` every commit still succeeds, into a file that no path names any
 * more and that the kernel frees when the process ends. So the store checks
 * that its path still names the file it opened (same device and inode),
 * before it answers each commit and on a timer. Once it does not, writes are
 * refused `unavailable` (the cause `file_lost`), and what the connection
 * still reads, every acknowledged job, is saved beside the database as
 * `<db>.saved-<UTC time>` (backup.ts copyDatabaseInSteps: in steps, the
 * event loop free between them), ready for `leasequeue restore`. If the name comes back to the same file (a
 * rename undone), writes resume.
 *
 * A server that starts where the database is missing but such a saved copy
 * is beside it refuses to create a new, empty database there.
 */
export class DatabaseFileWatch {
  readonly #opts: Required<Pick<DatabaseFileWatchOptions, "monotonicNow">> & DatabaseFileWatchOptions;
  readonly #path: string;
  readonly #dev: number;
  readonly #ino: number;
  readonly #timer: NodeJS.Timeout;
  #lost: QueueError | undefined;
  /** The copy not made yet (its first try failed), and when to try again (monotonic ms). */
  #unsaved: { target: string; retryAt: number } | undefined;
  /** The copy being saved now. */
  #saving: Promise<void> | undefined;

  /** Call right after the connection opened the file: the file the path names now is the one it has open. */
  constructor(options: DatabaseFileWatchOptions) {
    this.#opts = { monotonicNow: () => performance.now(), ...options };
    this.#path = resolve(options.path);
    const stat = statSync(this.#path);
    this.#dev = stat.dev;
    this.#ino = stat.ino;
    this.#timer = setInterval(() => this.check(), options.intervalMs);
    this.#timer.unref();
  }

  /** The refusal for writes while the file is lost; undefined while it is where it was. */
  get lost(): QueueError | undefined {
    return this.#lost;
  }

  /** Looks at the path now; returns the refusal when the file is lost. */
  check(): QueueError | undefined {
    const reason = this.#changed();
    if (reason === undefined) {
      if (this.#lost !== undefined) {
        this.#lost = undefined;
        this.#opts.changed(undefined);
        this.#opts.report({ kind: "back", path: this.#path });
      }
      return undefined;
    }
    if (this.#lost === undefined) this.#lose(reason);
    else if (this.#unsaved !== undefined && this.#opts.monotonicNow() >= this.#unsaved.retryAt) this.#save(this.#unsaved.target);
    return this.#lost;
  }

  /** Stops looking; settles once a copy being saved is written or has failed (the connection must stay open until then). */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#saving;
  }

  /** Why the path no longer names the open file, or undefined while it does (or when that cannot be told). */
  #changed(): string | undefined {
    let stat;
    try {
      stat = statSync(this.#path, { throwIfNoEntry: false });
    } catch (err) {
      // A directory on the way replaced by a file; any other error (permissions) tells nothing either way.
      return (err as NodeJS.ErrnoException).code === "ENOTDIR" ? `${this.#path} no longer exists (removed or renamed)` : undefined;
    }
    if (stat === undefined) return `${this.#path} no longer exists (removed or renamed)`;
    if (stat.dev !== this.#dev || stat.ino !== this.#ino) return `${this.#path} is now another file (replaced)`;
    return undefined;
  }

  #lose(reason: string): void {
    const savingTo = datedPathBeside(this.#path, SAVED_PURPOSE, new Date());
    this.#lost = new QueueError(
      "STORE_UNAVAILABLE",
      `the database cannot take writes now (file_lost): ${reason}, so nothing written to it would be kept; ` +
        `what the server holds is being saved to ${savingTo} (see docs/operations.md "The database file removed while serving")`,
      { cause: "file_lost" },
    );
    this.#opts.changed(this.#lost);
    this.#opts.report({ kind: "lost", path: this.#path, reason, savingTo });
    // Next turn: the copy never runs inside the commit or fsync callback that noticed.
    setImmediate(() => this.#save(savingTo));
  }

  /**
   * Saves the copy, in steps that leave the event loop free between them (the
   * server keeps answering reads and health checks meanwhile); a failed try
   * is reported once and tried again every SAVE_RETRY_MS by the timer's looks.
   */
  #save(target: string): void {
    if (this.#saving !== undefined) return;
    const retry = this.#unsaved !== undefined;
    this.#unsaved = undefined;
    this.#saving = copyDatabaseInSteps(this.#opts.db, target)
      .then((copy) => {
        this.#opts.report({ kind: "saved", path: this.#path, savedTo: copy.path, jobs: copy.totalJobs, bytes: copy.bytes });
      })
      .catch((err: unknown) => {
        this.#unsaved = { target, retryAt: this.#opts.monotonicNow() + SAVE_RETRY_MS };
        if (!retry) this.#opts.report({ kind: "saveFailed", path: this.#path, savingTo: target, error: (err as Error).message });
      })
      .finally(() => {
        this.#saving = undefined;
      });
  }
}

/** The copies saved beside a database whose file was lost, oldest name first. */
export function savedCopiesOf(path: string): string[] {
  const full = resolve(path);
  const prefix = `${basename(full)}.${SAVED_PURPOSE}-`;
  let names: string[];
  try {
    names = readdirSync(dirname(full));
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith(prefix) && !n.includes(".partial-"))
    .sort()
    .map((n) => join(dirname(full), n));
}

/**
 * Refuses to create a database at `path` while a copy saved from a lost one
 * is beside it: starting empty there would hide every job the copy holds.
 */
export function refuseNewBesideSavedCopy(path: string): void {
  if (path === ":memory:" || statSync(path, { throwIfNoEntry: false }) !== undefined) return;
  const saved = savedCopiesOf(path);
  if (saved.length === 0) return;
  const latest = saved[saved.length - 1];
  throw new DatabaseRefusal(
    "BAD_FILE",
    `${resolve(path)} does not exist, but ${latest} does: a server saved it when this database file was removed or replaced ` +
      `while it ran. Restore it with \`leasequeue restore ${latest} --db ${path}\`, or move the saved ` +
      `cop${saved.length === 1 ? "y" : "ies"} away to start with an empty database (docs/operations.md "The database file removed while serving")`,
  );
}
