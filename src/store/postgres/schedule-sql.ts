/**
 * The schedule statements of the PostgreSQL store (migration 3), over the
 * row mapping both engines share (store/rows/schedule-columns.ts). Firing runs
 * locks the due rows with SKIP LOCKED, so servers firing at once take
 * different schedules; each run's idempotency key makes a run that two of
 * them reach anyway submit once.
 */
import type { StoredSchedule } from "../../domain/schedule.js";
import { scheduleColumns, scheduleFromColumns, type ScheduleColumns } from "../rows/schedule-columns.js";
import type { ScheduleRunUpdate } from "../transaction-port.js";
import { quoteIdentifier } from "./identifiers.js";

const COLUMNS = [
  "name",
  "cron",
  "interval_ms",
  "timezone",
  "queue",
  "template",
  "paused",
  "anchor_time",
  "next_run_time",
  "last_run_time",
  "create_time",
  "update_time",
] as const satisfies ReadonlyArray<keyof ScheduleColumns>;

export interface ScheduleStatements {
  /** $1 name: the row, locked. */
  scheduleByName: string;
  /** $1..$12 in COLUMNS order. */
  upsertSchedule: string;
  /** $1 name: answers a row when it existed. */
  deleteSchedule: string;
  /** $1 now, $2 limit: due, unpaused schedules, earliest first, locked, skipping those another transaction holds. */
  dueSchedules: string;
  /** $1 names, $2 next run times, $3 last run times, $4 update times. */
  recordScheduleRuns: string;
  allSchedules: string;
  nextScheduleRunTime: string;
}

export function scheduleStatements(schema: string): ScheduleStatements {
  const s = quoteIdentifier(schema);
  const select = `SELECT ${COLUMNS.join(", ")} FROM ${s}.schedules`;
  return {
    scheduleByName: `${select} WHERE name = $1 FOR UPDATE`,
    upsertSchedule: `INSERT INTO ${s}.schedules (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map((_, i) => `$${i + 1}`).join(", ")})
      ON CONFLICT (name) DO UPDATE SET ${COLUMNS.filter((c) => c !== "name")
        .map((c) => `${c} = excluded.${c}`)
        .join(", ")}`,
    deleteSchedule: `DELETE FROM ${s}.schedules WHERE name = $1 RETURNING 1`,
    dueSchedules: `${select} WHERE next_run_time IS NOT NULL AND next_run_time <= $1 AND NOT paused
      ORDER BY next_run_time, name LIMIT $2 FOR UPDATE SKIP LOCKED`,
    recordScheduleRuns: `UPDATE ${s}.schedules t SET next_run_time = u.next_run_time, last_run_time = u.last_run_time, update_time = u.update_time
      FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS u(name, next_run_time, last_run_time, update_time)
      WHERE t.name = u.name`,
    allSchedules: `${select} ORDER BY name`,
    nextScheduleRunTime: `SELECT min(next_run_time) AS t FROM ${s}.schedules WHERE next_run_time IS NOT NULL AND NOT paused`,
  };
}

export function scheduleParams(schedule: StoredSchedule): unknown[] {
  const columns = scheduleColumns(schedule);
  return COLUMNS.map((c) => columns[c]);
}

export function toSchedule(row: Record<string, unknown>): StoredSchedule {
  return scheduleFromColumns(row as unknown as ScheduleColumns);
}

export function scheduleRunParams(runs: readonly ScheduleRunUpdate[]): unknown[][] {
  return [runs.map((r) => r.name), runs.map((r) => r.nextRunTime), runs.map((r) => r.lastRunTime), runs.map((r) => r.updateTime)];
}
