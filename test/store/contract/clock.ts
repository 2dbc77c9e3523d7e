/**
 * The store contract for engines whose database keeps the time
 * (PostgreSQL): two instances on one database, the second on a host whose
 * clock is 30 s ahead or behind. Every decision (lease ownership and
 * recovery, delays, retry backoff, snooze, rate windows, schedule runs,
 * retention cutoffs) and every time written follows the database's clock,
 * so the skewed instance behaves exactly as the other one
 * (docs/postgresql.md "Which clock decides").
 *
 * The database's clock is the suite's manual clock; each instance measures
 * its host clock against it as it would against clock_timestamp().
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Clock } from "../../../src/domain/clock.js";
import { ManualClock } from "../../../src/testing/index.js";
import { pruneCutoffs } from "../../../src/domain/retention.js";
import type { QueueConfig, QueueConfigField } from "../../../src/domain/queue-limits.js";
import type { Store } from "../../../src/store/store.js";
import { MINUTE, newJob, newSchedule, SECOND } from "./helpers.js";
import { NO_GROUP_RULES } from "../../helpers/store.js";

export interface SkewedStoreHarness {
  /** An instance whose host clock is the database's. */
  store: Store;
  /** Another instance on the same database, its host clock `host`; the database's clock stays the suite's. */
  openInstance(host: Clock): Promise<Store>;
  dispose(): Promise<void>;
}

export type SkewedStoreFactory = (databaseClock: ManualClock) => Promise<SkewedStoreHarness>;

