/**
 * litequeue rows -> LeaseQueue jobs
 * (docs/operations.md "Import from litequeue"), the same for every engine;
 * reading the litequeue file and writing the jobs are the engine's part.
 */
import type { EventDraft, JobState, StoredJob } from "../../domain/job.js";
import { isJobId } from "../../domain/ids.js";
import { jsonDepth, nestedTooDeepText } from "../../domain/json-depth.js";
import { BOUNDS, DEFAULTS } from "../../domain/request-bounds.js";

/** litequeue's MessageStatus values, and the state each one is imported in. */
export const LITEQUEUE_STATUSES = [
  { value: 0, name: "READY", state: "queued" },
  { value: 1, name: "LOCKED", state: "queued" },
  { value: 2, name: "DONE", state: "completed" },
  { value: 3, name: "FAILED", state: "dead" },
] as const satisfies ReadonlyArray<{ value: number; name: string; state: JobState }>;

/**
 * litequeue (https://github.com/litements/litequeue, 0.6 and later) keeps one
 * table `Queue`: `data` TEXT, `message_id` TEXT (a UUIDv7 in canonical
 * lower-case form), `status` INTEGER (READY 0, LOCKED 1, DONE 2, FAILED 3),
 * `in_time`, `lock_time`, `done_time` INTEGER nanoseconds since the epoch.
 *
 * One row as SQLite's dynamic typing may hold it: integers as bigint (read
 * exactly), text `data` as its bytes, anything else as it came.
 */
export interface LitequeueRow {
  rowid: bigint | number;
  data: unknown;
  messageId: unknown;
  status: unknown;
  inTime: unknown;
  lockTime: unknown;
  doneTime: unknown;
}

/**
 * The task of imported jobs when the import names none: litequeue has no
 * tasks (one consumer handles every message of a queue), and a worker can
 * tell these jobs by it.
 */
export const LITEQUEUE_DEFAULT_TASK = "litequeue";

export interface ImportTarget {
  queue: string;
  task: string;
}

export type MappedRow = { ok: true; job: StoredJob; event: EventDraft } | { ok: false; problem: string };

/** Nanosecond times before this (1973-03-03) are taken for seconds or milliseconds, not nanoseconds. */
const EARLIEST_NANOS = 100_000_000_000_000_000n;

/**
 * One row as a job and its SUBMITTED event, or what is wrong with the row:
 * - `message_id` becomes the job id, lower-cased like every id we store; it
 *   must be a UUID, because every RPC refuses a job_id that is not one
 *   (docs/api.md "Defaults and identity"). litequeue's ids are UUIDs, so the
 *   imported jobs answer GetJob, Redrive and Cancel by their litequeue id.
 * - `data` becomes the payload: parsed when it is JSON, else the JSON string
 *   holding the text. NULL (older tables allowed it) is a null payload. It
 *   must fit the payload bounds (64 KiB, 32 levels), like a Submit.
 * - READY and LOCKED -> QUEUED, eligible at once (a lock's owner cannot be
 *   known); DONE -> COMPLETED; FAILED -> DEAD.
 * - create_time = schedule_time = in_time; finish_time = done_time for
 *   COMPLETED and DEAD (falling back on lock_time, then in_time, when
 *   litequeue left it NULL, so retention can still age the job out);
 *   update_time = the latest of the three. Nanoseconds become milliseconds,
 *   rounded down, exactly (the times are read as 64-bit integers).
 * - deliveries = 1 when the message was ever locked (litequeue counts no
 *   more), else 0; attempts = deliveries for COMPLETED and DEAD, 0 for
 *   QUEUED (a fresh budget: the job will run again). Priority, max_attempts
 *   and retry_base_delay take Submit's defaults; no idempotency key.
 * - Each imported job gets one SUBMITTED event (from no state to the state it
 *   was imported in) at in_time, with the message "imported from litequeue
 *   (status DONE)": the event kinds of docs/api.md "The event model" have no
 *   other for it, and SUBMITTED is what starts a job's timeline.
 */
