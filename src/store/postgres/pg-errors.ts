/**
 * How the PostgreSQL store tells the database's failures (readiness,
 * docs/api.md "Side port") from refusals and bugs, and what callers are told.
 *
 * An error with a SQLSTATE came from the server (node-postgres
 * DatabaseError); one without came from the connection (refused, reset,
 * terminated, timed out while connecting).
 */
import { QueueError } from "../../domain/errors.js";
import type { WriteFailureCause, WriteOutcome } from "../store.js";

/** The SQLSTATE of a server error, or undefined for an error of the connection or of our own code. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && (err as { severity?: unknown }).severity !== undefined
    ? code
    : undefined;
}

/** Errors of the connection itself: the database is unreachable or went away mid-call. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const state = sqlState(err);
  if (state !== undefined) {
    // admin_shutdown, crash_shutdown, cannot_connect_now, connection_exception class, too_many_connections.
    return state.startsWith("08") || state === "57P01" || state === "57P02" || state === "57P03" || state === "53300";
  }
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== undefined && /^E[A-Z]+$/.test(code)) return true; // ECONNREFUSED, ECONNRESET, ETIMEDOUT, EPIPE, ...
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable/i.test(
    err.message,
  );
}

/** A conflict with a concurrent transaction that the whole transaction should simply retry. */
export function isRetryableConflict(err: unknown): boolean {
  const state = sqlState(err);
  return state === "40001" || state === "40P01";
}

/** An error the database raised inside a transaction (it is then aborted: only a rollback helps). */
export function isDatabaseError(err: unknown): boolean {
  return sqlState(err) !== undefined;
}

function failureCause(err: unknown): WriteFailureCause | undefined {
  if (isConnectionError(err)) return "other";
  const state = sqlState(err);
  if (state === undefined) return undefined;
  if (state === "53100") return "disk_full";
  if (state === "58030") return "io_error";
  if (state === "25006") return "readonly";
  if (state === "57014" || state === "55P03") return "busy";
  if (state.startsWith("53") || state.startsWith("58")) return "other";
  return undefined;
}

function describe(err: unknown): string {
  const state = sqlState(err);
  const message = err instanceof Error ? err.message : String(err);
  if (state !== undefined) return `SQLSTATE ${state}: ${message}`;
  if (isConnectionError(err)) return `the database is unreachable: ${message}`;
  return message;
}

/** The failure an error means for write health; undefined when it is a refusal or a bug, not the database. */
export function writeFailureOf(err: unknown): WriteOutcome | undefined {
  if (err instanceof QueueError && err.reason === "STORE_UNAVAILABLE") {
    return { ok: false, cause: (err.metadata.cause as WriteFailureCause | undefined) ?? "other", message: err.message };
  }
  const cause = failureCause(err);
  return cause === undefined ? undefined : { ok: false, cause, message: describe(err) };
}

/** The failure to report for a transaction that could not commit, whatever the error. */
export function transactionFailure(err: unknown): WriteOutcome {
  return writeFailureOf(err) ?? { ok: false, cause: "other", message: describe(err) };
}

/** What a caller is answered for an error: STORE_UNAVAILABLE for the database's failures, else the error itself. */
export function storeError(err: unknown): unknown {
  if (err instanceof QueueError) return err;
  const cause = failureCause(err);
  if (cause === undefined) return err;
  const state = sqlState(err);
  return new QueueError("STORE_UNAVAILABLE", `the database cannot take writes now (${describe(err)})`, {
    ...(state !== undefined ? { code: state } : {}),
    cause,
  });
}
