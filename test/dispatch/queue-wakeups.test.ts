/**
 * QueueWakeups: a commit that makes work eligible wakes each of its queues
 * once, however many jobs it holds, and bumps the queue's generation once;
 * it wakes one waiting claimer per job that became pending (all of them on
 * a resume), and a claimer that will not claim hands its wake on;
 * a finishing lease wakes only the claimers that max_running held back.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { QueueWakeups } from "../../src/dispatch/queue-wakeups.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { newJob } from "../store/contract/helpers.js";
import { claimLeases } from "../helpers/store.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(): { store: SqliteStore; wakeups: QueueWakeups; clock: ManualClock } {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-wakeups-"));
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

it("wakes each queue of a commit once, however many jobs became eligible in it", async () => {
  const { store, wakeups } = setup();
  const woken: string[] = [];
  wakeups.onWork((queue) => woken.push(queue));
  await store.submit([
    ...Array.from({ length: 100 }, () => newJob({ queue: "a" })),
    ...Array.from({ length: 50 }, () => newJob({ queue: "b" })),
    newJob({ queue: "a" }),
  ]);
  expect(woken.sort()).toEqual(["a", "b"]);
  expect(wakeups.generation("a")).toBe(1);
  expect(wakeups.generation("b")).toBe(1);
  expect(wakeups.generation("c")).toBe(0);
});

it("does not wake a queue for a commit that makes nothing eligible", async () => {
  const { store, wakeups } = setup();
  await store.submit([newJob({ queue: "a" })]);
  const woken: string[] = [];
  wakeups.onWork((queue) => woken.push(queue));
  const [lease] = await claimLeases(store, { queue: "a", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
  await store.complete(lease.job.id, lease.leaseToken, null);
  expect(woken).toEqual([]);
});

it("wakes a queue when it is resumed, not when it is paused", async () => {
  const { store, wakeups, clock } = setup();
  const woken: string[] = [];
  wakeups.onWork((queue) => woken.push(queue));
  await store.pauseQueue("a");
  expect(woken).toEqual([]);
  const generation = wakeups.generation("a");
  // On the store's clock: the wait's timer is measured against it.
  const waiting = wakeups.waitForWork("a", generation, clock.now() + 60_000, new AbortController().signal);
  await store.resumeQueue("a");
  expect(await waiting).toBe(true); // woken by the resume, not by its timer
  expect(woken).toEqual(["a"]);
  expect(wakeups.generation("a")).toBe(generation + 1);
});

it("wakes a claimer held back by max_running on the queue's next finishing lease, and leaves the others waiting for work", async () => {
  const { store, wakeups, clock } = setup();
  await store.submit([newJob({ queue: "a" })]);
  const [lease] = await claimLeases(store, { queue: "a", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
  const woken: string[] = [];
  wakeups.onWork((queue) => woken.push(queue));
  const generation = wakeups.generation("a");
  const finishedSince = wakeups.finishedLeases("a");
  const forever = clock.now() + 60_000;
  let workerWoken = false;
  const forWork = wakeups.waitForWork("a", generation, forever, new AbortController().signal).then(() => (workerWoken = true));
  const forPlace = wakeups.waitForWork("a", generation, forever, new AbortController().signal, {
    held: { hold: { limit: "max_running" }, finishedSince },
  });
  await store.complete(lease.job.id, lease.leaseToken, null);
  await forPlace;
  expect(wakeups.finishedLeases("a")).toBe(finishedSince + 1);
  expect(wakeups.generation("a")).toBe(generation);
  expect(woken).toEqual([]);
  expect(workerWoken).toBe(false);
  expect(wakeups.waiting).toBe(1);
  wakeups.close();
  await forWork;
});

it("does not park a claimer held back by max_running when a lease finished since it read the count", async () => {
  const { store, wakeups, clock } = setup();
  await store.submit([newJob({ queue: "a" })]);
  const [lease] = await claimLeases(store, { queue: "a", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
  const finishedSince = wakeups.finishedLeases("a");
  await store.fail(lease.job.id, lease.leaseToken, { error: "boom", permanent: true });
  await wakeups.waitForWork("a", wakeups.generation("a"), clock.now() + 60_000, new AbortController().signal, {
    held: { hold: { limit: "max_running" }, finishedSince },
  });
  expect(wakeups.waiting).toBe(0);
});

it("counts the claims a limit held back, by queue and limit", () => {
  const { wakeups } = setup();
  wakeups.heldBack("a", { limit: "max_running" });
  wakeups.heldBack("a", { limit: "max_running" });
  wakeups.heldBack("b", { limit: "rate_limit", until: 5 });
  expect(wakeups.limitedClaims).toEqual([
    { queue: "a", limit: "max_running", claims: 2 },
    { queue: "b", limit: "rate_limit", claims: 1 },
  ]);
});

it("wakes one waiter per job that became pending, longest-waiting first, and all of them on a resume", async () => {
  const { store, wakeups, clock } = setup();
  // On the store's clock: the wait's timer is measured against it.
  const forever = clock.now() + 60_000;
  const woken: number[] = [];
  const wait = (k: number) => {
    const generation = wakeups.generation("a");
    return wakeups.waitForWork("a", generation, forever, new AbortController().signal).then((byWork) => woken.push(byWork ? k : -k));
  };
  const waits = [0, 1, 2, 3, 4].map(wait);
  await store.submit([newJob({ queue: "a" })]);
  await new Promise((resolve) => setImmediate(resolve));
  expect(woken).toEqual([0]);
  expect(wakeups.waiting).toBe(4);
  await store.submit([newJob({ queue: "a" }), newJob({ queue: "a" })]);
  await new Promise((resolve) => setImmediate(resolve));
  expect(woken).toEqual([0, 1, 2]);
  // A resume (or new limits) may make any number of jobs claimable: everyone wakes.
  await store.pauseQueue("a");
  await store.resumeQueue("a");
  await Promise.all(waits);
  expect(woken).toEqual([0, 1, 2, 3, 4]);
});

it("hands a wake on to the next waiter when the woken claimer will not claim", async () => {
  const { store, wakeups, clock } = setup();
  // On the store's clock: the wait's timer is measured against it.
  const forever = clock.now() + 60_000;
  const first = wakeups.waitForWork("a", wakeups.generation("a"), forever, new AbortController().signal);
  let secondWoken: boolean | undefined;
  const second = wakeups.waitForWork("a", wakeups.generation("a"), forever, new AbortController().signal).then((w) => (secondWoken = w));
  await store.submit([newJob({ queue: "a" })]);
  expect(await first).toBe(true);
  await new Promise((resolve) => setImmediate(resolve));
  expect(secondWoken).toBeUndefined();
  // The first claimer's caller went away before it claimed: the job must not wait for a timer.
  wakeups.handOn("a");
  await second;
  expect(secondWoken).toBe(true);
  // An aborted wait is not a wake.
  const abort = new AbortController();
  const aborted = wakeups.waitForWork("a", wakeups.generation("a"), forever, abort.signal);
  abort.abort();
  expect(await aborted).toBe(false);
});
