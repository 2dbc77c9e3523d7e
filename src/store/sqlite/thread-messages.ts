/**
 * What crosses between the SQLite store's facade on the main thread
 * (threaded-store.ts) and its store thread (store-thread.ts), and how
 * errors cross (structured clone keeps an Error's message but not its
 * class, and the callers tell refusals apart by class and reason).
 *
 * Both directions send one message per turn of their event loop with
 * everything of that turn in it (docs/performance.md "The store thread"):
 * the calls of a turn go together into the thread's next transaction, and
 * the answers and announcements of a commit come back together.
 */
import { QueueError, type QueueErrorReason } from "../../domain/errors.js";
import { DatabaseRefusal, type DatabaseRefusalReason } from "../database-refusal.js";
import type { CommittedChange, WriteOutcome } from "../store.js";
import type { WriteName } from "../write-calls.js";

/** The store's options that cross to the thread (plain data: the clock and callbacks stay on the main thread). */
export interface StoreThreadOptions {
  path: string;
  synchronous?: "full" | "normal";
  busyTimeoutMs?: number;
  maxBatch?: number;
  otherWritersPollMs?: number;
  maxRecoveredPerSweep?: number;
}

/** The reads a Store offers; the thread answers them from its connection. */
export const READ_NAMES = [
  "getJob",
  "listJobs",
  "listJobEvents",
  "listEvents",
  "eventBounds",
  "queueCounts",
  "listSchedules",
  "nextScheduleRunTime",
  "lastJobId",
] as const;
export type ReadName = (typeof READ_NAMES)[number];

/**
 * Main thread to store thread: the calls of one turn, with the main
 * thread's clock at that turn (the store's injected clock stays on the
 * main thread; the thread reads its time from these stamps).
 */
export type ToThread = { kind: "calls"; now: number; calls: Call[] } | { kind: "close" };

/** One call: [id, "w" (write) or "r" (read), name, arguments]. */
export type Call = [id: number, type: "w", name: WriteName, args: unknown[]] | [id: number, type: "r", name: ReadName, args: unknown[]];

/** Store thread to main thread. */
export type FromThread =
  | { kind: "open"; durability: "wal-fsync" | "none" }
  | { kind: "openFailed"; error: EncodedError }
  | { kind: "out"; items: Out[] }
  | { kind: "closed" };

/**
 * What the thread reports, in the order it happened: an answer
 * ([id, value]), a refusal ([id, undefined, error]), a commit's
 * announcement, a write transaction's outcome.
 */
export type Out = { a: number; v: unknown } | { a: number; e: EncodedError } | { change: CommittedChange } | { outcome: WriteOutcome };

export type EncodedError =
  | { k: "queue"; reason: QueueErrorReason; message: string; metadata: Record<string, string> }
  | { k: "refusal"; reason: DatabaseRefusalReason; message: string }
  | { k: "error"; name: string; message: string; code?: string; stack?: string };

export function encodeError(err: unknown): EncodedError {
  if (err instanceof QueueError) return { k: "queue", reason: err.reason, message: err.message, metadata: { ...err.metadata } };
  if (err instanceof DatabaseRefusal) return { k: "refusal", reason: err.reason, message: err.message };
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return {
      k: "error",
      name: err.name,
      message: err.message,
      ...(typeof code === "string" ? { code } : {}),
      ...(err.stack !== undefined ? { stack: err.stack } : {}),
    };
  }
  return { k: "error", name: "Error", message: String(err) };
}

export function decodeError(e: EncodedError): Error {
  if (e.k === "queue") return new QueueError(e.reason, e.message, e.metadata);
  if (e.k === "refusal") return new DatabaseRefusal(e.reason, e.message);
  const err = new Error(e.message);
  err.name = e.name;
  if (e.code !== undefined) (err as Error & { code?: string }).code = e.code;
  if (e.stack !== undefined) err.stack = e.stack;
  return err;
}
