/**
 * The columns of a job row, shared by both engines: their names (the same
 * in SQLite and PostgreSQL), the order every job query selects them in, and
 * the mapping between a row (read as an array in that order: building and
 * reading objects with 28 named keys costs more than the B-tree work of a
 * lookup) and a StoredJob.
 *
 * The lease token hash is the one column whose bound type differs (SQLite
 * binds a Buffer, PostgreSQL hex text that SQL decodes): each engine passes
 * its own `bindHash`.
 */
import type { DependencyPolicy, JobState, StoredJob } from "../../domain/job.js";

/** A job row as its column values, in JOB_COLUMN_NAMES order. */
export type JobRow = unknown[];

type Getter = (j: StoredJob) => unknown;

/** Each column's name and where its value is in a StoredJob; the order is the row's. */
const COLUMNS = [
  ["id", (j) => j.id],
  ["queue", (j) => j.queue],
  ["task", (j) => j.task],
  ["payload", (j) => j.payloadJson],
  ["priority", (j) => j.priority],
  ["state", (j) => j.state],
  ["attempts", (j) => j.attempts],
  ["max_attempts", (j) => j.maxAttempts],
  ["retry_base_delay_ms", (j) => j.retryBaseDelayMs],
  ["schedule_time", (j) => j.scheduleTime],
  ["create_time", (j) => j.createTime],
  ["update_time", (j) => j.updateTime],
  ["finish_time", (j) => j.finishTime],
  ["worker_id", (j) => j.workerId],
  ["lease_expire_time", (j) => j.leaseExpireTime],
  ["lease_duration_ms", (j) => j.leaseDurationMs],
  ["lease_token_hash", (j) => j.leaseTokenHash],
  ["deliveries", (j) => j.deliveries],
  ["last_error", (j) => j.lastError],
  ["result", (j) => j.resultJson],
  ["idempotency_key", (j) => j.idempotencyKey],
  ["request_hash", (j) => j.requestHash],
  ["heartbeat_event_time", (j) => j.heartbeatEventTime],
  ["progress", (j) => j.progressJson],
  ["progress_event_time", (j) => j.progressEventTime],
  ["group_key", (j) => j.groupKey],
  ["traceparent", (j) => j.traceContext?.traceparent ?? null],
  ["tracestate", (j) => (j.traceContext === null || j.traceContext.tracestate === "" ? null : j.traceContext.tracestate)],
  // Dependencies (docs/api.md "Workflows"): depends_on as JSON text (NULL: none) and the policy, fixed at
  // submit; the counts, changed by the dependencies' transitions (TransactionPort.countDependencyChange);
  // has_dependents, set when a job that depends on this one is submitted (TransactionPort.insertDependencies).
  ["depends_on", (j) => (j.dependsOn.length === 0 ? null : JSON.stringify(j.dependsOn))],
  ["dependency_policy", (j) => j.dependencyPolicy],
  ["deps_total", (j) => j.dependencyCounts?.total ?? 0],
  ["deps_completed", (j) => j.dependencyCounts?.completed ?? 0],
  ["deps_failed", (j) => j.dependencyCounts?.failed ?? 0],
  ["has_dependents", (j) => (j.hasDependents ? 1 : 0)],
] as const satisfies ReadonlyArray<readonly [string, Getter]>;

export type JobColumn = (typeof COLUMNS)[number][0];

export const JOB_COLUMN_NAMES: readonly JobColumn[] = COLUMNS.map(([name]) => name);

/** The columns a transition may change (the rest are fixed at submit), in the order updates bind them. */
export const UPDATED_JOB_COLUMN_NAMES: readonly JobColumn[] = [
  "state",
  "attempts",
  "schedule_time",
  "update_time",
  "finish_time",
  "worker_id",
  "lease_expire_time",
  "lease_duration_ms",
  "lease_token_hash",
  "deliveries",
  "last_error",
  "result",
  "heartbeat_event_time",
  "progress",
  "progress_event_time",
];

const GETTERS = new Map<JobColumn, Getter>(COLUMNS);

/** How an engine binds the token hash (SQLite: a Buffer; PostgreSQL: hex text). */
export type BindHash = (hash: Uint8Array | null) => unknown;

/** The job's values for `columns`, in that order. */
export function jobValues(j: StoredJob, columns: readonly JobColumn[], bindHash: BindHash): unknown[] {
  return columns.map((c) => (c === "lease_token_hash" ? bindHash(j.leaseTokenHash) : GETTERS.get(c)!(j)));
}

/** One array per column: the jobs' values for `columns` (PostgreSQL binds these to unnest). */
export function jobColumnArrays(jobs: readonly StoredJob[], columns: readonly JobColumn[], bindHash: BindHash): unknown[][] {
  return columns.map((c) => {
    if (c === "lease_token_hash") return jobs.map((j) => bindHash(j.leaseTokenHash));
    const get = GETTERS.get(c)!;
    return jobs.map(get);
  });
}

const NO_DEPENDENCIES: readonly string[] = Object.freeze([]);

/** A row read in JOB_COLUMN_NAMES order as a StoredJob (either engine: a blob comes back as a Buffer, a Uint8Array). */
export function toStoredJob(r: JobRow): StoredJob {
  return {
    id: r[0] as string,
    queue: r[1] as string,
    task: r[2] as string,
    payloadJson: r[3] as string,
    priority: r[4] as number,
    state: r[5] as JobState,
    attempts: r[6] as number,
    maxAttempts: r[7] as number,
    retryBaseDelayMs: r[8] as number,
    scheduleTime: r[9] as number,
    createTime: r[10] as number,
    updateTime: r[11] as number,
    finishTime: r[12] as number | null,
    workerId: r[13] as string | null,
    leaseExpireTime: r[14] as number | null,
    leaseDurationMs: r[15] as number | null,
    leaseTokenHash: r[16] as Uint8Array | null,
    deliveries: r[17] as number,
    lastError: r[18] as string | null,
    resultJson: r[19] as string | null,
    idempotencyKey: r[20] as string | null,
    requestHash: r[21] as string | null,
    heartbeatEventTime: r[22] as number | null,
    progressJson: r[23] as string | null,
    progressEventTime: r[24] as number | null,
    groupKey: r[25] as string,
    traceContext: r[26] === null ? null : { traceparent: r[26] as string, tracestate: (r[27] as string | null) ?? "" },
    dependsOn: r[28] === null ? NO_DEPENDENCIES : (JSON.parse(r[28] as string) as string[]),
    dependencyPolicy: r[29] as DependencyPolicy | null,
    dependencyCounts: r[29] === null ? null : { total: r[30] as number, completed: r[31] as number, failed: r[32] as number },
    hasDependents: r[33] === 1,
  };
}
