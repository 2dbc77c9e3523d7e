/**
 * Schedules (docs/api.md "Schedules"): create (or replace), delete, and fire
 * the due runs. The times come from domain/schedule.ts; a run's job is
 * submitted through the shared submit (submit.ts), so its idempotency, counts
 * and SUBMITTED event are those of any Submit, and the run's SCHEDULED event
 * is recorded right before that SUBMITTED event.
 *
 * Why a run happens once with any number of servers: the run's job carries
 * the key `schedule:<name>:<run time>`, and a run whose key already names a
 * job is not submitted again (it only advances the schedule). Within one
 * engine the due schedules are also the transaction's own (SQLite: the write
 * lock; PostgreSQL: FOR UPDATE SKIP LOCKED), so the key is the guarantee
 * across engines and clocks, not the only line.
 */
import { publicJob } from "../../domain/job.js";
import { dueRun, nextRunAfter, runJob, scheduledEvent, type ScheduleSpec, type StoredSchedule } from "../../domain/schedule.js";
import { scheduleNotFound } from "../../domain/errors.js";
import { newRootTraceContext } from "../../domain/trace-context.js";
import { andThen } from "./steps.js";
import type { FiredRun } from "../store.js";
import type { ScheduleRunUpdate } from "../transaction-port.js";
import type { WriteOperation } from "./scope.js";
import { submitJobs } from "./submit.js";

/** Whether two schedules run at the same times (their templates may differ). */
function sameTiming(a: ScheduleSpec, b: ScheduleSpec): boolean {
  const ra = a.recurrence;
  const rb = b.recurrence;
  const same = "cron" in ra ? "cron" in rb && ra.cron === rb.cron : "intervalMs" in rb && ra.intervalMs === rb.intervalMs;
  return same && a.timezone === b.timezone;
}

/**
 * The schedule stored for `spec` at `now`, given the one it replaces (if
 * any). A schedule that was running and keeps its timing keeps its anchor
 * and next run; otherwise (new, resumed, or retimed) its runs count from now
 * (the start of its second, so that interval run times are whole seconds).
 */
export function scheduleToStore(spec: ScheduleSpec, existing: StoredSchedule | undefined, now: number): StoredSchedule {
  const keepsTiming = existing !== undefined && !existing.paused && !spec.paused && sameTiming(existing, spec);
  // Intervals count from a whole second, so run times (and the keys made of them) read as whole seconds too.
  const anchorTime = keepsTiming ? existing.anchorTime : now - (now % 1000);
  let nextRunTime: number | null = null;
  if (!spec.paused) nextRunTime = keepsTiming ? existing.nextRunTime : nextRunAfter({ ...spec, anchorTime }, now);
  return {
    ...spec,
    anchorTime,
    nextRunTime,
    lastRunTime: existing?.lastRunTime ?? null,
    createTime: existing?.createTime ?? now,
    updateTime: now,
  };
}

export function createSchedule(spec: ScheduleSpec): WriteOperation<StoredSchedule> {
  return ({ now, port, changes }) =>
    andThen(port.findSchedule(spec.name), (existing) => {
      const stored = scheduleToStore(spec, existing, now);
      return andThen(port.upsertSchedule(stored), () => {
        changes.schedulesChanged = true;
        return stored;
      });
    });
}

export function deleteSchedule(name: string): WriteOperation<void> {
  return ({ port, changes }) =>
    andThen(port.deleteSchedule(name), (deleted) => {
      if (!deleted) throw scheduleNotFound(name);
      changes.schedulesChanged = true;
    });
}

/**
 * Submits the due run of each due schedule (at most `limit` schedules) and
 * advances their run times; with `newTraces` each run starts a new trace.
 */
export function fireDueSchedules(limit: number, newTraces = false): WriteOperation<FiredRun[]> {
  return (scope) =>
    andThen(scope.port.selectDueSchedules(scope.now, limit), (schedules) => {
      const runs = schedules.flatMap((schedule) => {
        const due = dueRun(schedule, scope.now);
        return due === undefined ? [] : [{ schedule, due, job: runJob(schedule, due.runTime, newTraces ? newRootTraceContext() : null) }];
      });
      if (runs.length === 0) return [];
      const keys = runs.map(({ job }) => ({ queue: job.queue, key: job.idempotencyKey! }));
      return andThen(scope.port.findByIdempotencyKeys(keys), (existing) => {
        // Runs already submitted (through another server) are only recorded.
        const fresh = runs.filter((_, i) => existing[i] === undefined);
        const submit = submitJobs(
          fresh.map((r) => r.job),
          {
            beforeCreated: (job, i) =>
              scope.changes.events.push(scheduledEvent(job, fresh[i].schedule.name, fresh[i].due.runTime, scope.now)),
          },
        );
        return andThen(submit(scope), (outcomes) => {
          const updates: ScheduleRunUpdate[] = runs.map(({ schedule, due }) => ({
            name: schedule.name,
            nextRunTime: due.nextRunTime,
            lastRunTime: due.runTime,
            updateTime: scope.now,
          }));
          let next = 0;
          const fired: FiredRun[] = runs.map(({ schedule, due }, i) => {
            const found = existing[i];
            const submitted = found === undefined;
            return {
              schedule: schedule.name,
              runTime: due.runTime,
              job: submitted ? outcomes[next++].job : publicJob(found),
              submitted,
            };
          });
          return andThen(scope.port.recordScheduleRuns(updates), () => fired);
        });
      });
    });
}
