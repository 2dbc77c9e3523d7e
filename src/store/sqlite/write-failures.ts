/**
 * How the SQLite store tells the disk's failures (readiness, docs/api.md
 * "Side port") from refusals and bugs, and what it answers for them.
 */
import Database from "better-sqlite3";
import { QueueError } from "../../domain/errors.js";
import type { WriteFailureCause, WriteOutcome } from "../store.js";

/** SQLite error codes that mean "the database cannot take writes now", not a bug. */
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|CORRUPT|NOTADB|PROTOCOL)/;

/** The cause of a failed write, from the SQLite (extended) error code. */
export function writeFailureCause(code: string): WriteFailureCause {
  if (code.startsWith("SQLITE_FULL")) return "disk_full";
  if (code.startsWith("SQLITE_IOERR")) return "io_error";
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "busy";
  if (code.startsWith("SQLITE_READONLY")) return "readonly";
  return "other";
}

/** The failure a write error means for write health; undefined when it is a refusal or a bug, not the disk. */
export function writeFailureOf(err: unknown): WriteOutcome | undefined {
  if (!(err instanceof Database.SqliteError) || !UNAVAILABLE_CODES.test(err.code)) return undefined;
  return { ok: false, cause: writeFailureCause(err.code), message: `${err.code}: ${err.message}` };
}

/** A transaction lost to something that is not one of the disk's known failures. */
export function otherWriteFailure(err: unknown): WriteOutcome {
  if (err instanceof QueueError && err.metadata.cause !== undefined) {
    return { ok: false, cause: err.metadata.cause as WriteFailureCause, message: err.message };
  }
  return { ok: false, cause: "other", message: err instanceof Error ? err.message : String(err) };
}

/** What a caller is answered for an error: STORE_UNAVAILABLE for the disk's failures, else the error itself. */
export function storeError(err: unknown): unknown {
  if (err instanceof Database.SqliteError && UNAVAILABLE_CODES.test(err.code)) {
    return new QueueError("STORE_UNAVAILABLE", `the database cannot take writes now (${err.code})`, {
      code: err.code,
      cause: writeFailureCause(err.code),
    });
  }
  return err;
}

/** What a failed fsync of the WAL is answered as. */
export function syncFailure(err: unknown): QueueError {
  const code = (err as NodeJS.ErrnoException).code ?? "unknown";
  const cause: WriteFailureCause = code === "ENOSPC" || code === "EDQUOT" ? "disk_full" : code === "EROFS" ? "readonly" : "io_error";
  return new QueueError("STORE_UNAVAILABLE", `the database cannot take writes now (fsync of the WAL failed: ${code})`, { code, cause });
}
