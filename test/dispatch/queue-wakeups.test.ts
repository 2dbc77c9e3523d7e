/**
 * QueueWakeups: a commit that makes work eligible wakes each of its queues
 * once, however many jobs it holds, and bumps the queue's generation once.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ManualClock } from "../../src/domain/clock.js";
import { QueueWakeups } from "../../src/dispatch/queue-wakeups.js";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { newJob } from "../store/contract.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(): { store: SqliteStore; wakeups: QueueWakeups } {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-wakeups-"));
  const clock = new ManualClock();
  const store = openSqliteStore({ path: join(dir, "jobs.db"), clock, synchronous: "normal" });
  const wakeups = new QueueWakeups(store, clock);
  cleanups.push(
    () => rmSync(dir, { recursive: true, force: true }),
    () => store.close(),
    () => wakeups.close(),
  );
  return { store, wakeups };
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
  const [lease] = await store.claim({ queue: "a", workerId: "w", leaseDurationMs: 60_000, maxJobs: 1 });
  await store.complete(lease.job.id, lease.leaseToken, null);
  expect(woken).toEqual([]);
});

it("wakes a queue when it is resumed, not when it is paused", async () => {
  const { store, wakeups } = setup();
  const woken: string[] = [];
  wakeups.onWork((queue) => woken.push(queue));
  await store.pauseQueue("a");
  expect(woken).toEqual([]);
  const generation = wakeups.generation("a");
  const waiting = wakeups.waitForWork("a", generation, Date.now() + 60_000, new AbortController().signal);
  await store.resumeQueue("a");
  await waiting;
  expect(woken).toEqual(["a"]);
  expect(wakeups.generation("a")).toBe(generation + 1);
});
