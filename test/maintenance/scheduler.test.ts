/**
 * The scheduler (src/maintenance/scheduler.ts) over a real SQLite store and a
 * manual clock: its one timer is set to the earliest next run, set again
 * when told of a change and when another instance fires a run, never
 * further than the rescan; a due run is fired at once, a run missed while
 * no scheduler ran is fired at start (the latest only), and a failed firing
 * is tried again. Nothing here waits for time to pass: moving the clock and
 * re-arming makes a run due "now", and the test waits on what the
 * scheduler reports.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import { startScheduler, type Scheduler, type SchedulerOptions } from "../../src/maintenance/scheduler.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { FiredRun, Store } from "../../src/store/store.js";
import { newSchedule } from "../store/contract/helpers.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const T0 = Date.parse("2026-01-01T10:00:00Z");

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

function openStores(clock: ManualClock): { store: SqliteStore; openAnother: () => SqliteStore } {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-scheduler-"));
  const stores: SqliteStore[] = [];
  const open = () => {
    const store = openSqliteStore({ path: join(dir, "jobs.db"), clock, otherWritersPollMs: 10 });
    stores.push(store);
    return store;
  };
  const store = open();
  cleanups.push(async () => {
    for (const s of stores) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, openAnother: open };
}

/** A started scheduler whose timer settings and firings are recorded, with ways to wait for them. */
function observed(options: Omit<SchedulerOptions, "log" | "onFired" | "onArmed">) {
  const armed: number[] = [];
  const fired: FiredRun[] = [];
  const waiters = new Set<() => boolean>();
  const settle = () => {
    for (const w of [...waiters]) if (w()) waiters.delete(w);
  };
  const until = (done: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => (done() ? (resolve(), true) : false);
      if (!check()) waiters.add(check);
    });
  const scheduler: Scheduler = startScheduler({
    log: silentLogger,
    rescanMs: HOUR,
    ...options,
    onArmed: (at) => {
      armed.push(at);
      settle();
    },
    onFired: (runs) => {
      fired.push(...runs);
      settle();
    },
  });
  cleanups.push(() => scheduler.stop());
  return {
    scheduler,
    armed,
    fired,
    /** Resolves once the timer has been set for `at` (at any time since the scheduler started). */
    armedFor: (at: number) => until(() => armed.includes(at)),
    /** Resolves once `n` runs were fired in all. */
    firedRuns: (n: number) => until(() => fired.length >= n),
  };
}

