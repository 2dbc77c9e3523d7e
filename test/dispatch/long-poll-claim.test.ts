/**
 * Claim's long-poll on its own: it answers as soon as work arrives, hands a
 * caller that has gone nothing (releasing what it claimed for it), claims
 * again when every claimed lease was left out as undeliverable, answers
 * with a delayed job when it is due, and, held back by a queue limit,
 * answers as soon as a place is free.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it, vi } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { claimWithin, type LongPollClaimDeps } from "../../src/dispatch/long-poll-claim.js";
import { QueueWakeups } from "../../src/dispatch/queue-wakeups.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { ClaimedLease } from "../../src/store/store.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases, NO_GROUP_RULES, slowClaims } from "../helpers/store.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(): LongPollClaimDeps & { store: SqliteStore; clock: ManualClock } {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-long-poll-"));
  const clock = new ManualClock();
  const store = openSqliteStore({ path: join(dir, "jobs.db"), clock, synchronous: "normal" });
  const wakeups = new QueueWakeups(store, clock);
  cleanups.push(
    () => rmSync(dir, { recursive: true, force: true }),
    () => store.close(),
    () => wakeups.close(),
  );
  return { store, wakeups, clock };
}

const spec = { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 };
const asIs = (claimed: ClaimedLease[]) => Promise.resolve(claimed);

it("answers a parked claim with the job submitted while it waits", async () => {
  const deps = setup();
  const claiming = claimWithin(deps, { ...spec, waitMs: 60_000 }, new AbortController().signal, asIs);
  await parked(deps);
  const [submitted] = await deps.store.submit([newJob()]);
  const leases = await claiming;
  expect(leases.map((l) => l.job.id)).toEqual([submitted.job.id]);
});

it("answers at once with nothing when there is no work and no wait", async () => {
  const deps = setup();
  expect(await claimWithin(deps, { ...spec, waitMs: 0 }, new AbortController().signal, asIs)).toEqual([]);
});

it("hands a caller that went away during the claim nothing, and releases what it claimed", async () => {
  const deps = setup();
  const [submitted] = await deps.store.submit([newJob()]);
  const gone = new AbortController();
  // The caller disconnects exactly while the claim transaction commits.
  const goneDuringClaim = new Proxy(deps.store, {
    get(target, prop) {
      if (prop === "claimOutcome") {
        return async (s: typeof spec) => {
          const claimed = await target.claimOutcome(s);
          gone.abort();
          return claimed;
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const leases = await claimWithin({ ...deps, store: goneDuringClaim }, { ...spec, waitMs: 60_000 }, gone.signal, asIs);
  expect(leases).toEqual([]);
  expect(await deps.store.getJob(submitted.job.id)).toMatchObject({ state: "queued", attempts: 0 });
});

it("claims again when every claimed lease was left out as undeliverable", async () => {
  const deps = setup();
  const [first, second] = await deps.store.submit([newJob({ priority: 1 }), newJob()]);
  const offered: string[] = [];
  const leases = await claimWithin(deps, { ...spec, waitMs: 0 }, new AbortController().signal, (claimed) => {
    offered.push(...claimed.map((l) => l.job.id));
    return Promise.resolve(claimed.filter((l) => l.job.id !== first.job.id));
  });
  expect(offered).toEqual([first.job.id, second.job.id]);
  expect(leases.map((l) => l.job.id)).toEqual([second.job.id]);
});

it("answers with a delayed job when it is due, though the claim before ran the instant before and answered at that time", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const gone = new AbortController();
  try {
    const deps = setup();
    // Claims whose commit takes 1 ms: the claim reads the time before the job is due, and answers once it is.
    const slow = slowClaims(deps.store, deps.clock, 1);
    const [{ job }] = await deps.store.submit([newJob({ schedule: { delayMs: 300 } })]);
    let answered: ClaimedLease[] | undefined;
    void claimWithin({ ...deps, store: slow.store }, { ...spec, waitMs: 60_000 }, gone.signal, asIs).then((l) => (answered = l));
    await slow.idle();
    expect(deps.wakeups.waiting).toBe(1);
    // The timer fires 1 ms before the job is due by the store's clock (timers may): that claim finds nothing.
    deps.clock.set(job.scheduleTime - 1);
    vi.advanceTimersByTime(300);
    await slow.idle();
    expect(deps.clock.now()).toBe(job.scheduleTime);
    // Whatever the wait armed then fires, long before the wait ends; nothing else touches the queue.
    vi.advanceTimersByTime(1000);
    await slow.idle();
    expect(answered?.map((l) => l.job.id)).toEqual([job.id]);
  } finally {
    gone.abort();
    vi.useRealTimers();
  }
});

/**
 * Resolves once the long-poll is parked (its wait registered, its timer
 * armed): when QueueWakeups.waitForWork registers it, not by looking again
 * and again. (Some of these tests fake setTimeout, which a polling wait needs.)
 */
