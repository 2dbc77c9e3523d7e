/**
 * Job and event rows of the SQLite store as domain values, and back. Job
 * rows are read as arrays in JOB_COLUMN_NAMES order (store/rows/job-columns.ts;
 * better-sqlite3's raw mode) and bound by position.
 */
import type { StoredJob } from "../../domain/job.js";
import type { StoredSchedule } from "../../domain/schedule.js";
import { JOB_COLUMN_NAMES, jobValues, UPDATED_JOB_COLUMN_NAMES, type JobRow } from "../rows/job-columns.js";
import { scheduleColumns, scheduleFromColumns, type ScheduleColumns } from "../rows/schedule-columns.js";

export { toStoredJob, type JobRow } from "../rows/job-columns.js";

export { toEvent } from "../rows/event-rows.js";

export type Row = Record<string, unknown>;

/** The values of a job in JOB_COLUMN_NAMES order, for insertJob (also used by the litequeue import). */
export function jobRow(j: StoredJob): JobRow {
  return jobValues(j, JOB_COLUMN_NAMES, tokenHashBlob);
}

/** The values updateJob binds: the updated columns, then the id. */
export function updatedJobRow(j: StoredJob): unknown[] {
  const values = jobValues(j, UPDATED_JOB_COLUMN_NAMES, tokenHashBlob);
  values.push(j.id);
  return values;
}

export function tokenHashBlob(hash: Uint8Array | null): Buffer | null {
  return hash === null ? null : Buffer.from(hash.buffer, hash.byteOffset, hash.byteLength);
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
