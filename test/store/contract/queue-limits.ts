/**
 * Queue limits (docs/api.md "Queue limits"): max_running and the rate
 * window under concurrent claimers, which of them held jobs back, field
 * masks, announcements and a reopen.
 */
import { describe, expect, it } from "vitest";
import { QUEUE_CONFIG_FIELDS, type QueueConfig, type QueueConfigField } from "../../../src/domain/queue-limits.js";
import type { CommittedChange, Store } from "../../../src/store/store.js";
import { clock, harness, HOUR, MINUTE, newJob, SECOND, store } from "./helpers.js";
import { NO_GROUP_RULES } from "../../helpers/store.js";

export function describeQueueLimits(): void {
  describe("queue limits", () => {
    const ALL_FIELDS: QueueConfigField[] = [...QUEUE_CONFIG_FIELDS];
    const limit = (s: Store, queue: string, config: Partial<QueueConfig>) =>
      s.updateQueueConfig(queue, {
        config: {
          maxRunning: 0,
          rateLimit: 0,
          ratePeriodMs: SECOND,
          ...NO_GROUP_RULES,
          ...config,
        },
        fields: Object.keys(config) as QueueConfigField[],
      });
    const claimUpTo = (s: Store, maxJobs: number, workerId = "w") =>
      s.claimOutcome({ queue: "billing", workerId, leaseDurationMs: HOUR, maxJobs });
    const submitMany = (n: number, queue = "billing") =>
      store.submit(Array.from({ length: n }, (_, i) => newJob({ queue, task: `t${i}` })));
    const running = async (queue = "billing") => (await store.queueCounts()).find((q) => q.queue === queue)?.counts.running ?? 0;

    it("never has more than max_running RUNNING under 32 concurrent claimers, and hands out a place again when a lease finishes", async () => {
      await submitMany(60);
      await limit(store, "billing", { maxRunning: 5 });
      const outcomes = await Promise.all(Array.from({ length: 32 }, (_, i) => claimUpTo(store, 1 + (i % 4), `w${i}`)));
      const leases = outcomes.flatMap((o) => o.leases);
      expect(leases).toHaveLength(5);
      expect(new Set(leases.map((l) => l.job.id)).size).toBe(5);
      expect(await running()).toBe(5);
      // Every claimer that came away short was told that max_running held it back.
      for (const o of outcomes) if (o.leases.length < 1) expect(o.heldBack).toEqual({ limit: "max_running" });

      await store.complete(leases[0].job.id, leases[0].leaseToken, null);
      await store.fail(leases[1].job.id, leases[1].leaseToken, { error: "later", permanent: false });
      await store.release(leases[2].job.id, leases[2].leaseToken);
      const again = await Promise.all(Array.from({ length: 32 }, (_, i) => claimUpTo(store, 2, `v${i}`)));
      expect(again.flatMap((o) => o.leases)).toHaveLength(3);
      expect(await running()).toBe(5);
    });

    it("counts an expired lease's place free once the claim recovers it", async () => {
      await submitMany(3);
      await limit(store, "billing", { maxRunning: 1 });
      const [first] = (await store.claimOutcome({ queue: "billing", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 3 })).leases;
      expect((await claimUpTo(store, 3)).leases).toEqual([]);
      clock.advance(MINUTE);
      const next = await claimUpTo(store, 3);
      expect(next.leases).toHaveLength(1);
      expect(next.leases[0].job.id).not.toBe(first.job.id);
      expect(next.heldBack).toEqual({ limit: "max_running" });
    });

    it("hands out at most rate_limit leases in any window of rate_period, and exactly as many as the window frees", async () => {
      await submitMany(40);
      await limit(store, "billing", { rateLimit: 3, ratePeriodMs: 10 * SECOND });
      const start = clock.now();
      const first = await claimUpTo(store, 5);
      expect(first.leases).toHaveLength(3);
      expect(first.heldBack).toEqual({ limit: "rate_limit", until: start + 10 * SECOND });
      clock.advance(10 * SECOND - 1);
      expect(await claimUpTo(store, 5)).toEqual({
        leases: [],
        heldBack: { limit: "rate_limit", until: start + 10 * SECOND },
        nextScheduleTime: null,
      });
      clock.advance(1);
      expect((await claimUpTo(store, 5)).leases).toHaveLength(3);

      // Claims at uneven steps, of uneven sizes, many at once: no window ever holds more than 3.
      const leaseTimes: number[] = Array(3).fill(start).concat(Array(3).fill(clock.now()));
      const steps = [700, 2300, 0, 4100, 1, 2899, 5000, 999, 1, 6000, 3333, 0, 4000];
      for (const [i, step] of steps.entries()) {
        clock.advance(step);
        const outcomes = await Promise.all(Array.from({ length: 1 + (i % 3) * 4 }, (_, k) => claimUpTo(store, 1 + ((i + k) % 3))));
        for (const o of outcomes) for (const _ of o.leases) leaseTimes.push(clock.now());
      }
      const busiest = Math.max(...leaseTimes.map((t) => leaseTimes.filter((u) => u >= t && u < t + 10 * SECOND).length));
      expect(busiest).toBe(3);
      expect(leaseTimes.length).toBeGreaterThan(9);
    });

    it("keeps every window when claims commit out of time order (a claim that read its time before it waited its turn)", async () => {
      await submitMany(10);
      await limit(store, "billing", { rateLimit: 3, ratePeriodMs: 10 * SECOND });
      const start = clock.now();
      expect((await claimUpTo(store, 2)).leases).toHaveLength(2);
      clock.set(start + 15 * SECOND);
      expect((await claimUpTo(store, 1)).leases).toHaveLength(1);
      // Its time is in the first claim's window: the first claim's 2 and the later one's 1 fill it.
      clock.set(start + 9 * SECOND);
      expect(await claimUpTo(store, 3)).toEqual({
        leases: [],
        heldBack: { limit: "rate_limit", until: start + 10 * SECOND },
        nextScheduleTime: null,
      });
    });

    it("counts every lease handed out in the window, also those released since", async () => {
      await submitMany(4);
      await limit(store, "billing", { rateLimit: 2, ratePeriodMs: MINUTE });
      const { leases } = await claimUpTo(store, 2);
      for (const l of leases) await store.release(l.job.id, l.leaseToken);
      expect((await claimUpTo(store, 2)).leases).toEqual([]);
    });

    it("applies the tighter of the two limits, and says which one held jobs back", async () => {
      await submitMany(10);
      await limit(store, "billing", {
        maxRunning: 4,
        rateLimit: 3,
        ratePeriodMs: MINUTE,
        ...NO_GROUP_RULES,
      });
      const first = await claimUpTo(store, 10);
      expect(first.leases).toHaveLength(3);
      expect(first.heldBack).toEqual({ limit: "rate_limit", until: clock.now() + MINUTE });
      clock.advance(MINUTE);
      const second = await claimUpTo(store, 10);
      expect(second.leases).toHaveLength(1);
      expect(second.heldBack).toEqual({ limit: "max_running" });
    });

    it("reports no hold when nothing eligible was left behind", async () => {
      await submitMany(2);
      await limit(store, "billing", {
        maxRunning: 2,
        rateLimit: 2,
        ratePeriodMs: MINUTE,
        ...NO_GROUP_RULES,
      });
      expect(await claimUpTo(store, 5)).toMatchObject({ heldBack: null });
      expect(await claimUpTo(store, 5)).toEqual({ leases: [], heldBack: null, nextScheduleTime: null });
    });

    it("keeps a paused queue paused whatever its limits allow", async () => {
      await submitMany(2);
      await limit(store, "billing", { maxRunning: 10 });
      await store.pauseQueue("billing");
      expect(await claimUpTo(store, 2)).toEqual({ leases: [], heldBack: null, nextScheduleTime: null });
    });

    it("changes only the fields named, answers the result, and removes the queue's row once no field is set", async () => {
      expect(
        await limit(store, "billing", {
          maxRunning: 7,
          rateLimit: 50,
          ratePeriodMs: 30 * SECOND,
        }),
      ).toEqual({
        maxRunning: 7,
        rateLimit: 50,
        ratePeriodMs: 30 * SECOND,
        ...NO_GROUP_RULES,
      });
      expect(await limit(store, "billing", { maxRunning: 2 })).toEqual({
        maxRunning: 2,
        rateLimit: 50,
        ratePeriodMs: 30 * SECOND,
        ...NO_GROUP_RULES,
      });
      expect(
        await store.updateQueueConfig("billing", {
          config: {
            maxRunning: 9,
            rateLimit: 9,
            ratePeriodMs: 9 * SECOND,
            ...NO_GROUP_RULES,
          },
          fields: [],
        }),
      ).toEqual({
        maxRunning: 2,
        rateLimit: 50,
        ratePeriodMs: 30 * SECOND,
        ...NO_GROUP_RULES,
      });
      await limit(store, "emails", { ratePeriodMs: 5 * SECOND });
      let counts = await store.queueCounts();
      expect(counts.map((q) => [q.queue, q.config])).toEqual([
        ["billing", { maxRunning: 2, rateLimit: 50, ratePeriodMs: 30 * SECOND, ...NO_GROUP_RULES }],
        ["emails", { maxRunning: 0, rateLimit: 0, ratePeriodMs: 5 * SECOND, ...NO_GROUP_RULES }],
      ]);
      expect(counts[0].counts.queued).toBe(0);
      await store.updateQueueConfig("billing", {
        config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND, ...NO_GROUP_RULES },
        fields: ALL_FIELDS,
      });
      await limit(store, "emails", { ratePeriodMs: SECOND });
      counts = await store.queueCounts();
      expect(counts).toEqual([]);
    });

    it("forgets the rate window when the rate limit is removed: a new limit starts from an empty window", async () => {
      await submitMany(6);
      await limit(store, "billing", { rateLimit: 2, ratePeriodMs: HOUR });
      expect((await claimUpTo(store, 6)).leases).toHaveLength(2);
      await limit(store, "billing", { rateLimit: 0 });
      expect((await claimUpTo(store, 1)).leases).toHaveLength(1);
      await limit(store, "billing", { rateLimit: 2 });
      expect((await claimUpTo(store, 6)).leases).toHaveLength(2);
    });

    it("lets no new lease out after max_running is lowered below the leases out, until enough of them finish", async () => {
      await submitMany(6);
      await limit(store, "billing", { maxRunning: 4 });
      const { leases } = await claimUpTo(store, 6);
      expect(leases).toHaveLength(4);
      await limit(store, "billing", { maxRunning: 2 });
      await store.complete(leases[0].job.id, leases[0].leaseToken, null);
      expect((await claimUpTo(store, 6)).leases).toEqual([]);
      await store.complete(leases[1].job.id, leases[1].leaseToken, null);
      await store.complete(leases[2].job.id, leases[2].leaseToken, null);
      expect((await claimUpTo(store, 6)).leases).toHaveLength(1);
    });

    it("announces a change of limits with its commit, with the queue's paused state, and nothing for no change", async () => {
      await store.pauseQueue("emails");
      const seen: CommittedChange[] = [];
      const off = store.onCommitted((c) => seen.push(c));
      await limit(store, "billing", { maxRunning: 3 });
      await limit(store, "billing", { maxRunning: 3 });
      await limit(store, "emails", { rateLimit: 10 });
      await limit(store, "billing", { maxRunning: 0 });
      off();
      expect(seen.map((c) => c.queueControls)).toEqual([
        [
          {
            queue: "billing",
            paused: false,
            config: {
              maxRunning: 3,
              rateLimit: 0,
              ratePeriodMs: SECOND,
              ...NO_GROUP_RULES,
            },
          },
        ],
        [
          {
            queue: "emails",
            paused: true,
            config: {
              maxRunning: 0,
              rateLimit: 10,
              ratePeriodMs: SECOND,
              ...NO_GROUP_RULES,
            },
          },
        ],
        [
          {
            queue: "billing",
            paused: false,
            config: {
              maxRunning: 0,
              rateLimit: 0,
              ratePeriodMs: SECOND,
              ...NO_GROUP_RULES,
            },
          },
        ],
      ]);
      expect(seen.every((c) => c.events.length === 0)).toBe(true);
    });

    it("keeps its limits and its rate window when the database is opened again", async () => {
      await submitMany(10);
      await limit(store, "billing", {
        maxRunning: 3,
        rateLimit: 2,
        ratePeriodMs: MINUTE,
        ...NO_GROUP_RULES,
      });
      expect((await claimUpTo(store, 10)).leases).toHaveLength(2);
      await store.close();
      const reopened = await harness.openInstance();
      expect((await reopened.queueCounts()).find((q) => q.queue === "billing")!.config).toEqual({
        maxRunning: 3,
        rateLimit: 2,
        ratePeriodMs: MINUTE,
        ...NO_GROUP_RULES,
      });
      expect((await claimUpTo(reopened, 10)).leases).toEqual([]);
      clock.advance(MINUTE);
      expect((await claimUpTo(reopened, 10)).leases).toHaveLength(1);
    });
  });
}
