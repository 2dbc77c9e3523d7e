/**
 * Several store instances on one database (as several servers): every
 * commit announced on each, marked as its own or another's, with leases,
 * limits and idempotency keys shared between them.
 */
import { beforeEach, describe, expect, it } from "vitest";
import type { Store } from "../../../src/store/store.js";
import { claimLeases, NO_GROUP_RULES } from "../../helpers/store.js";
import { claimOne, clock, harness, HOUR, MINUTE, newJob, newSchedule, recordAnnouncements, SECOND, store, submitOne } from "./helpers.js";

export function describeSeveralInstances(): void {
  describe("several instances on one database", () => {
    let other: Store;
    beforeEach(async () => {
      other = await harness.openInstance();
    });

    const stored = async () => (await store.listEvents({ afterSequence: 0, limit: 10_000 })).map((e) => e.sequence);
    const strictlyIncreasing = (xs: number[]) => xs.every((x, i) => i === 0 || x > xs[i - 1]);

    it("announces on each instance every event committed through either, once, in sequence order", async () => {
      const here = recordAnnouncements(store);
      const there = recordAnnouncements(other);
      const mine = await store.submit([newJob({ task: "a1" }), newJob({ task: "a2" })]);
      const theirs = await other.submit([newJob({ task: "b1" })]);
      // Concurrent writers on both instances.
      await Promise.all([
        ...Array.from({ length: 5 }, (_, i) => store.submit([newJob({ task: `a-${i}` })])),
        ...Array.from({ length: 5 }, (_, i) => other.submit([newJob({ task: `b-${i}`, queue: "emails" })])),
        claimLeases(store, { queue: "billing", workerId: "wa", leaseDurationMs: MINUTE, maxJobs: 3 }),
        claimLeases(other, { queue: "emails", workerId: "wb", leaseDurationMs: MINUTE, maxJobs: 2 }),
      ]);
      const { latest } = await store.eventBounds();
      await Promise.all([here.through(latest), there.through(latest)]);
      const all = await stored();
      expect(all.at(-1)).toBe(latest);
      for (const seen of [here, there]) {
        expect(strictlyIncreasing(seen.sequences())).toBe(true);
        expect(seen.sequences()).toEqual(all);
      }
      // Each instance marks what came through the other one.
      const origin = (seen: typeof here, jobId: string) => seen.events().find((e) => e.jobId === jobId)!.external;
      expect(origin(here, mine[0].job.id)).toBe(false);
      expect(origin(here, theirs[0].job.id)).toBe(true);
      expect(origin(there, mine[0].job.id)).toBe(true);
      expect(origin(there, theirs[0].job.id)).toBe(false);
      here.off();
      there.off();
    });

    it("announces another instance's commit before its own next one", async () => {
      const here = recordAnnouncements(store);
      const [theirs] = await other.submit([newJob({ task: "first, elsewhere" })]);
      const [mine] = await store.submit([newJob({ task: "then here" })]);
      const [ownEvent] = await store.listJobEvents(mine.job.id);
      await here.through(ownEvent.sequence);
      expect(here.events().map((e) => [e.jobId, e.external])).toEqual([
        [theirs.job.id, true],
        [mine.job.id, false],
      ]);
      here.off();
    });

    it("tells the instance that handed out a lease when it is completed through another", async () => {
      const job = await submitOne();
      const lease = await claimOne();
      const here = recordAnnouncements(store);
      await other.complete(job.id, lease.leaseToken, '"done elsewhere"');
      await here.until(() => here.events().some((e) => e.kind === "completed"));
      expect(here.events()).toMatchObject([{ jobId: job.id, kind: "completed", toState: "completed", external: true }]);
      here.off();
    });

    it("announces only what is committed: a listener finds each event stored on its own instance", async () => {
      const checks: Array<Promise<boolean>> = [];
      const off = store.onCommitted(({ events }) => {
        for (const e of events) checks.push(store.listJobEvents(e.jobId).then((list) => list.some((x) => x.sequence === e.sequence)));
      });
      const here = recordAnnouncements(store);
      const job = (await other.submit([newJob()]))[0].job;
      const lease = (await claimLeases(other, { queue: "billing", workerId: "wb", leaseDurationMs: MINUTE, maxJobs: 1 }))[0];
      await store.fail(job.id, lease.leaseToken, { error: "flaky", permanent: false });
      await here.through((await store.eventBounds()).latest);
      expect(here.events().map((e) => [e.kind, e.external])).toEqual([
        ["submitted", true],
        ["claimed", true],
        ["failed", false],
      ]);
      expect(await Promise.all(checks)).toEqual([true, true, true]);
      off();
      here.off();
    });

    it("announces queue controls made through another instance", async () => {
      const here = recordAnnouncements(store);
      const controls = () => here.changes.flatMap((c) => c.queueControls.map((q) => ({ ...q, external: c.external })));
      await other.pauseQueue("billing");
      await here.until(() => controls().length === 1);
      await other.resumeQueue("billing");
      await here.until(() => controls().length === 2);
      expect(controls()).toEqual([
        { queue: "billing", paused: true, external: true },
        { queue: "billing", paused: false, external: true },
      ]);
      // Its own pause is its own, not reported again as another's.
      await store.pauseQueue("emails");
      await other.submit([newJob({ task: "sentinel" })]);
      await here.until(() => here.events().length === 1);
      expect(controls()).toEqual([
        { queue: "billing", paused: true, external: true },
        { queue: "billing", paused: false, external: true },
        { queue: "emails", paused: true, external: false },
      ]);
      here.off();
    });

    it("keeps a queue's limits across instances: 32 claimers on two instances share max_running and one rate window", async () => {
      await store.submit(Array.from({ length: 60 }, (_, i) => newJob({ task: `t${i}` })));
      const config = {
        maxRunning: 6,
        rateLimit: 4,
        ratePeriodMs: MINUTE,
        ...NO_GROUP_RULES,
      };
      await other.updateQueueConfig("billing", { config, fields: ["maxRunning", "rateLimit", "ratePeriodMs"] });
      const claimBoth = () =>
        Promise.all(
          Array.from({ length: 32 }, (_, i) =>
            claimLeases(i % 2 === 0 ? store : other, { queue: "billing", workerId: `w${i}`, leaseDurationMs: HOUR, maxJobs: 2 }),
          ),
        );
      expect((await claimBoth()).flat()).toHaveLength(4);
      clock.advance(MINUTE);
      expect((await claimBoth()).flat()).toHaveLength(2);
      expect((await store.queueCounts())[0]).toMatchObject({ counts: { running: 6 }, config });
    });

    it("announces limits changed through another instance", async () => {
      const here = recordAnnouncements(store);
      const controls = () => here.changes.flatMap((c) => c.queueControls.map((q) => ({ ...q, external: c.external })));
      await other.pauseQueue("emails");
      await other.updateQueueConfig("billing", {
        config: { maxRunning: 2, rateLimit: 0, ratePeriodMs: SECOND, ...NO_GROUP_RULES },
        fields: ["maxRunning"],
      });
      await other.updateQueueConfig("emails", {
        config: { maxRunning: 0, rateLimit: 9, ratePeriodMs: SECOND, ...NO_GROUP_RULES },
        fields: ["rateLimit"],
      });
      await here.until(() => controls().length === 3);
      expect(controls()).toEqual(
        expect.arrayContaining([
          { queue: "emails", paused: true, external: true },
          {
            queue: "billing",
            paused: false,
            config: {
              maxRunning: 2,
              rateLimit: 0,
              ratePeriodMs: SECOND,
              ...NO_GROUP_RULES,
            },
            external: true,
          },
          {
            queue: "emails",
            paused: true,
            config: {
              maxRunning: 0,
              rateLimit: 9,
              ratePeriodMs: SECOND,
              ...NO_GROUP_RULES,
            },
            external: true,
          },
        ]),
      );
      // Its own change is its own, not reported again as another's.
      await store.updateQueueConfig("billing", {
        config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND, ...NO_GROUP_RULES },
        fields: ["maxRunning"],
      });
      await other.submit([newJob({ task: "sentinel" })]);
      await here.until(() => here.events().length === 1);
      expect(controls()).toHaveLength(4);
      expect(controls()[3]).toEqual({
        queue: "billing",
        paused: false,
        config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: SECOND, ...NO_GROUP_RULES },
        external: false,
      });
      here.off();
    });

    it("creates one job for one idempotency key submitted through both instances at once", async () => {
      // On PostgreSQL the two transactions race on the key's unique index:
      // the loser's batch is replayed, finds the winner's job and answers it.
      const calls = Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? store : other).submit([newJob({ idempotencyKey: "raced-key" }), newJob({ task: `bystander-${i}` })]),
      );
      const outcomes = await Promise.all(calls);
      const ids = new Set(outcomes.map(([keyed]) => keyed.job.id));
      expect(ids.size).toBe(1);
      expect(outcomes.filter(([keyed]) => !keyed.deduplicated)).toHaveLength(1);
      expect(outcomes.every(([, bystander]) => !bystander.deduplicated)).toBe(true);
      const jobs = await store.listJobs({ queue: "billing", limit: 100 });
      expect(jobs).toHaveLength(11);
    });

    it("announces schedules created, replaced or deleted through another instance", async () => {
      const here = recordAnnouncements(store);
      const told = () => here.changes.filter((c) => c.schedulesChanged === true);
      await other.createSchedule(newSchedule({ name: "elsewhere" }));
      await here.until(() => told().length >= 1);
      expect(told().every((c) => c.external)).toBe(true);
      const seen = told().length;
      await other.deleteSchedule("elsewhere");
      await here.until(() => told().length > seen);
      // Its own changes are announced too, as its own.
      const there = recordAnnouncements(other);
      await other.createSchedule(newSchedule({ name: "own" }));
      expect(there.changes.filter((c) => c.schedulesChanged === true && !c.external)).toHaveLength(1);
      here.off();
      there.off();
    });

    it("leases a job once across instances", async () => {
      await store.submit(Array.from({ length: 20 }, (_, i) => newJob({ task: `t${i}` })));
      const claims = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          claimLeases(i % 2 === 0 ? store : other, { queue: "billing", workerId: `w${i}`, leaseDurationMs: MINUTE, maxJobs: 3 }),
        ),
      );
      const ids = claims.flat().map((l) => l.job.id);
      expect(ids).toHaveLength(20);
      expect(new Set(ids).size).toBe(20);
    });
  });
}
