/**
 * Schedules (docs/api.md "Schedules"): run times across daylight-saving
 * changes, missed runs after downtime, pausing and replacing, and each run
 * once with two instances and after a reopen.
 */
import { describe, expect, it } from "vitest";
import type { Store } from "../../../src/store/store.js";
import { clock, harness, HOUR, kinds, MINUTE, newJob, newSchedule, recordAnnouncements, refusal, SECOND, store } from "./helpers.js";

export function describeSchedules(): void {
  describe("schedules", () => {
    const at = (iso: string) => Date.parse(iso);
    const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? ms : new Date(ms).toISOString());
    const fire = (on: Store = store) => on.fireDueSchedules(100);
    const named = async (name: string, on: Store = store) => (await on.listSchedules()).find((s) => s.name === name);
    const reportJobs = async () => (await store.listJobs({ limit: 100, queue: "reports" })).reverse();

    /** Moves the clock to the schedule's next run and fires; answers the run times submitted. */
    async function runNext(name: string, times: number): Promise<string[]> {
      const runs: string[] = [];
      for (let i = 0; i < times; i++) {
        const next = (await named(name))!.nextRunTime!;
        clock.set(next);
        const fired = await fire();
        expect(fired.map((f) => f.schedule)).toEqual([name]);
        runs.push(iso(fired[0].runTime)!);
      }
      return runs;
    }

    it("creates a schedule with its next run, lists it, and deletes it; its jobs stay", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      const created = await store.createSchedule(newSchedule());
      expect(created).toMatchObject({
        name: "nightly",
        recurrence: { cron: "0 3 * * *" },
        paused: false,
        nextRunTime: at("2026-01-02T03:00:00Z"),
        lastRunTime: null,
        createTime: clock.now(),
      });
      await store.createSchedule(newSchedule({ name: "every-5m", recurrence: { intervalMs: 5 * MINUTE } }));
      expect((await store.listSchedules()).map((s) => [s.name, iso(s.nextRunTime)])).toEqual([
        ["every-5m", "2026-01-01T10:05:00.000Z"],
        ["nightly", "2026-01-02T03:00:00.000Z"],
      ]);
      expect(await store.listSchedules()).toContainEqual(created);
      expect(await store.nextScheduleRunTime()).toBe(at("2026-01-01T10:05:00Z"));
      clock.set(at("2026-01-01T10:05:00Z"));
      const [run] = await fire();
      await store.deleteSchedule("every-5m");
      expect((await store.listSchedules()).map((s) => s.name)).toEqual(["nightly"]);
      expect((await store.getJob(run.job.id))!.state).toBe("queued");
      const refused = await refusal(store.deleteSchedule("every-5m"));
      expect(refused.reason).toBe("SCHEDULE_NOT_FOUND");
      expect(refused.message).toBe('schedule "every-5m" does not exist');
    });

    it("submits nothing before the next run, then the template once per run, with the run's key and a SCHEDULED event first", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule());
      clock.set(at("2026-01-02T02:59:59.999Z"));
      expect(await fire()).toEqual([]);
      const seen = recordAnnouncements(store);
      clock.set(at("2026-01-02T03:00:00.250Z"));
      const [run] = await fire();
      expect(run).toMatchObject({ schedule: "nightly", runTime: at("2026-01-02T03:00:00Z"), submitted: true });
      expect(run.job).toMatchObject({
        queue: "reports",
        task: "report.build",
        payloadJson: '{"kind":"daily"}',
        state: "queued",
        scheduleTime: at("2026-01-02T03:00:00Z"),
        createTime: clock.now(),
      });
      expect(await fire()).toEqual([]);
      expect((await reportJobs()).map((j) => j.id)).toEqual([run.job.id]);
      const events = await store.listJobEvents(run.job.id);
      expect(events.map((e) => [e.kind, e.fromState, e.toState, e.message])).toEqual([
        ["scheduled", null, "queued", "schedule nightly, run 2026-01-02T03:00:00.000Z"],
        ["submitted", null, "queued", null],
      ]);
      await seen.through(events[1].sequence);
      expect(seen.events().map((e) => e.kind)).toEqual(["scheduled", "submitted"]);
      seen.off();
      // The run's key is the one docs/api.md "Schedules" names: submitting it again finds the run's job.
      const [again] = await store.submit([
        { ...newJob(), queue: "reports", task: "report.build", payloadJson: '{"kind":"daily"}', maxAttempts: 3 },
      ]);
      expect(again.deduplicated).toBe(false);
      const [replay] = await store.submit([
        {
          queue: "reports",
          task: "report.build",
          groupKey: "",
          payloadJson: '{"kind":"daily"}',
          priority: 0,
          maxAttempts: 3,
          retryBaseDelayMs: 15 * SECOND,
          schedule: { at: at("2026-01-02T03:00:00Z") },
          idempotencyKey: "schedule:nightly:2026-01-02T03:00:00.000Z",
          traceContext: null,
        },
      ]);
      expect(replay).toEqual({ job: run.job, deduplicated: true });
      expect(await named("nightly")).toMatchObject({ lastRunTime: at("2026-01-02T03:00:00Z"), nextRunTime: at("2026-01-03T03:00:00Z") });
      expect((await store.queueCounts()).find((q) => q.queue === "reports")!.counts.queued).toBe(2);
    });

    it("counts a template's delay from the run time", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule({ template: { ...newSchedule().template, delayMs: 10 * MINUTE } }));
      clock.set(at("2026-01-02T03:00:01Z"));
      const [run] = await fire();
      expect(run.job.scheduleTime).toBe(at("2026-01-02T03:10:00Z"));
    });

    it("runs at the wall-clock times of its time zone across both daylight-saving changes", async () => {
      // America/New_York, 2026: 8 March 02:00 -> 03:00, 1 November 02:00 -> 01:00.
      clock.set(at("2026-03-06T12:00:00Z"));
      await store.createSchedule(newSchedule({ name: "at-0230", recurrence: { cron: "30 2 * * *" }, timezone: "America/New_York" }));
      expect(await runNext("at-0230", 3)).toEqual([
        "2026-03-07T07:30:00.000Z", // 02:30 EST
        "2026-03-08T07:00:00.000Z", // 02:30 is skipped by the clock change: 03:00 EDT, once
        "2026-03-09T06:30:00.000Z", // 02:30 EDT
      ]);
      clock.set(at("2026-10-31T12:00:00Z"));
      await store.createSchedule(newSchedule({ name: "at-0130", recurrence: { cron: "30 1 * * *" }, timezone: "America/New_York" }));
      await store.createSchedule(newSchedule({ name: "at-0230", paused: true }));
      expect(await runNext("at-0130", 2)).toEqual([
        "2026-11-01T05:30:00.000Z", // 01:30 EDT; 01:30 EST an hour later is not run again
        "2026-11-02T06:30:00.000Z", // 01:30 EST
      ]);
      await store.deleteSchedule("at-0130");
      clock.set(at("2026-11-01T04:45:00Z"));
      await store.createSchedule(newSchedule({ name: "half-hourly", recurrence: { cron: "*/30 * * * *" }, timezone: "America/New_York" }));
      expect(await runNext("half-hourly", 4)).toEqual([
        "2026-11-01T05:00:00.000Z", // 01:00 EDT
        "2026-11-01T05:30:00.000Z", // 01:30 EDT
        "2026-11-01T06:00:00.000Z", // 01:00 EST: the repeated hour runs again
        "2026-11-01T06:30:00.000Z", // 01:30 EST
      ]);
      // One job per run, eligible at its run time.
      expect((await reportJobs()).map((j) => iso(j.scheduleTime))).toEqual([
        "2026-03-07T07:30:00.000Z",
        "2026-03-08T07:00:00.000Z",
        "2026-03-09T06:30:00.000Z",
        "2026-11-01T05:30:00.000Z",
        "2026-11-02T06:30:00.000Z",
        "2026-11-01T05:00:00.000Z",
        "2026-11-01T05:30:00.000Z",
        "2026-11-01T06:00:00.000Z",
        "2026-11-01T06:30:00.000Z",
      ]);
    });

    it("submits only the latest missed run after downtime, and goes on from there", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
      await store.createSchedule(newSchedule({ name: "nightly" }));
      // Down from 10:00 on the 1st to 12:30 on the 4th: 74 hourly runs and 3 nightly ones missed.
      clock.set(at("2026-01-04T12:30:00Z"));
      const fired = await fire();
      expect(fired.map((f) => [f.schedule, iso(f.runTime)])).toEqual([
        ["hourly", "2026-01-04T12:00:00.000Z"],
        ["nightly", "2026-01-04T03:00:00.000Z"],
      ]);
      expect(await reportJobs()).toHaveLength(2);
      expect((await store.listSchedules()).map((s) => [s.name, iso(s.lastRunTime), iso(s.nextRunTime)])).toEqual([
        ["hourly", "2026-01-04T12:00:00.000Z", "2026-01-04T13:00:00.000Z"],
        ["nightly", "2026-01-04T03:00:00.000Z", "2026-01-05T03:00:00.000Z"],
      ]);
      expect(await fire()).toEqual([]);
      clock.set(at("2026-01-04T13:00:00Z"));
      expect((await fire()).map((f) => iso(f.runTime))).toEqual(["2026-01-04T13:00:00.000Z"]);
    });

    it("counts an interval from the whole second it was created in", async () => {
      clock.set(at("2026-01-01T10:00:00.750Z"));
      const created = await store.createSchedule(newSchedule({ name: "every-5s", recurrence: { intervalMs: 5 * SECOND } }));
      expect(iso(created.nextRunTime)).toBe("2026-01-01T10:00:05.000Z");
    });

    it("fires at most `limit` schedules per call, earliest due first", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      for (const minutes of [3, 1, 2])
        await store.createSchedule(newSchedule({ name: `m${minutes}`, recurrence: { intervalMs: minutes * MINUTE } }));
      clock.set(at("2026-01-01T10:03:00Z"));
      expect((await store.fireDueSchedules(2)).map((f) => f.schedule)).toEqual(["m1", "m2"]);
      expect((await store.fireDueSchedules(2)).map((f) => f.schedule)).toEqual(["m3"]);
    });

    it("does not run while paused; resumed, it runs from its next time after the resume, without the missed runs", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
      const paused = await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR }, paused: true }));
      expect(paused).toMatchObject({ paused: true, nextRunTime: null });
      expect(await store.nextScheduleRunTime()).toBeNull();
      clock.set(at("2026-01-01T15:30:00Z"));
      expect(await fire()).toEqual([]);
      const resumed = await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
      expect(iso(resumed.nextRunTime)).toBe("2026-01-01T16:30:00.000Z");
      expect(await fire()).toEqual([]);
      expect(await reportJobs()).toEqual([]);
    });

    it("keeps the next run of a running schedule replaced with the same timing, and takes the new template for it", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR } }));
      clock.set(at("2026-01-01T10:40:00Z"));
      const template = { ...newSchedule().template, task: "report.build.v2", priority: 5 };
      const replaced = await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR }, template }));
      expect(replaced).toMatchObject({
        nextRunTime: at("2026-01-01T11:00:00Z"),
        createTime: at("2026-01-01T10:00:00Z"),
        updateTime: clock.now(),
      });
      // Another timing starts afresh.
      const retimed = await store.createSchedule(newSchedule({ name: "other", recurrence: { intervalMs: HOUR } }));
      clock.set(at("2026-01-01T10:50:00Z"));
      expect(
        iso((await store.createSchedule({ ...newSchedule({ name: "other" }), recurrence: { intervalMs: 2 * HOUR } })).nextRunTime),
      ).toBe("2026-01-01T12:50:00.000Z");
      expect(iso(retimed.nextRunTime)).toBe("2026-01-01T11:40:00.000Z");
      clock.set(at("2026-01-01T11:00:00Z"));
      const [run] = await fire();
      expect(run.job).toMatchObject({ task: "report.build.v2", priority: 5 });
    });

    it("does not submit a run whose key already names a job, and still moves the schedule on", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule());
      // As if another server had submitted this run already (with another template even).
      const [first] = await store.submit([
        newJob({ queue: "reports", task: "other", idempotencyKey: "schedule:nightly:2026-01-02T03:00:00.000Z" }),
      ]);
      clock.set(at("2026-01-02T03:00:00Z"));
      const [run] = await fire();
      expect(run).toEqual({ schedule: "nightly", runTime: at("2026-01-02T03:00:00Z"), job: first.job, submitted: false });
      expect((await reportJobs()).map((j) => j.id)).toEqual([first.job.id]);
      expect(await kinds(first.job.id)).toEqual(["submitted:->queued"]);
      expect(await named("nightly")).toMatchObject({ lastRunTime: at("2026-01-02T03:00:00Z"), nextRunTime: at("2026-01-03T03:00:00Z") });
    });

    it("submits each run once when two store instances on one database fire the same schedules", async () => {
      const other = await harness.openInstance();
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule({ name: "every-minute", recurrence: { cron: "* * * * *" } }));
      await other.createSchedule(newSchedule({ name: "every-90s", recurrence: { intervalMs: 90 * SECOND } }));
      const submitted: string[] = [];
      for (let minute = 1; minute <= 5; minute++) {
        clock.set(at("2026-01-01T10:00:00Z") + minute * MINUTE);
        const fired = (await Promise.all([fire(store), fire(other), fire(store), fire(other)])).flat();
        for (const f of fired) if (f.submitted) submitted.push(`${f.schedule} ${iso(f.runTime)}`);
      }
      expect(submitted.sort()).toEqual([
        "every-90s 2026-01-01T10:01:30.000Z",
        "every-90s 2026-01-01T10:03:00.000Z",
        "every-90s 2026-01-01T10:04:30.000Z",
        "every-minute 2026-01-01T10:01:00.000Z",
        "every-minute 2026-01-01T10:02:00.000Z",
        "every-minute 2026-01-01T10:03:00.000Z",
        "every-minute 2026-01-01T10:04:00.000Z",
        "every-minute 2026-01-01T10:05:00.000Z",
      ]);
      const jobs = await reportJobs();
      expect(jobs).toHaveLength(8);
      const scheduled = (await store.listEvents({ afterSequence: 0, limit: 1000, queue: "reports" })).filter((e) => e.kind === "scheduled");
      expect(scheduled).toHaveLength(8);
    });

    it("keeps schedules in the database: an instance opened later lists and fires them", async () => {
      clock.set(at("2026-01-01T10:00:00Z"));
      await store.createSchedule(newSchedule({ name: "hourly", recurrence: { intervalMs: HOUR }, timezone: "Europe/Berlin" }));
      await store.createSchedule(newSchedule({ name: "nightly", paused: true }));
      clock.set(at("2026-01-01T11:00:00Z"));
      await fire();
      const before = await store.listSchedules();
      const reopened = await harness.openInstance();
      expect(await reopened.listSchedules()).toEqual(before);
      expect(await reopened.nextScheduleRunTime()).toBe(at("2026-01-01T12:00:00Z"));
      clock.set(at("2026-01-01T12:00:00Z"));
      expect((await reopened.fireDueSchedules(10)).map((f) => [f.schedule, iso(f.runTime), f.submitted])).toEqual([
        ["hourly", "2026-01-01T12:00:00.000Z", true],
      ]);
    });
  });
}