describe("the scheduler", () => {
  it("sets its one timer to the earliest next run, and to an earlier one when told of a new schedule", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    await store.createSchedule(newSchedule({ name: "every-5m", recurrence: { intervalMs: 5 * MINUTE } }));
    const s = observed({ store, clock });
    await s.armedFor(T0 + 5 * MINUTE);
    await store.createSchedule(newSchedule({ name: "every-1m", recurrence: { intervalMs: MINUTE } }));
    s.scheduler.rearm();
    await s.armedFor(T0 + MINUTE);
    expect(s.scheduler.armedFor).toBe(T0 + MINUTE);
    expect(s.fired).toEqual([]);
  });

  it("fires a run as soon as it is due, then sets the timer to the next one", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    await store.createSchedule(newSchedule({ name: "every-1m", recurrence: { intervalMs: MINUTE } }));
    const s = observed({ store, clock });
    await s.armedFor(T0 + MINUTE);
    clock.set(T0 + MINUTE);
    s.scheduler.rearm();
    await s.firedRuns(1);
    expect(s.fired.map((r) => [r.schedule, r.runTime, r.submitted])).toEqual([["every-1m", T0 + MINUTE, true]]);
    expect((await store.getJob(s.fired[0].job.id))?.state).toBe("queued");
    await s.armedFor(T0 + 2 * MINUTE);
  });

  it("fires at start the latest run missed while no server ran, and only that one", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
    clock.set(T0 + 5 * HOUR + 30 * MINUTE);
    const s = observed({ store, clock });
    await s.firedRuns(1);
    await s.armedFor(T0 + 6 * HOUR);
    expect(s.fired.map((r) => r.runTime)).toEqual([T0 + 5 * HOUR]);
    expect(await store.listJobs({ limit: 10, queue: "reports" })).toHaveLength(1);
  });

  it("fires every due schedule, in batches when there are more than one batch holds", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    for (let i = 0; i < 5; i++) await store.createSchedule(newSchedule({ name: `s${i}`, recurrence: { intervalMs: MINUTE } }));
    clock.set(T0 + MINUTE);
    const s = observed({ store, clock, batchSize: 2 });
    await s.firedRuns(5);
    expect(s.fired.map((r) => r.schedule).sort()).toEqual(["s0", "s1", "s2", "s3", "s4"]);
  });

  it("sleeps no longer than the rescan, so schedules created through another server are found", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    const s = observed({ store, clock, rescanMs: 10 * MINUTE });
    await s.armedFor(T0 + 10 * MINUTE);
    await store.createSchedule(newSchedule({ name: "far", recurrence: { cron: "0 0 1 1 *" } }));
    s.scheduler.rearm();
    await s.armedFor(T0 + 10 * MINUTE);
    expect(s.scheduler.armedFor).toBe(T0 + 10 * MINUTE);
  });

  it("sets its timer again when another instance fired a run (its SCHEDULED event is announced)", async () => {
    const clock = new ManualClock(T0);
    const { store, openAnother } = openStores(clock);
    const other = openAnother();
    const s = observed({ store, clock, rescanMs: HOUR });
    await s.armedFor(T0 + HOUR);
    await other.createSchedule(newSchedule({ name: "elsewhere", recurrence: { intervalMs: MINUTE } }));
    clock.set(T0 + MINUTE);
    expect((await other.fireDueSchedules(10)).map((r) => r.schedule)).toEqual(["elsewhere"]);
    await s.armedFor(T0 + 2 * MINUTE);
    expect(s.fired).toEqual([]);
  });

  it("sets its timer at once to a schedule created through another instance, without waiting for the rescan", async () => {
    const clock = new ManualClock(T0);
    const { store, openAnother } = openStores(clock);
    const other = openAnother();
    const s = observed({ store, clock, rescanMs: HOUR });
    await s.armedFor(T0 + HOUR);
    await other.createSchedule(newSchedule({ name: "made-elsewhere", recurrence: { intervalMs: 5 * MINUTE } }));
    // Announced from the other connection's commit (schedulesChanged): no timer ran, the clock did not move.
    await s.armedFor(T0 + 5 * MINUTE);
    expect(s.scheduler.armedFor).toBe(T0 + 5 * MINUTE);
  });

  it("tries again after a firing that failed", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    await store.createSchedule(newSchedule({ name: "every-1m", recurrence: { intervalMs: MINUTE } }));
    clock.set(T0 + MINUTE);
    let failures = 1;
    const flaky = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === "fireDueSchedules" && failures > 0) {
          failures--;
          return () => Promise.reject(new Error("database is locked"));
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    }) as Store;
    const s = observed({ store: flaky, clock, retryMs: 0 });
    await s.firedRuns(1);
    expect(failures).toBe(0);
    // Armed at start (the run was due), then again for the retry, right after the failure.
    expect(s.armed.slice(0, 2)).toEqual([T0 + MINUTE, T0 + MINUTE]);
    expect(s.fired.map((r) => r.schedule)).toEqual(["every-1m"]);
  });

  it("sets no timer once stopped", async () => {
    const clock = new ManualClock(T0);
    const { store } = openStores(clock);
    const s = observed({ store, clock });
    await s.armedFor(T0 + HOUR);
    await s.scheduler.stop();
    expect(s.scheduler.armedFor).toBeUndefined();
    s.scheduler.rearm();
    // A re-arm reads the store before it sets the timer: a read issued after it is answered after
    // that one (the store answers in order), and the re-arm's next step runs before this one's.
    await store.nextScheduleRunTime();
    expect(s.armed).toEqual([T0 + HOUR]);
    expect(s.scheduler.armedFor).toBeUndefined();
  });
});