export function describeClockSkewContract(name: string, factory: SkewedStoreFactory): void {
  for (const skewMs of [30 * SECOND, -30 * SECOND]) {
    describe(`Store contract: ${name}, one instance's host clock ${skewMs > 0 ? "+" : ""}${skewMs / SECOND} s off`, () => {
      let clock: ManualClock;
      let harness: SkewedStoreHarness;
      let store: Store;
      let skewed: Store;

      beforeEach(async () => {
        clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
        harness = await factory(clock);
        store = harness.store;
        skewed = await harness.openInstance({ now: () => clock.now() + skewMs });
      });
      afterEach(async () => {
        await harness.dispose();
      });

      const claim = async (on: Store, leaseDurationMs = 20 * SECOND, queue = "billing") =>
        (await on.claimOutcome({ queue, workerId: on === store ? "plain" : "skewed", leaseDurationMs, maxJobs: 10 })).leases;

      it("runs on the database's clock: its time, its offset and the times it writes", async () => {
        expect(skewed.clock.now()).toBe(clock.now());
        expect(skewed.clockOffsetMs()).toBe(-skewMs);
        clock.advance(1234);
        expect(skewed.clock.now()).toBe(clock.now());

        const [{ job }] = await skewed.submit([newJob()]);
        expect(job.createTime).toBe(clock.now());
        expect(job.scheduleTime).toBe(clock.now());
        const [lease] = await claim(skewed);
        expect(lease.job.leaseExpireTime).toBe(clock.now() + 20 * SECOND);
        const events = await store.listJobEvents(job.id);
        expect(events.map((e) => e.eventTime)).toEqual([clock.now(), clock.now()]);
      });

      it("never leases a job whose lease another instance still holds, and recovers it only once it expired", async () => {
        await store.submit([newJob()]);
        const [held] = await claim(store);
        expect(await claim(skewed)).toEqual([]);
        expect(await skewed.recoverExpiredLeases()).toBe(0);
        clock.advance(20 * SECOND - 1);
        expect(await claim(skewed)).toEqual([]);
        expect(await skewed.recoverExpiredLeases()).toBe(0);
        // The holder's heartbeat still counts.
        await store.heartbeat(held.job.id, held.leaseToken, 20 * SECOND);
        clock.advance(20 * SECOND - 1);
        expect(await claim(skewed)).toEqual([]);
        clock.advance(2);
        const [again] = await claim(skewed);
        expect(again.job).toMatchObject({ id: held.job.id, attempts: 2 });
      });

      it("never lets the other instance take a lease the skewed one holds", async () => {
        await skewed.submit([newJob()]);
        const [held] = await claim(skewed);
        clock.advance(20 * SECOND - 1);
        expect(await claim(store)).toEqual([]);
        expect(await store.recoverExpiredLeases()).toBe(0);
        expect((await skewed.complete(held.job.id, held.leaseToken, '"done"')).state).toBe("completed");
      });

      it("never leases a delayed job early, whichever instance took it", async () => {
        await store.submit([newJob({ schedule: { delayMs: 15 * SECOND }, task: "through-plain" })]);
        await skewed.submit([newJob({ schedule: { delayMs: 15 * SECOND }, task: "through-skewed" })]);
        clock.advance(15 * SECOND - 1);
        expect(await claim(skewed)).toEqual([]);
        expect(await claim(store)).toEqual([]);
        clock.advance(1);
        const leased = [...(await claim(skewed)), ...(await claim(store))];
        expect(leased.map((l) => l.job.task).sort()).toEqual(["through-plain", "through-skewed"]);
      });

      it("keeps retry backoff and snooze on the database's clock", async () => {
        await store.submit([newJob({ task: "retried", retryBaseDelayMs: 10 * SECOND }), newJob({ task: "snoozed" })]);
        const leases = await claim(skewed);
        const byTask = new Map(leases.map((l) => [l.job.task, l]));
        const retried = await skewed.fail(byTask.get("retried")!.job.id, byTask.get("retried")!.leaseToken, {
          error: "e",
          permanent: false,
        });
        const snoozed = await skewed.snooze(byTask.get("snoozed")!.job.id, byTask.get("snoozed")!.leaseToken, 5 * SECOND);
        expect(snoozed.scheduleTime).toBe(clock.now() + 5 * SECOND);
        const retryAt = retried.scheduleTime;
        expect(retryAt).toBeGreaterThan(clock.now());
        clock.advance(5 * SECOND - 1);
        expect(await claim(store)).toEqual([]);
        clock.advance(1);
        expect((await claim(store)).map((l) => l.job.task)).toEqual(["snoozed"]);
        clock.set(retryAt - 1);
        expect(await claim(skewed)).toEqual([]);
        expect(await claim(store)).toEqual([]);
        clock.set(retryAt);
        expect((await claim(skewed)).map((l) => l.job.task)).toEqual(["retried"]);
      });

      it("holds one rate window across both instances", async () => {
        const config: QueueConfig = {
          maxRunning: 0,
          rateLimit: 1,
          ratePeriodMs: 10 * SECOND,
          ...NO_GROUP_RULES,
        };
        await store.updateQueueConfig("billing", { config, fields: ["rateLimit", "ratePeriodMs"] satisfies QueueConfigField[] });
        await store.submit([newJob({ task: "a" }), newJob({ task: "b" }), newJob({ task: "c" })]);
        expect(await claim(store)).toHaveLength(1);
        const windowEnd = clock.now() + 10 * SECOND;
        clock.advance(300);
        const held = await skewed.claimOutcome({ queue: "billing", workerId: "skewed", leaseDurationMs: MINUTE, maxJobs: 1 });
        expect(held.leases).toEqual([]);
        expect(held.heldBack).toEqual({ limit: "rate_limit", until: windowEnd });
        clock.advance(10 * SECOND - 301);
        expect(await claim(skewed)).toEqual([]);
        clock.advance(1);
        expect(await claim(skewed)).toHaveLength(1);
        expect(await claim(store)).toEqual([]);
      });

      it("never runs a schedule early, and runs it once", async () => {
        await store.createSchedule(newSchedule({ name: "every-minute", recurrence: { cron: "* * * * *" } }));
        const next = (await skewed.nextScheduleRunTime())!;
        expect(next).toBe(clock.now() + MINUTE);
        clock.set(next - 1);
        expect(await skewed.fireDueSchedules(10)).toEqual([]);
        clock.set(next);
        const fired = [...(await skewed.fireDueSchedules(10)), ...(await store.fireDueSchedules(10))];
        expect(fired.filter((f) => f.submitted).map((f) => f.runTime)).toEqual([next]);
      });

      it("cuts retention off by the database's clock", async () => {
        const policy = { retentionMs: MINUTE, deadRetentionMs: null };
        expect(pruneCutoffs(policy, skewed.clock.now())).toEqual(pruneCutoffs(policy, clock.now()));
        await store.submit([newJob()]);
        const [lease] = await claim(store);
        await store.complete(lease.job.id, lease.leaseToken, null);
        clock.advance(MINUTE - 1);
        expect((await skewed.pruneJobs({ finishedBefore: pruneCutoffs(policy, skewed.clock.now()), limit: 10 })).pruned).toEqual([]);
        clock.advance(2);
        expect((await skewed.pruneJobs({ finishedBefore: pruneCutoffs(policy, skewed.clock.now()), limit: 10 })).pruned).toEqual([
          { queue: "billing", state: "completed", jobs: 1 },
        ]);
      });
    });
  }
}
