/**
 * Files of the maintenance commands (backup, check, restore, import): opening
 * a database that must already exist without ever writing to it, creating a
 * new file (refused by name when its directory takes none), making it
 * durable, and naming the temporary files that become it.
 */
import { randomBytes } from "node:crypto";
import { accessSync, closeSync, constants, existsSync, fsyncSync, openSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import Database from "better-sqlite3";
import { DatabaseRefusal } from "../database/database-refusal.js";

/**
 * Opens an existing SQLite file read-only (a read-only connection never
 * checkpoints, so it changes nothing, even as the last one to close), with a
 * busy timeout for the moments a writer holds the WAL. `what` names the file
 * in messages ("database", "backup", "litequeue file").
 */
export function openExistingReadOnly(path: string, what: string): Database.Database {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) throw new DatabaseRefusal("BAD_FILE", `${what} ${path} does not exist`);
  if (!stat.isFile()) throw new DatabaseRefusal("BAD_FILE", `${what} ${path} is not a file`);
  const db = new Database(path, { readonly: true, fileMustExist: true, timeout: 5000 });
  try {
    // Reads the header: a file that is not a database fails here.
    db.pragma("schema_version", { simple: true });
  } catch (err) {
    db.close();
    if (err instanceof Database.SqliteError && /^SQLITE_(NOTADB|CORRUPT)/.test(err.code)) {
      throw new DatabaseRefusal("BAD_FILE", `${what} ${path} is not a SQLite database (${err.code}: ${err.message})`);
    }
    if (err instanceof Database.SqliteError && /^SQLITE_(READONLY_DIRECTORY|CANTOPEN)/.test(err.code)) {
      throw unreadableInDirectory(path, what) ?? err;
    }
    throw err;
  }
  return db;
}

/**
 * A WAL database is read through its `-shm` (and `-wal`), which a reader
 * creates beside it when they are missing: in a directory the user cannot
 * write, SQLite then fails the first read (SQLITE_READONLY_DIRECTORY, or
 * SQLITE_CANTOPEN when a `-wal` is there). The refusal names the directory;
 * undefined when the directory is writable, so the cause is another.
 */
function unreadableInDirectory(path: string, what: string): DatabaseRefusal | undefined {
  try {
    accessSync(dirname(path), constants.W_OK);
    return undefined;
  } catch (err) {
    return unwritableDirectory(err, path, `cannot read ${what} ${path} (in WAL mode, SQLite must create ${path}-shm to read it)`);
  }
}

/** Whether two paths name the same file (same device and inode); false when either does not exist. */
export function sameFile(a: string, b: string): boolean {
  const sa = statSync(a, { throwIfNoEntry: false });
  const sb = statSync(b, { throwIfNoEntry: false });
  return sa !== undefined && sb !== undefined && sa.dev === sb.dev && sa.ino === sb.ino;
}

/**
 * A fresh name beside `path` (same directory, so a rename onto `path` is
 * atomic), saying what it is: `<name>.<purpose>-<random>`. A file with such
 * a name left behind by a killed command is incomplete and may be deleted.
 */
export function temporaryPathBeside(path: string, purpose: string): string {
  return join(dirname(path), `${basename(path)}.${purpose}-${randomBytes(4).toString("hex")}`);
}

/**
 * A name beside `path` that no file has yet, saying what it is and when:
 * `<path>.<purpose>-<UTC time>` (`-2`, `-3`... when taken), for the files
 * an operator keeps (a replaced database, a saved copy).
 */
export function datedPathBeside(path: string, purpose: string, now: Date): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");
  const base = `${path}.${purpose}-${stamp}`;
  let name = base;
  for (let n = 2; existsSync(name); n++) name = `${base}-${n}`;
  return name;
}

/**
 * Creates `path` as a new empty file, which VACUUM INTO then fills (it
 * accepts an empty file): a directory that takes no new file is refused
 * before any copying, naming the directory instead of SQLite's
 * SQLITE_CANTOPEN on the temporary name. `target` is the file the caller is
 * making, named in the refusal.
 */
export function createEmptyFile(path: string, target: string): void {
  try {
    closeSync(openSync(path, "wx", 0o644));
  } catch (err) {
    throw unwritableDirectory(err, target) ?? err;
  }
}

/**
 * Refuses, naming it, a directory that takes no new file, for a command
 * about to create files beside `target` (a lock file, the database, its
 * -wal): creates an empty file there (createEmptyFile) and deletes it again.
 */
export function refuseUnwritableDirectory(target: string): void {
  const probe = temporaryPathBeside(target, "probe");
  createEmptyFile(probe, target);
  rmSync(probe, { force: true });
}

/** System error codes of a file creation refused by the directory or its file system, not by a full disk or a bug. */
const NOT_WRITABLE = new Set(["EACCES", "EPERM", "EROFS", "ENOENT"]);

/**
 * The refusal for an error creating a file for `target` in its directory
 * (or from access(2) asking whether the user may) when the directory takes
 * no new file (its permissions, a read-only file system, a file system that
 * holds no regular files such as /proc or /sys); undefined for any other
 * error, which the caller rethrows. `failed` says what could not be done
 * (default: writing `target`).
 */
export function unwritableDirectory(err: unknown, target: string, failed = `cannot write ${target}`): DatabaseRefusal | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== "string" || !NOT_WRITABLE.has(code)) return undefined;
  return new DatabaseRefusal("BAD_FILE", `${failed}: the directory ${dirname(target)} is not writable (${code})`);
}

/** Flushes a file's data to the disk. */
export function fsyncFile(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Makes renames and new names in a directory durable. */
export function fsyncDirectory(dir: string): void {
  fsyncFile(dir);
}

/** Bytes of a file, 0 when it does not exist. */
export function fileBytes(path: string): number {
  return statSync(path, { throwIfNoEntry: false })?.size ?? 0;
}
