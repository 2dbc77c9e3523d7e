/**
 * Schedule times (src/domain/schedule.ts) as a user would check them on a
 * wall clock: cron fields, shorthands and time zones, the two
 * daylight-saving changes of a year, intervals, and which run is due after
 * downtime. Every instant is written out in UTC, so a wrong offset shows.
 */
import { describe, expect, it } from "vitest";
import {
  canonicalTimeZone,
  cronProblem,
  dueRun,
  latestRunAtOrBefore,
  nextRunAfter,
  runJob,
  scheduledEvent,
  scheduleRunKey,
  type ScheduleTiming,
  type StoredSchedule,
} from "../../src/domain/schedule.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const utc = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const cron = (expression: string, timezone = "UTC"): ScheduleTiming => ({ recurrence: { cron: expression }, timezone, anchorTime: 0 });

/** The next `n` runs strictly after `from`, each found from the one before. */
function runs(s: ScheduleTiming, from: string, n: number): Array<string | null> {
  const out: Array<string | null> = [];
  let at = utc(from);
  for (let i = 0; i < n; i++) {
    const next = nextRunAfter(s, at);
    out.push(iso(next));
    if (next === null) break;
    at = next;
  }
  return out;
}

describe("cron expressions", () => {
  it("read five fields with ranges, steps, lists and names", () => {
    expect(runs(cron("*/20 9-10 * * MON-FRI"), "2026-01-02T10:30:00Z", 4)).toEqual([
      "2026-01-02T10:40:00.000Z",
      // Friday ends; Saturday and Sunday are skipped.
      "2026-01-05T09:00:00.000Z",
      "2026-01-05T09:20:00.000Z",
      "2026-01-05T09:40:00.000Z",
    ]);
    expect(runs(cron("0 12 1,15 JAN,JUL *"), "2026-01-10T00:00:00Z", 3)).toEqual([
      "2026-01-15T12:00:00.000Z",
      "2026-07-01T12:00:00.000Z",
      "2026-07-15T12:00:00.000Z",
    ]);
  });

  it("combine day-of-month and day-of-week with OR, as Vixie cron does", () => {
    // The 13th, or any Friday.
    expect(runs(cron("0 0 13 * 5"), "2026-02-01T00:00:00Z", 3)).toEqual([
      "2026-02-06T00:00:00.000Z",
      "2026-02-13T00:00:00.000Z",
      "2026-02-20T00:00:00.000Z",
    ]);
  });

  it("read the shorthands", () => {
    const from = "2026-01-07T10:30:00Z"; // a Wednesday
    expect(runs(cron("@hourly"), from, 1)).toEqual(["2026-01-07T11:00:00.000Z"]);
    expect(runs(cron("@daily"), from, 1)).toEqual(["2026-01-08T00:00:00.000Z"]);
    expect(runs(cron("@midnight"), from, 1)).toEqual(["2026-01-08T00:00:00.000Z"]);
    expect(runs(cron("@weekly"), from, 1)).toEqual(["2026-01-11T00:00:00.000Z"]);
    expect(runs(cron("@monthly"), from, 1)).toEqual(["2026-02-01T00:00:00.000Z"]);
    expect(runs(cron("@yearly"), from, 1)).toEqual(["2027-01-01T00:00:00.000Z"]);
    expect(runs(cron("@annually"), from, 1)).toEqual(["2027-01-01T00:00:00.000Z"]);
  });

  it("refuse what is not a five-field expression, and one that never matches", () => {
    const now = utc("2026-01-01T00:00:00Z");
    expect(cronProblem("*/5 * * * *", "UTC", now)).toBeUndefined();
    expect(cronProblem("0 0 * * * *", "UTC", now)).toMatch(/exactly 5 parts/);
    expect(cronProblem("* * * *", "UTC", now)).toMatch(/five/);
    expect(cronProblem("61 * * * *", "UTC", now)).toMatch(/minute/);
    expect(cronProblem("@reboot", "UTC", now)).toMatch(/@reboot/);
    expect(cronProblem("every day", "UTC", now)).toBeDefined();
    expect(cronProblem("0 0 30 2 *", "UTC", now)).toBe("matches no time in the future");
  });
});

describe("time zones", () => {
  it("are IANA names, answered in their canonical form; offsets and unknown names are refused", () => {
    expect(canonicalTimeZone("UTC")).toBe("UTC");
    expect(canonicalTimeZone("Europe/Berlin")).toBe("Europe/Berlin");
    expect(canonicalTimeZone("america/new_york")).toBe("America/New_York");
    expect(canonicalTimeZone("Etc/GMT+5")).toBe("Etc/GMT+5");
    expect(canonicalTimeZone("+01:00")).toBeUndefined();
    expect(canonicalTimeZone("Mars/Olympus_Mons")).toBeUndefined();
    expect(canonicalTimeZone("")).toBeUndefined();
  });

  it("place cron times on the zone's wall clock", () => {
    expect(runs(cron("0 9 * * *", "Europe/Berlin"), "2026-01-10T00:00:00Z", 1)).toEqual(["2026-01-10T08:00:00.000Z"]);
    expect(runs(cron("0 9 * * *", "Europe/Berlin"), "2026-07-10T00:00:00Z", 1)).toEqual(["2026-07-10T07:00:00.000Z"]);
    expect(runs(cron("0 9 * * *", "Asia/Kolkata"), "2026-07-10T00:00:00Z", 1)).toEqual(["2026-07-10T03:30:00.000Z"]);
  });
});

