/**
 * Schedules (docs/api.md "Schedules"): when a schedule runs, which run is due
 * after a time, and the identity of each run. Pure: every answer depends
 * only on its arguments (time comes in as epoch milliseconds), so the store
 * operation that fires runs, the dispatcher's timer and the tests agree.
 */
import { Cron, type CronOptions } from "croner";
import type { EventDraft, Job } from "./job.js";
import type { NewJob } from "./submission.js";
import type { TraceContext } from "./trace-context.js";

/**
 * What a schedule's runs follow: a cron expression (in the schedule's time zone) or a fixed interval.
 * Intervals count from the schedule's anchor (when it was created or
 * replaced): runs at anchor + k * interval, k >= 1.
 */
export type Recurrence = { cron: string } | { intervalMs: number };

/**
 * The job each run submits: a validated SubmitRequest without an
 * idempotency key (the run supplies one), without schedule_time (a delay
 * counts from the run time) and without a trace context (each run starts a
 * new trace, docs/api.md "Trace context").
 */
export type ScheduleTemplate = Omit<NewJob, "schedule" | "idempotencyKey" | "traceContext" | "dependencies"> & {
  /** The job becomes eligible this long after the run time; null: at the run time. */
  delayMs: number | null;
};

/** A schedule as a client defines it (CreateSchedule), after validation and defaults. */
export interface ScheduleSpec {
  name: string;
  recurrence: Recurrence;
  /** Canonical IANA name, e.g. "Europe/Berlin"; "UTC" by default. */
  timezone: string;
  template: ScheduleTemplate;
  paused: boolean;
}

/** A schedule as the store keeps it. Times are epoch milliseconds. */
export interface StoredSchedule extends ScheduleSpec {
  /** When the schedule was created or last replaced: intervals count from here. */
  anchorTime: number;
  /** The next run; null while paused (or for a cron expression that matches no later time). */
  nextRunTime: number | null;
  /** The latest run submitted; null before the first. */
  lastRunTime: number | null;
  createTime: number;
  updateTime: number;
}

/** The time fields of a schedule that decide its run times. */
export type ScheduleTiming = Pick<StoredSchedule, "recurrence" | "timezone" | "anchorTime">;

/**
 * How croner reads our expressions. Cron expressions are parsed and walked
 * by croner (a well-kept library, no dependencies), never by hand: five
 * fields (minute hour day-of-month month day-of-week) with ranges, steps, lists, month and day names, and the
 * shorthands @yearly/@annually, @monthly, @weekly, @daily/@midnight,
 * @hourly. Day-of-month and day-of-week combine with OR, as in Vixie cron.
 * Times are local to the schedule's IANA time zone, and daylight-saving
 * changes follow Vixie cron (croner's rules, with `fixedTimeRule:
 * "no-wildcard"`):
 * - a job at fixed times (no `*` and no step in minute and hour, e.g.
 *   `30 2 * * *` or `30 2,14 * * *`) whose time falls in a spring-forward
 *   gap runs at the first valid time after the gap, once; one whose time
 *   occurs twice (fall back) runs once, at the first occurrence;
 * - any other job (`*\/15 * * * *`, `0 * * * *`) skips times in a gap and
 *   runs on both occurrences of a repeated time: it keeps its rhythm in
 *   real time.
 */
function cronOptions(timezone: string): CronOptions {
  return { timezone, mode: "5-part", fixedTimeRule: "no-wildcard", domAndDow: false };
}

/** A parsed cron expression; throws croner's Error for one it cannot read. */
function cronOf(expression: string, timezone: string): Cron {
  return new Cron(expression, cronOptions(timezone));
}

/**
 * Why a cron expression cannot be used, or undefined when it can: it must
 * parse, and match at least one time after `now` (`0 0 30 2 *` never does).
 */
export function cronProblem(expression: string, timezone: string, now: number): string | undefined {
  let cron: Cron;
  try {
    cron = cronOf(expression, timezone);
  } catch (err) {
    return (err as Error).message.replace(/^CronPattern: /, "");
  }
  return cron.nextRun(new Date(now)) === null ? "matches no time in the future" : undefined;
}