export function mapLitequeueRow(row: LitequeueRow, target: ImportTarget): MappedRow {
  const where = `row ${row.rowid}${typeof row.messageId === "string" ? ` (message_id ${row.messageId})` : ""}`;
  const fail = (problem: string): MappedRow => ({ ok: false, problem: `${where}: ${problem}` });

  if (row.messageId === null) return fail("message_id is NULL");
  if (typeof row.messageId !== "string") return fail(`message_id is ${describe(row.messageId)}, not text`);
  const id = row.messageId.toLowerCase();
  if (!isJobId(id)) return fail(`message_id "${row.messageId}" is not a UUID, and LeaseQueue job ids are UUIDs`);

  if (typeof row.status !== "bigint") return fail(`status is ${describe(row.status)}, not an integer`);
  const status = LITEQUEUE_STATUSES.find((s) => BigInt(s.value) === row.status);
  if (status === undefined) return fail(`status ${row.status} is not a litequeue status (0 READY, 1 LOCKED, 2 DONE, 3 FAILED)`);

  const times: Record<"in_time" | "lock_time" | "done_time", number | null> = { in_time: null, lock_time: null, done_time: null };
  for (const [field, value] of [
    ["in_time", row.inTime],
    ["lock_time", row.lockTime],
    ["done_time", row.doneTime],
  ] as const) {
    const ms = nanosToMs(value);
    if (typeof ms === "string") return fail(`${field} ${ms}`);
    times[field] = ms;
  }
  const inMs = times.in_time;
  if (inMs === null) return fail("in_time is NULL");

  const payload = payloadJson(row.data);
  if (!payload.ok) return fail(payload.problem);

  const state: JobState = status.state;
  const deliveries = times.lock_time === null ? 0 : 1;
  const finished = state !== "queued";
  const attempts = finished ? deliveries : 0;
  const job: StoredJob = {
    id,
    queue: target.queue,
    task: target.task,
    payloadJson: payload.json,
    priority: 0,
    state,
    attempts,
    maxAttempts: DEFAULTS.maxAttempts,
    retryBaseDelayMs: DEFAULTS.retryBaseDelayMs,
    scheduleTime: inMs,
    createTime: inMs,
    updateTime: Math.max(inMs, times.lock_time ?? inMs, times.done_time ?? inMs),
    finishTime: finished ? (times.done_time ?? times.lock_time ?? inMs) : null,
    workerId: null,
    leaseExpireTime: null,
    deliveries,
    lastError: null,
    resultJson: null,
    progressJson: null,
    leaseTokenHash: null,
    leaseDurationMs: null,
    idempotencyKey: null,
    requestHash: null,
    heartbeatEventTime: null,
    progressEventTime: null,
    groupKey: "",
    traceContext: null,
    dependsOn: [],
    dependencyCounts: null,
    dependencyPolicy: null,
    hasDependents: false,
  };
  const event: EventDraft = {
    jobId: id,
    queue: target.queue,
    groupKey: "",
    kind: "submitted",
    fromState: null,
    toState: state,
    eventTime: inMs,
    workerId: null,
    attempt: attempts,
    message: `imported from litequeue (status ${status.name})`,
  };
  return { ok: true, job, event };
}

/** Milliseconds of a nanosecond time, null for NULL, or what is wrong with it. */
function nanosToMs(value: unknown): number | null | string {
  if (value === null) return null;
  if (typeof value !== "bigint") return `is ${describe(value)}, not an integer`;
  if (value < EARLIEST_NANOS) {
    return `${value} is not a time in nanoseconds since the epoch (it would be before 1973; litequeue before 0.6 stored seconds)`;
  }
  return Number(value / 1_000_000n);
}

type Payload = { ok: true; json: string } | { ok: false; problem: string };

function payloadJson(data: unknown): Payload {
  let text: string;
  if (data === null) return { ok: true, json: "null" };
  if (data instanceof Uint8Array) {
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(data);
    } catch {
      return { ok: false, problem: "data is not valid UTF-8 text" };
    }
  } else if (typeof data === "bigint" || typeof data === "number" || typeof data === "string") {
    text = String(data);
  } else {
    return { ok: false, problem: `data is ${describe(data)}` };
  }
  const value = parsedJson(text);
  const json = value === undefined ? JSON.stringify(text) : JSON.stringify(value);
  const bytes = Buffer.byteLength(json, "utf8");
  if (bytes > BOUNDS.jsonBytes) {
    return { ok: false, problem: `data is ${bytes} bytes as a JSON payload; the limit is ${BOUNDS.jsonBytes} bytes` };
  }
  if (value !== undefined && jsonDepth(value) > BOUNDS.jsonDepth) {
    return { ok: false, problem: `data is JSON ${nestedTooDeepText()}` };
  }
  return { ok: true, json };
}

/** The parsed value when `text` is JSON that a payload can carry (finite numbers only), else undefined. */
function parsedJson(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return hasNonFiniteNumber(value) ? undefined : value;
}

function hasNonFiniteNumber(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === "number" && !Number.isFinite(v)) return true;
    if (v !== null && typeof v === "object") pending.push(...(Object.values(v) as unknown[]));
  }
  return false;
}

function describe(value: unknown): string {
  if (value === null) return "NULL";
  if (value instanceof Uint8Array) return "a blob";
  if (typeof value === "string") return `the text "${value.length > 40 ? `${value.slice(0, 40)}...` : value}"`;
  if (typeof value === "number") return `the real number ${value}`;
  if (typeof value === "bigint") return `bigint ${value}`;
  // SQLite hands back only NULL, text, numbers, bigints and blobs.
  return typeof value;
}
