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
import type { EventDraft, Job, JobEvent } from "../../domain/job.js";
import type { NewJob } from "../../domain/submission.js";
import type { ClaimOutcome, CommittedChange, SubmitOutcome, WriteOutcome } from "../store.js";
import type { WriteName } from "../write-calls.js";
import type { DatabaseFileReport } from "./lost-file.js";

/** The store's options that cross to the thread (plain data: the clock and callbacks stay on the main thread). */
export interface StoreThreadOptions {
  path: string;
  synchronous?: "full" | "normal";
  busyTimeoutMs?: number;
  maxBatch?: number;
  otherWritersPollMs?: number;
  maxRecoveredPerSweep?: number;
  fileCheckIntervalMs?: number;
}

/** The reads a Store offers; the thread answers them from its connection. */
export const READ_NAMES = [
  "getJob",
  "listJobs",
  "listJobEvents",
  "listEvents",
  "eventBounds",
  "queueCounts",
  "queueActivity",
  "queueBacklog",
  "listGroups",
  "countPendingGroups",
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
 * announcement, a write transaction's outcome, news of the database file.
 */
export type Out =
  | { a: number; v: unknown }
  | { a: number; e: EncodedError }
  | { change: PackedChange }
  | { outcome: WriteOutcome }
  | { file: DatabaseFileReport };

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

// ---------------------------------------------------------------- packing
// Jobs and events cross as flat arrays of their fields in a fixed order,
// never as an object per job: structured clone writes every key of every
// object, and for a batch of 100 that is most of the cost of the crossing
// (bench/store-thread.mjs measures both).

const JOB_FIELDS = [
  "id",
  "queue",
  "task",
  "payloadJson",
  "priority",
  "state",
  "attempts",
  "maxAttempts",
  "retryBaseDelayMs",
  "scheduleTime",
  "createTime",
  "updateTime",
  "finishTime",
  "workerId",
  "leaseExpireTime",
  "deliveries",
  "lastError",
  "resultJson",
  "progressJson",
  "groupKey",
  "traceContext",
] as const satisfies ReadonlyArray<keyof Job>;
const DRAFT_FIELDS = [
  "jobId",
  "queue",
  "kind",
  "fromState",
  "toState",
  "eventTime",
  "workerId",
  "attempt",
  "message",
  "groupKey",
] as const satisfies ReadonlyArray<keyof EventDraft>;
const EVENT_FIELDS = ["sequence", ...DRAFT_FIELDS] as const satisfies ReadonlyArray<keyof JobEvent>;
const NEW_JOB_FIELDS = [
  "queue",
  "task",
  "payloadJson",
  "priority",
  "maxAttempts",
  "retryBaseDelayMs",
  "schedule",
  "idempotencyKey",
  "groupKey",
  "traceContext",
] as const satisfies ReadonlyArray<keyof NewJob>;

// Every field is in its list: a field added to a type and not here fails to compile.
type Covers<T, F extends readonly unknown[]> = [Exclude<keyof T, F[number]>] extends [never] ? true : never;
const covered: [Covers<Job, typeof JOB_FIELDS>, Covers<JobEvent, typeof EVENT_FIELDS>, Covers<NewJob, typeof NEW_JOB_FIELDS>] = [
  true,
  true,
  true,
];
void covered;

function packRows<T>(items: readonly T[], fields: ReadonlyArray<keyof T>): unknown[] {
  const out = new Array<unknown>(items.length * fields.length);
  let k = 0;
  for (const item of items) for (const f of fields) out[k++] = item[f];
  return out;
}

function unpackRows<T>(flat: readonly unknown[], fields: ReadonlyArray<keyof T>): T[] {
  const n = fields.length;
  const out = new Array<T>(flat.length / n);
  for (let r = 0, k = 0; r < out.length; r++) {
    const item: Record<PropertyKey, unknown> = {};
    for (let f = 0; f < n; f++) item[fields[f]] = flat[k++];
    out[r] = item as T;
  }
  return out;
}

interface Codec<T> {
  pack(value: T): unknown;
  unpack(packed: unknown): T;
}

const jobs: Codec<Job[]> = {
  pack: (v) => packRows(v, JOB_FIELDS),
  unpack: (p) => unpackRows(p as unknown[], JOB_FIELDS),
};
const oneJob: Codec<Job | undefined> = {
  pack: (v) => (v === undefined ? undefined : packRows([v], JOB_FIELDS)),
  unpack: (p) => (p === undefined ? undefined : unpackRows<Job>(p as unknown[], JOB_FIELDS)[0]),
};
const events: Codec<JobEvent[]> = {
  pack: (v) => packRows(v, EVENT_FIELDS),
  unpack: (p) => unpackRows(p as unknown[], EVENT_FIELDS),
};
const submitOutcomes: Codec<SubmitOutcome[]> = {
  pack: (v) => [
    packRows(
      v.map((o) => o.job),
      JOB_FIELDS,
    ),
    v.map((o) => o.deduplicated),
  ],
  unpack: (p) => {
    const [rows, dedup] = p as [unknown[], boolean[]];
    return unpackRows<Job>(rows, JOB_FIELDS).map((job, i) => ({ job, deduplicated: dedup[i] }));
  },
};
const claimOutcome: Codec<ClaimOutcome> = {
  pack: (v) => [
    packRows(
      v.leases.map((l) => l.job),
      JOB_FIELDS,
    ),
    v.leases.map((l) => l.leaseToken),
    v.heldBack,
    v.nextScheduleTime,
  ],
  unpack: (p) => {
    const [rows, tokens, heldBack, nextScheduleTime] = p as [unknown[], string[], ClaimOutcome["heldBack"], number | null];
    return { leases: unpackRows<Job>(rows, JOB_FIELDS).map((job, i) => ({ job, leaseToken: tokens[i] })), heldBack, nextScheduleTime };
  },
};

/** How each call's answer crosses back; the rest cross as they are (small, or rare). */
const ANSWERS: Partial<Record<WriteName | ReadName, Codec<never>>> = {
  submit: submitOutcomes,
  claim: claimOutcome,
  heartbeat: oneJob,
  complete: oneJob,
  fail: oneJob,
  release: oneJob,
  snooze: oneJob,
  redrive: oneJob,
  cancel: oneJob,
  getJob: oneJob,
  listJobs: jobs,
  listJobEvents: events,
  listEvents: events,
} as Partial<Record<WriteName | ReadName, Codec<never>>>;

export function packAnswer(name: WriteName | ReadName, value: unknown): unknown {
  const codec = ANSWERS[name] as Codec<unknown> | undefined;
  return codec === undefined ? value : codec.pack(value);
}

export function unpackAnswer(name: WriteName | ReadName, packed: unknown): unknown {
  const codec = ANSWERS[name] as Codec<unknown> | undefined;
  return codec === undefined ? packed : codec.unpack(packed);
}

/** A call's arguments as they cross: a submit's jobs as rows. */
export function packArgs(name: WriteName | ReadName, args: unknown[]): unknown[] {
  return name === "submit" ? [packRows(args[0] as NewJob[], NEW_JOB_FIELDS)] : args;
}

export function unpackArgs(name: WriteName | ReadName, args: unknown[]): unknown[] {
  return name === "submit" ? [unpackRows<NewJob>(args[0] as unknown[], NEW_JOB_FIELDS)] : args;
}

/** A commit's announcement as it crosses. */
export type PackedChange = Omit<CommittedChange, "events" | "unrecorded"> & { events: unknown[]; unrecorded: unknown[] };

export function packChange(change: CommittedChange): PackedChange {
  return { ...change, events: packRows(change.events, EVENT_FIELDS), unrecorded: packRows(change.unrecorded, DRAFT_FIELDS) };
}

export function unpackChange(packed: PackedChange): CommittedChange {
  return { ...packed, events: unpackRows(packed.events, EVENT_FIELDS), unrecorded: unpackRows(packed.unrecorded, DRAFT_FIELDS) };
}