describe("daylight-saving changes (America/New_York, 2026: 8 March 02:00 -> 03:00, 1 November 02:00 -> 01:00)", () => {
  const NY = "America/New_York";

  it("runs a fixed-time job that falls in the spring-forward gap once, right after the gap, and at its time on the other days", () => {
    expect(runs(cron("30 2 * * *", NY), "2026-03-07T00:00:00Z", 3)).toEqual([
      "2026-03-07T07:30:00.000Z", // 02:30 EST
      "2026-03-08T07:00:00.000Z", // 02:30 does not exist: 03:00 EDT
      "2026-03-09T06:30:00.000Z", // 02:30 EDT
    ]);
    // A list of fixed times is fixed-time too (Vixie cron's rule).
    expect(runs(cron("30 2,14 * * *", NY), "2026-03-08T00:00:00Z", 2)).toEqual(["2026-03-08T07:00:00.000Z", "2026-03-08T18:30:00.000Z"]);
  });

  it("skips the missing hour for a job on a step or wildcard, keeping its rhythm in real time", () => {
    expect(runs(cron("0 * * * *", NY), "2026-03-08T05:30:00Z", 3)).toEqual([
      "2026-03-08T06:00:00.000Z", // 01:00 EST
      "2026-03-08T07:00:00.000Z", // 03:00 EDT (02:00 does not exist)
      "2026-03-08T08:00:00.000Z", // 04:00 EDT
    ]);
  });

  it("runs a fixed-time job once when its time occurs twice in the fall", () => {
    expect(runs(cron("30 1 * * *", NY), "2026-10-31T12:00:00Z", 2)).toEqual([
      "2026-11-01T05:30:00.000Z", // 01:30 EDT; the 01:30 EST an hour later is not a second run
      "2026-11-02T06:30:00.000Z", // 01:30 EST
    ]);
  });

  it("runs a job on a step on both passes through the repeated hour", () => {
    expect(runs(cron("*/30 * * * *", NY), "2026-11-01T04:45:00Z", 5)).toEqual([
      "2026-11-01T05:00:00.000Z", // 01:00 EDT
      "2026-11-01T05:30:00.000Z", // 01:30 EDT
      "2026-11-01T06:00:00.000Z", // 01:00 EST
      "2026-11-01T06:30:00.000Z", // 01:30 EST
      "2026-11-01T07:00:00.000Z", // 02:00 EST
    ]);
  });

  it("finds the latest run at or before a time across the changes, as the next runs are", () => {
    const s = cron("30 2 * * *", NY);
    expect(iso(latestRunAtOrBefore(s, utc("2026-03-08T07:00:00Z")))).toBe("2026-03-08T07:00:00.000Z");
    expect(iso(latestRunAtOrBefore(s, utc("2026-03-08T06:59:59Z")))).toBe("2026-03-07T07:30:00.000Z");
    expect(iso(latestRunAtOrBefore(cron("30 1 * * *", NY), utc("2026-11-01T06:45:00Z")))).toBe("2026-11-01T05:30:00.000Z");
  });
});

describe("intervals", () => {
  const every = (intervalMs: number, anchor: string): ScheduleTiming => ({
    recurrence: { intervalMs },
    timezone: "UTC",
    anchorTime: utc(anchor),
  });

  it("run at the anchor plus whole intervals, the first one interval after it", () => {
    const s = every(15 * MINUTE, "2026-01-01T10:07:00Z");
    expect(runs(s, "2026-01-01T10:07:00Z", 3)).toEqual([
      "2026-01-01T10:22:00.000Z",
      "2026-01-01T10:37:00.000Z",
      "2026-01-01T10:52:00.000Z",
    ]);
    expect(iso(nextRunAfter(s, utc("2026-01-01T10:21:59.999Z")))).toBe("2026-01-01T10:22:00.000Z");
    expect(iso(nextRunAfter(s, utc("2026-01-01T10:22:00Z")))).toBe("2026-01-01T10:37:00.000Z");
    expect(latestRunAtOrBefore(s, utc("2026-01-01T10:21:59Z"))).toBeNull();
    expect(iso(latestRunAtOrBefore(s, utc("2026-01-01T12:00:00Z")))).toBe("2026-01-01T11:52:00.000Z");
  });

  it("ignore time zones and daylight-saving changes: an interval is real time", () => {
    const s: ScheduleTiming = { ...every(HOUR, "2026-03-08T05:00:00Z"), timezone: "America/New_York" };
    expect(runs(s, "2026-03-08T05:00:00Z", 3)).toEqual([
      "2026-03-08T06:00:00.000Z",
      "2026-03-08T07:00:00.000Z",
      "2026-03-08T08:00:00.000Z",
    ]);
  });
});