/** The canonical IANA name of a time zone ("europe/berlin" -> "Europe/Berlin"), or undefined when there is no such zone. */
export function canonicalTimeZone(name: string): string | undefined {
  // Offsets ("+01:00") are no IANA zone and keep no daylight-saving rules; Intl refuses them too.
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(name)) return undefined;
  try {
    return new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** The first run strictly after `after`, or null when there is none. */
export function nextRunAfter(s: ScheduleTiming, after: number): number | null {
  if ("intervalMs" in s.recurrence) {
    const { intervalMs } = s.recurrence;
    if (after < s.anchorTime) return s.anchorTime + intervalMs;
    return s.anchorTime + (Math.floor((after - s.anchorTime) / intervalMs) + 1) * intervalMs;
  }
  // croner works in whole seconds: from the start of `after`'s second, strictly later.
  const next = cronOf(s.recurrence.cron, s.timezone).nextRun(new Date(after));
  return next === null ? null : next.getTime();
}

/** The latest run at or before `at`, or null when none came yet (an interval's first run is anchor + interval). */
export function latestRunAtOrBefore(s: ScheduleTiming, at: number): number | null {
  if ("intervalMs" in s.recurrence) {
    const { intervalMs } = s.recurrence;
    const k = Math.floor((at - s.anchorTime) / intervalMs);
    return k >= 1 ? s.anchorTime + k * intervalMs : null;
  }
  // previousRuns answers runs strictly before its reference: one ms later includes `at` itself.
  const [previous] = cronOf(s.recurrence.cron, s.timezone).previousRuns(1, new Date(at + 1));
  return previous === undefined ? null : previous.getTime();
}

/** A run to submit now, and what the schedule's next run becomes after it. */
export interface DueRun {
  runTime: number;
  nextRunTime: number | null;
}

/**
 * The run due at `now`, if any: a paused schedule, or one whose next run is
 * still ahead, has none. When several runs were missed (the servers were
 * down), only the latest is due; the others are skipped, never replayed.
 */
export function dueRun(s: StoredSchedule, now: number): DueRun | undefined {
  if (s.paused || s.nextRunTime === null || s.nextRunTime > now) return undefined;
  const latest = latestRunAtOrBefore(s, now);
  const runTime = latest === null || latest < s.nextRunTime ? s.nextRunTime : latest;
  return { runTime, nextRunTime: nextRunAfter(s, now) };
}

/** ISO 8601 UTC with milliseconds: the run time in idempotency keys and event messages. */
export function runTimeText(runTime: number): string {
  return new Date(runTime).toISOString();
}

/**
 * The idempotency key of one run (docs/api.md "Schedules", Runs): at most 9 + 64 + 1 + 24 = 98 visible ASCII characters.
 * A run is identified by its run time, the instant the cron expression or
 * interval names (not the instant a server got round to it): the
 * idempotency key `schedule:<name>:<run time>`, with the run time in
 * ISO 8601 UTC with milliseconds (`2026-03-08T07:00:00.000Z`), makes a run
 * happen once however many servers fire it.
 */
export function scheduleRunKey(name: string, runTime: number): string {
  return `schedule:${name}:${runTimeText(runTime)}`;
}

/**
 * The job a run submits, as a NewJob: eligible at the run time plus the
 * template's delay, carrying `traceContext` (the root of the run's own trace
 * when the server traces, else none).
 */
export function runJob(s: ScheduleSpec, runTime: number, traceContext: TraceContext | null = null): NewJob {
  const { delayMs, ...job } = s.template;
  return { ...job, schedule: { at: runTime + (delayMs ?? 0) }, idempotencyKey: scheduleRunKey(s.name, runTime), traceContext };
}

/** EVENT_KIND_SCHEDULED: the schedule submitted the job; stored right before the job's SUBMITTED event. */
export function scheduledEvent(job: Job, name: string, runTime: number, now: number): EventDraft {
  return {
    jobId: job.id,
    queue: job.queue,
    groupKey: job.groupKey,
    kind: "scheduled",
    fromState: null,
    toState: job.state,
    eventTime: now,
    workerId: null,
    attempt: 0,
    message: `schedule ${name}, run ${runTimeText(runTime)}`,
  };
}
