/**
 * A schedule as the columns of a `schedules` row, the same for every
 * engine (sqlite/migrations.ts version 7, postgres/migrations.ts version 3):
 * the recurrence in two columns of which exactly one is set, the template
 * as JSON text (its queue also in a column of its own), times as epoch
 * milliseconds.
 */
import type { ScheduleTemplate, StoredSchedule } from "../../domain/schedule.js";

export interface ScheduleColumns {
  name: string;
  cron: string | null;
  interval_ms: number | null;
  timezone: string;
  queue: string;
  template: string;
  paused: boolean;
  anchor_time: number;
  next_run_time: number | null;
  last_run_time: number | null;
  create_time: number;
  update_time: number;
}

export function scheduleColumns(s: StoredSchedule): ScheduleColumns {
  return {
    name: s.name,
    cron: "cron" in s.recurrence ? s.recurrence.cron : null,
    interval_ms: "intervalMs" in s.recurrence ? s.recurrence.intervalMs : null,
    timezone: s.timezone,
    queue: s.template.queue,
    template: JSON.stringify(s.template),
    paused: s.paused,
    anchor_time: s.anchorTime,
    next_run_time: s.nextRunTime,
    last_run_time: s.lastRunTime,
    create_time: s.createTime,
    update_time: s.updateTime,
  };
}

export function scheduleFromColumns(c: ScheduleColumns): StoredSchedule {
  return {
    name: c.name,
    recurrence: c.cron !== null ? { cron: c.cron } : { intervalMs: Number(c.interval_ms) },
    timezone: c.timezone,
    // Templates stored before groups existed have no groupKey: no group.
    template: withGroupKey(JSON.parse(c.template) as Omit<ScheduleTemplate, "groupKey"> & { groupKey?: string }),
    paused: c.paused,
    anchorTime: Number(c.anchor_time),
    nextRunTime: c.next_run_time === null ? null : Number(c.next_run_time),
    lastRunTime: c.last_run_time === null ? null : Number(c.last_run_time),
    createTime: Number(c.create_time),
    updateTime: Number(c.update_time),
  };
}

function withGroupKey(template: Omit<ScheduleTemplate, "groupKey"> & { groupKey?: string }): ScheduleTemplate {
  return { ...template, groupKey: template.groupKey ?? "" };
}