describe("the due run", () => {
  function stored(overrides: Partial<StoredSchedule>): StoredSchedule {
    return {
      name: "nightly",
      recurrence: { cron: "0 3 * * *" },
      timezone: "UTC",
      template: {
        queue: "reports",
        task: "report.build",
        groupKey: "",
        payloadJson: "null",
        priority: 0,
        maxAttempts: 3,
        retryBaseDelayMs: 15_000,
        delayMs: null,
      },
      paused: false,
      anchorTime: utc("2026-01-01T00:00:00Z"),
      nextRunTime: utc("2026-01-02T03:00:00Z"),
      lastRunTime: null,
      createTime: utc("2026-01-01T00:00:00Z"),
      updateTime: utc("2026-01-01T00:00:00Z"),
      ...overrides,
    };
  }

  it("is none before the next run, and none while paused", () => {
    expect(dueRun(stored({}), utc("2026-01-02T02:59:59.999Z"))).toBeUndefined();
    expect(dueRun(stored({ paused: true }), utc("2026-01-05T00:00:00Z"))).toBeUndefined();
    expect(dueRun(stored({ nextRunTime: null }), utc("2026-01-05T00:00:00Z"))).toBeUndefined();
  });

  it("is the next run when it has come, and moves the next run past now", () => {
    const due = dueRun(stored({}), utc("2026-01-02T03:00:00.250Z"));
    expect(due && { runTime: iso(due.runTime), nextRunTime: iso(due.nextRunTime) }).toEqual({
      runTime: "2026-01-02T03:00:00.000Z",
      nextRunTime: "2026-01-03T03:00:00.000Z",
    });
  });

  it("is only the latest missed run after downtime; the ones before it are skipped", () => {
    const due = dueRun(stored({}), utc("2026-01-05T12:00:00Z"));
    expect(due && { runTime: iso(due.runTime), nextRunTime: iso(due.nextRunTime) }).toEqual({
      runTime: "2026-01-05T03:00:00.000Z",
      nextRunTime: "2026-01-06T03:00:00.000Z",
    });
    const interval = stored({ recurrence: { intervalMs: 10 * MINUTE }, nextRunTime: utc("2026-01-01T00:10:00Z") });
    const late = dueRun(interval, utc("2026-01-01T01:05:00Z"));
    expect(late && { runTime: iso(late.runTime), nextRunTime: iso(late.nextRunTime) }).toEqual({
      runTime: "2026-01-01T01:00:00.000Z",
      nextRunTime: "2026-01-01T01:10:00.000Z",
    });
  });

  it("submits the template with the run's key, eligible at the run time plus its delay", () => {
    const s = stored({ template: { ...stored({}).template, delayMs: 5 * MINUTE } });
    const runTime = utc("2026-01-02T03:00:00Z");
    expect(scheduleRunKey("nightly", runTime)).toBe("schedule:nightly:2026-01-02T03:00:00.000Z");
    expect(runJob(s, runTime)).toEqual({
      queue: "reports",
      task: "report.build",
      groupKey: "",
      payloadJson: "null",
      priority: 0,
      maxAttempts: 3,
      retryBaseDelayMs: 15_000,
      schedule: { at: runTime + 5 * MINUTE },
      idempotencyKey: "schedule:nightly:2026-01-02T03:00:00.000Z",
      traceContext: null,
    });
    // A run of a server that traces starts a trace of its own (docs/api.md "Trace context").
    const root = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "" };
    expect(runJob(s, runTime, root).traceContext).toBe(root);
    // The longest name gives a key within the 128 characters an idempotency key may have.
    expect(scheduleRunKey("n".repeat(64), runTime).length).toBe(98);
  });

  it("is announced by a SCHEDULED event naming the schedule and the run", () => {
    const job = { id: "0190a2b4-0000-7000-8000-000000000000", queue: "reports", groupKey: "tenant-1", state: "queued" } as Parameters<
      typeof scheduledEvent
    >[0];
    expect(scheduledEvent(job, "nightly", utc("2026-01-02T03:00:00Z"), utc("2026-01-02T03:00:00.250Z"))).toEqual({
      jobId: job.id,
      queue: "reports",
      groupKey: "tenant-1",
      kind: "scheduled",
      fromState: null,
      toState: "queued",
      eventTime: utc("2026-01-02T03:00:00.250Z"),
      workerId: null,
      attempt: 0,
      message: "schedule nightly, run 2026-01-02T03:00:00.000Z",
    });
  });
});
