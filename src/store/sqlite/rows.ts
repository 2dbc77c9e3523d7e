/**
 * Job and event rows of the SQLite store as domain values, and back. Job
 * rows are read as arrays in JOB_COLUMN_NAMES order (sql.ts: better-sqlite3's
 * raw mode) and bound by position.
 */
import type { JobEvent, JobState, StoredJob } from "../../domain/job.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import { scheduleColumns, scheduleFromColumns, type ScheduleColumns } from "../schedule-columns.js";

/** A job row as its columns, in JOB_COLUMN_NAMES order. */
export type JobRow = unknown[];

export type Row = Record<string, unknown>;

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
  };
}

/** The values of a job in JOB_COLUMN_NAMES order, for insertJob (also used by the litequeue import). */
export function jobRow(j: StoredJob): JobRow {
  return [
    j.id,
    j.queue,
    j.task,
    j.payloadJson,
    j.priority,
    j.state,
    j.attempts,
    j.maxAttempts,
    j.retryBaseDelayMs,
    j.scheduleTime,
    j.createTime,
    j.updateTime,
    j.finishTime,
    j.workerId,
    j.leaseExpireTime,
    j.leaseDurationMs,
    tokenHashBlob(j.leaseTokenHash),
    j.deliveries,
    j.lastError,
    j.resultJson,
    j.idempotencyKey,
    j.requestHash,
    j.heartbeatEventTime,
  ];
}

export function tokenHashBlob(hash: Uint8Array | null): Buffer | null {
  return hash === null ? null : Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength);
}

export function toEvent(r: Row): JobEvent {
  return {
    sequence: r.sequence as number,
    jobId: r.job_id as string,
    queue: r.queue as string,
    kind: r.kind as JobEvent["kind"],
    fromState: r.from_state as JobState | null,
    toState: r.to_state as JobState,
    eventTime: r.event_time as number,
    workerId: r.worker_id as string | null,
    attempt: r.attempt as number,
    message: r.message as string | null,
  };
}

/** A schedules row (paused as 0 or 1) as a domain schedule. */
export function toSchedule(r: Row): StoredSchedule {
  return scheduleFromColumns({ ...(r as unknown as ScheduleColumns), paused: r.paused === 1 });
}

/** The named parameters of upsertSchedule. */
export function scheduleRow(s: StoredSchedule): Omit<ScheduleColumns, "paused"> & { paused: 0 | 1 } {
  const columns = scheduleColumns(s);
  return { ...columns, paused: columns.paused ? 1 : 0 };
}
