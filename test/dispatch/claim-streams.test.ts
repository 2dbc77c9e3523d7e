/**
 * ClaimStreams on its own, pulling messages by hand: what a stream holds
 * that it has not sent yet, what happens to it when the stream ends, how a
 * stream held back by a queue limit gets its next job, and how a parked
 * stream gets a job that becomes due later.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClaimStreams } from "../../src/dispatch/claim-streams.js";
import { QueueWakeups } from "../../src/dispatch/queue-wakeups.js";
import { ManualClock, silentLogger } from "../../src/testing/index.js";
import type { EventKind } from "../../src/domain/job.js";
import type { ClaimedLease } from "../../src/store/store.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases, NO_GROUP_RULES, slowClaims } from "../helpers/store.js";

let dir: string;
let store: SqliteStore;
let streams: ClaimStreams;
let wakeups: QueueWakeups;
let clock: ManualClock;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "lq-streams-"));
  clock = new ManualClock();
  store = openSqliteStore({ path: join(dir, "jobs.db"), clock });
  wakeups = new QueueWakeups(store, clock);
  streams = new ClaimStreams({ store, wakeups, clock, log: silentLogger, keepaliveMs: 60_000 });
});

afterEach(async () => {
  streams.close();
  wakeups.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function nextEvents(kind: EventKind, count: number): Promise<string[]> {
  const ids: string[] = [];
  return new Promise((resolve) => {
    const off = store.onCommitted(({ events }) => {
      for (const e of events) if (e.kind === kind) ids.push(e.jobId);
      if (ids.length >= count) {
        off();
        resolve(ids);
      }
    });
  });
}

describe("ClaimStreams", () => {
  it("releases the leases a stream claimed but never sent when it ends", async () => {
    await store.submit([newJob({ task: "a" }), newJob({ task: "b" }), newJob({ task: "c" })]);
    const abort = new AbortController();
    const claimed = nextEvents("claimed", 3);
    const it = streams
      .open({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxInFlight: 3 }, abort.signal)
      [Symbol.asyncIterator]();
    expect((await it.next()).value).toBeNull(); // keepalive: registered
    await claimed;
    const sent = (await it.next()).value!;
    expect(sent.job.state).toBe("running");

    const released = nextEvents("released", 2);
    abort.abort();
    const ids = await released;
    expect(ids).not.toContain(sent.job.id);
    for (const id of ids) expect(await store.getJob(id)).toMatchObject({ state: "queued", attempts: 0 });
    expect((await store.getJob(sent.job.id))?.state).toBe("running");
  });

  it("parks a stream on a paused queue, and sends the job once the queue is resumed", async () => {
    await store.pauseQueue("billing");
    const abort = new AbortController();
    const it = streams
      .open({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxInFlight: 1 }, abort.signal)
      [Symbol.asyncIterator]();
    expect((await it.next()).value).toBeNull(); // keepalive: registered
    const job = (await store.submit([newJob()]))[0].job;
    // The submit woke the pump, whose claim was queued before this write: once it commits, so has the claim.
    await store.submit([newJob({ queue: "barrier" })]);
    expect((await store.getJob(job.id))?.state).toBe("queued");
    const next = it.next();
    await store.resumeQueue("billing");
    expect((await next).value!.job.id).toBe(job.id);
    abort.abort();
  });

  it("releases the leases a stream claimed before a pause but had not sent", async () => {
    await store.submit([newJob({ task: "a" }), newJob({ task: "b" }), newJob({ task: "c" })]);
    const abort = new AbortController();
    const claimed = nextEvents("claimed", 3);
    const it = streams
      .open({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxInFlight: 3 }, abort.signal)
      [Symbol.asyncIterator]();
    expect((await it.next()).value).toBeNull();
    await claimed;
    const sent = (await it.next()).value!;
    const released = nextEvents("released", 2);
    await store.pauseQueue("billing");
    const ids = await released;
    expect(ids).not.toContain(sent.job.id);
    for (const id of ids) expect(await store.getJob(id)).toMatchObject({ state: "queued", attempts: 0 });
    // Resumed, the stream gets them again: their release freed its room.
    const again = [it.next(), it.next()];
    await store.resumeQueue("billing");
    expect((await Promise.all(again)).map((r) => r.value!.job.id).sort()).toEqual([...ids].sort());
    abort.abort();
  });

  it("counts a sent lease until a committed event finishes it", async () => {
    await store.submit([newJob({ task: "a" }), newJob({ task: "b" })]);
    const abort = new AbortController();
    const it = streams
      .open({ queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxInFlight: 1 }, abort.signal)
      [Symbol.asyncIterator]();
    await it.next();
    const first = (await it.next()).value!;
    const second = it.next();
    await store.complete(first.job.id, first.leaseToken, null);
    expect((await second).value!.job.id).not.toBe(first.job.id);
    abort.abort();
  });

  describe("held back by a queue limit", () => {
    const ALL = ["maxRunning", "rateLimit", "ratePeriodMs"] as const;
    const spec = { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxInFlight: 5 };

    /**
     * Resolves once the queue's pump reported `claims` claims held back by
     * `limit`: at the report itself (QueueWakeups.heldBack, which the pump
     * calls in the same turn as it arms its wait), not by looking again and
     * again. (Some of these tests fake setTimeout, which a polling wait needs.)
     */
    function heldBy(limit: string, claims = 1): Promise<void> {
      const count = () => wakeups.limitedClaims.find((c) => c.limit === limit)?.claims ?? 0;
      if (count() >= claims) return Promise.resolve();
      const report = wakeups.heldBack.bind(wakeups);
      return new Promise((resolve) => {
        wakeups.heldBack = (queue, hold) => {
          report(queue, hold);
          if (count() < claims) return;
          wakeups.heldBack = report;
          resolve(); // the test goes on after the pump's turn, its wait armed
        };
      });
    }

    it("sends the next job as soon as a lease of the queue finishes elsewhere (max_running)", async () => {
      await store.submit([newJob({ task: "a" }), newJob({ task: "b" }), newJob({ task: "c" })]);
      await store.updateQueueConfig("billing", {
        config: { maxRunning: 2, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
        fields: ALL,
      });
      const [elsewhere] = await claimLeases(store, { queue: "billing", workerId: "other", leaseDurationMs: 60_000, maxJobs: 1 });
      const abort = new AbortController();
      const it = streams.open(spec, abort.signal)[Symbol.asyncIterator]();
      expect((await it.next()).value).toBeNull();
      expect((await it.next()).value!.job.task).toBe("b");
      await heldBy("max_running");
      const next = it.next();
      await store.complete(elsewhere.job.id, elsewhere.leaseToken, null);
      expect((await next).value!.job.task).toBe("c");
      abort.abort();
    });

    it("sends the next job when the rate window frees a place (rate_limit)", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      try {
        await store.submit([newJob({ task: "a" }), newJob({ task: "b" }), newJob({ task: "c" })]);
        await store.updateQueueConfig("billing", {
          config: { maxRunning: 0, rateLimit: 2, ratePeriodMs: 30_000, ...NO_GROUP_RULES },
          fields: ALL,
        });
        const abort = new AbortController();
        const it = streams.open(spec, abort.signal)[Symbol.asyncIterator]();
        expect((await it.next()).value).toBeNull();
        expect([(await it.next()).value!.job.task, (await it.next()).value!.job.task]).toEqual(["a", "b"]);
        await heldBy("rate_limit");
        const next = it.next();
        clock.advance(30_000);
        vi.advanceTimersByTime(30_000);
        expect((await next).value!.job.task).toBe("c");
        abort.abort();
      } finally {
        vi.useRealTimers();
      }
    });

    it("claims again at once when the limits are raised", async () => {
      await store.submit([newJob({ task: "a" }), newJob({ task: "b" })]);
      await store.updateQueueConfig("billing", {
        config: { maxRunning: 1, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
        fields: ALL,
      });
      const abort = new AbortController();
      const it = streams.open(spec, abort.signal)[Symbol.asyncIterator]();
      expect((await it.next()).value).toBeNull();
      expect((await it.next()).value!.job.task).toBe("a");
      await heldBy("max_running");
      const next = it.next();
      await store.updateQueueConfig("billing", {
        config: { maxRunning: 0, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
        fields: ["maxRunning"],
      });
      expect((await next).value!.job.task).toBe("b");
      abort.abort();
    });
  });

  describe("a job that becomes due later", () => {
    const spec = { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxInFlight: 1 };
    type Take = () => Promise<ClaimedLease>;
    /** Each makes a job of the queue due in 300 ms (the stream's one lease taken with `take` when it needs one); answers the job and when it is due. */
    const delayedBy: Record<string, (take: Take) => Promise<{ id: string; due: number }>> = {
      "a snooze": async (take) => {
        await store.submit([newJob()]);
        const lease = await take();
        const job = await store.snooze(lease.job.id, lease.leaseToken, 300);
        return { id: job.id, due: job.scheduleTime };
      },
      "a failure with a retry delay": async (take) => {
        await store.submit([newJob()]);
        const lease = await take();
        const job = await store.fail(lease.job.id, lease.leaseToken, { error: "boom", permanent: false, retryDelayMs: 300 });
        return { id: job.id, due: job.scheduleTime };
      },
      "a delayed submit": async () => {
        const [{ job }] = await store.submit([newJob({ schedule: { delayMs: 300 } })]);
        return { id: job.id, due: job.scheduleTime };
      },
    };

    it("waits for a job delayed past the longest timer Node keeps (30 days) without claiming in a loop", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      let claims = 0;
      const counted = new Proxy(store, {
        get: (target, key) => {
          if (key === "claimOutcome") return (...args: Parameters<SqliteStore["claimOutcome"]>) => (claims++, target.claimOutcome(...args));
          const value = Reflect.get(target, key, target) as unknown;
          return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      const own = new ClaimStreams({ store: counted, wakeups, clock, log: silentLogger, keepaliveMs: 60_000 });
      const abort = new AbortController();
      try {
        const [{ job }] = await store.submit([newJob({ schedule: { delayMs: 30 * 24 * 3_600_000 } })]);
        const it = own.open(spec, abort.signal)[Symbol.asyncIterator]();
        expect((await it.next()).value).toBeNull(); // keepalive: registered and parked
        const parked = claims;
        for (let i = 0; i < 50; i++) await vi.advanceTimersByTimeAsync(10);
        expect(claims).toBe(parked);
        expect((await store.getJob(job.id))?.state).toBe("queued");
      } finally {
        abort.abort();
        own.close();
        vi.useRealTimers();
      }
    });

    for (const [how, delay] of Object.entries(delayedBy)) {
      it(`sends a job delayed by ${how} when it is due, though the claim before ran the instant before and answered at that time`, async () => {
        vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
        // Claims whose commit takes 1 ms: the claim reads the time before the job is due, and answers once it is.
        const slow = slowClaims(store, clock, 1);
        const own = new ClaimStreams({ store: slow.store, wakeups, clock, log: silentLogger, keepaliveMs: 60_000 });
        const abort = new AbortController();
        try {
          const it = own.open(spec, abort.signal)[Symbol.asyncIterator]();
          expect((await it.next()).value).toBeNull(); // keepalive: registered
          const { id, due } = await delay(async () => (await it.next()).value!);
          await slow.idle(); // parked, its timer armed for `due`
          expect((await store.getJob(id))?.state).not.toBe("running");
          const next = it.next();
          // The timer fires 1 ms before `due` by the store's clock (timers may): that claim finds nothing.
          clock.set(due - 1);
          vi.advanceTimersByTime(300);
          await slow.idle();
          expect(clock.now()).toBe(due);
          // Whatever the pump armed then fires; nothing else touches the queue.
          vi.advanceTimersByTime(1000);
          await slow.idle();
          expect((await store.getJob(id))?.state).toBe("running");
          expect((await next).value!.job.id).toBe(id);
        } finally {
          abort.abort();
          own.close();
          vi.useRealTimers();
        }
      });
    }
  });
});