function parked(deps: LongPollClaimDeps): Promise<void> {
  const { wakeups } = deps;
  if (wakeups.waiting > 0) return Promise.resolve();
  const wait = wakeups.waitForWork.bind(wakeups);
  return new Promise((resolve) => {
    wakeups.waitForWork = (...args) => {
      const waiting = wait(...args);
      if (wakeups.waiting > 0) {
        wakeups.waitForWork = wait;
        resolve();
      }
      return waiting;
    };
  });
}

const ALL = ["maxRunning", "rateLimit", "ratePeriodMs"] as const;

it("answers a claim held back by max_running as soon as another worker's lease of the queue finishes", async () => {
  const deps = setup();
  await deps.store.submit([newJob({ task: "first" }), newJob({ task: "second" })]);
  await deps.store.updateQueueConfig("billing", {
    config: { maxRunning: 1, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
    fields: ALL,
  });
  const [elsewhere] = await claimLeases(deps.store, { ...spec, workerId: "other" });
  const claiming = claimWithin(deps, { ...spec, waitMs: 60_000 }, new AbortController().signal, asIs);
  await parked(deps);
  expect(deps.wakeups.limitedClaims).toEqual([{ queue: "billing", limit: "max_running", claims: 1 }]);
  await deps.store.complete(elsewhere.job.id, elsewhere.leaseToken, null);
  const [lease] = await claiming;
  expect(lease.job.task).toBe("second");
});

it("answers a claim held back by the rate limit when the window frees a place, not before", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  try {
    const deps = setup();
    await deps.store.submit([newJob({ task: "first" }), newJob({ task: "second" })]);
    await deps.store.updateQueueConfig("billing", {
      config: { maxRunning: 0, rateLimit: 1, ratePeriodMs: 10_000, ...NO_GROUP_RULES },
      fields: ALL,
    });
    expect(await claimWithin(deps, { ...spec, waitMs: 60_000 }, new AbortController().signal, asIs)).toHaveLength(1);
    let answered = false;
    const claiming = claimWithin(deps, { ...spec, waitMs: 60_000 }, new AbortController().signal, asIs).finally(() => (answered = true));
    await parked(deps);
    deps.clock.advance(9_999);
    vi.advanceTimersByTime(9_999);
    await deps.store.submit([newJob({ queue: "barrier" })]);
    expect(answered).toBe(false);
    deps.clock.advance(1);
    vi.advanceTimersByTime(1);
    const [lease] = await claiming;
    expect(lease.job.task).toBe("second");
    expect(deps.wakeups.limitedClaims).toEqual([{ queue: "billing", limit: "rate_limit", claims: 1 }]);
  } finally {
    vi.useRealTimers();
  }
});

it("answers a held-back claim at once when the queue's limits are raised", async () => {
  const deps = setup();
  await deps.store.submit([newJob({ task: "first" }), newJob({ task: "second" })]);
  await deps.store.updateQueueConfig("billing", {
    config: { maxRunning: 1, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
    fields: ALL,
  });
  await claimLeases(deps.store, { ...spec, workerId: "other" });
  const claiming = claimWithin(deps, { ...spec, waitMs: 60_000 }, new AbortController().signal, asIs);
  await parked(deps);
  await deps.store.updateQueueConfig("billing", {
    config: { maxRunning: 2, rateLimit: 0, ratePeriodMs: 1000, ...NO_GROUP_RULES },
    fields: ["maxRunning"],
  });
  expect((await claiming).map((l) => l.job.task)).toEqual(["second"]);
});
