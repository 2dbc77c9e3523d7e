/**
 * Groups (docs/api.md "Groups"; proto QueueConfig group_max_running,
 * group_rate_limit, fair, ordered and SubmitRequest.group_key): fair turns,
 * the per-group bounds, ordered heads, the holds a claim reports, the same
 * rules over a reopen and across instances, ListGroups and ListJobs by
 * group, and a seeded random walk that checks every rule after every step.
 */
import { describe, expect, it } from "vitest";
import type { Job } from "../../../src/domain/job.js";
import { NO_QUEUE_LIMITS, QUEUE_CONFIG_FIELDS, type QueueConfig, type QueueConfigField } from "../../../src/domain/queue-limits.js";
import type { NewJob } from "../../../src/domain/submission.js";
import type { ClaimOutcome, Store } from "../../../src/store/store.js";
import { clock, DAY, harness, MINUTE, newJob, SECOND, store } from "./helpers.js";

const Q = "billing";

/** Sets the fields named in `config` (the others keep theirs). */
function configure(s: Store, config: Partial<QueueConfig>, queue = Q): Promise<QueueConfig> {
  return s.updateQueueConfig(queue, { config: { ...NO_QUEUE_LIMITS, ...config }, fields: Object.keys(config) as QueueConfigField[] });
}

/** Leases last a day: no lease expires in these tests unless one says so. */
function claim(s: Store, maxJobs: number, workerId = "w", queue = Q): Promise<ClaimOutcome> {
  return s.claimOutcome({ queue, workerId, leaseDurationMs: DAY, maxJobs });
}

/** `n` jobs of one group, tasks `<group>-0`, `<group>-1`, ... in submission order. */
async function submitGroup(groupKey: string, n: number, overrides: Partial<NewJob> = {}): Promise<Job[]> {
  const out = await store.submit(
    Array.from({ length: n }, (_, i) => newJob({ groupKey, task: `${groupKey || "none"}-${i}`, ...overrides })),
  );
  return out.map((o) => o.job);
}

const groupsOf = (o: ClaimOutcome) => o.leases.map((l) => l.job.groupKey);
const countBy = (keys: string[]) => keys.reduce((m, k) => m.set(k, (m.get(k) ?? 0) + 1), new Map<string, number>());

/** The most lease times inside any window [t, t + period). */
function busiestWindow(times: number[], period: number): number {
  return Math.max(0, ...times.map((t) => times.filter((u) => u >= t && u < t + period).length));
}

/** Running jobs of the queue, by group. */
async function runningByGroup(s: Store = store): Promise<Map<string, number>> {
  const running = await s.listJobs({ queue: Q, states: ["running"], limit: 10_000 });
  return countBy(running.map((j) => j.groupKey));
}

/** A small deterministic PRNG (mulberry32): the random walk is the same on every run and engine. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The claim order inside a group: priority desc, then schedule_time, then id. */
function claimOrder(a: Job, b: Job): number {
  return b.priority - a.priority || a.scheduleTime - b.scheduleTime || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

const isPending = (j: Job) => j.state === "queued" || j.state === "retry";
const isOpen = (j: Job) => isPending(j) || j.state === "running";
const lowestId = (jobs: Job[]) => jobs.reduce<Job | undefined>((m, j) => (m === undefined || j.id < m.id ? j : m), undefined);

export function describeGroups(): void {
  describe("groups", () => {
    describe("fair", () => {
      it("serves a group of 5 behind 60 jobs of another within the first 10 single-job claims, alternating, least recently served first", async () => {
        await configure(store, { fair: true });
        const a = await submitGroup("a", 60);
        const b = await submitGroup("b", 5);
        const leased: Job[] = [];
        for (let i = 0; i < 10; i++) {
          const o = await claim(store, 1);
          expect(o.leases).toHaveLength(1);
          leased.push(o.leases[0].job);
        }
        // Never served both: ties by group_key, so "a" first.
        expect(leased.map((j) => j.groupKey)).toEqual(["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"]);
        // Inside a group the usual order (same priority and schedule_time here: submission order).
        expect(leased.filter((j) => j.groupKey === "a").map((j) => j.id)).toEqual(a.slice(0, 5).map((j) => j.id));
        expect(leased.filter((j) => j.groupKey === "b").map((j) => j.id)).toEqual(b.map((j) => j.id));
      });

      it("serves every group in one claim of 10, round by round", async () => {
        await configure(store, { fair: true });
        await submitGroup("a", 60);
        await submitGroup("b", 5);
        const o = await claim(store, 10);
        expect(o.leases).toHaveLength(10);
        expect(countBy(groupsOf(o))).toEqual(
          new Map([
            ["a", 5],
            ["b", 5],
          ]),
        );
        expect(o.heldBack).toBeNull();
        // b is exhausted: the next claim is all a.
        expect(groupsOf(await claim(store, 3))).toEqual(["a", "a", "a"]);
      });

      it("is needed for that: without fair the first 10 claims all go to the group submitted first", async () => {
        await submitGroup("a", 60);
        await submitGroup("b", 5);
        const o = await claim(store, 10);
        expect(groupsOf(o)).toEqual(Array(10).fill("a"));
      });

      it("orders a group by priority, then schedule_time, then id, and counts jobs without a group as one group", async () => {
        await configure(store, { fair: true });
        const [low] = await submitGroup("a", 1, { priority: 0 });
        clock.advance(SECOND);
        const [later] = await submitGroup("a", 1, { priority: 5 });
        const [early] = await submitGroup("a", 1, { priority: 5, schedule: { at: clock.now() - MINUTE } });
        const none = await submitGroup("", 3);
        const o = await claim(store, 6);
        // Round 1: "" (ties by group_key: "" < "a"), a; then round after round.
        expect(o.leases.map((l) => l.job.id)).toEqual([none[0].id, early.id, none[1].id, later.id, none[2].id, low.id]);
      });

      it("keeps the turn of a group that emptied and got jobs again before a claim found it empty", async () => {
        await configure(store, { fair: true });
        await submitGroup("m", 10);
        const [z] = await submitGroup("z", 1);
        // m, then z: z was served last.
        expect(groupsOf(await claim(store, 1))).toEqual(["m"]);
        const zLease = (await claim(store, 1)).leases[0];
        expect(zLease.job.id).toBe(z.id);
        await store.complete(z.id, zLease.leaseToken, null);
        // z has no open job now and gets new ones before any claim saw it empty: it keeps its turn, after m.
        await submitGroup("z", 2);
        expect(groupsOf(await claim(store, 1))).toEqual(["m"]);
        expect(groupsOf(await claim(store, 1))).toEqual(["z"]);
      });

      it("serves a group that came back as never served also after claims went on without it", async () => {
        await configure(store, { fair: true });
        await submitGroup("b", 5);
        const [z] = await submitGroup("z", 1);
        const first = await claim(store, 2);
        expect(groupsOf(first)).toEqual(["b", "z"]);
        const zLease = first.leases.find((l) => l.job.id === z.id)!;
        await store.complete(z.id, zLease.leaseToken, null);
        expect(groupsOf(await claim(store, 1))).toEqual(["b"]);
        expect(groupsOf(await claim(store, 1))).toEqual(["b"]);
        await submitGroup("z", 2);
        await submitGroup("c", 2);
        // b was served last; c and z count as never served: c, z by group_key, then b.
        expect(groupsOf(await claim(store, 3))).toEqual(["c", "z", "b"]);
      });
    });

    describe("group_max_running", () => {
      for (const fair of [false, true]) {
        it(`never has more than group_max_running RUNNING per group, and a finished lease frees exactly one place${fair ? " (fair)" : ""}`, async () => {
          await configure(store, { groupMaxRunning: 2, fair });
          for (const g of ["a", "b", "c"]) await submitGroup(g, 10);
          await submitGroup("", 3);
          const first = await claim(store, 100);
          // Jobs without a group are not bounded.
          expect(countBy(groupsOf(first))).toEqual(
            new Map([
              ["a", 2],
              ["b", 2],
              ["c", 2],
              ["", 3],
            ]),
          );
          expect(first.heldBack).toEqual({ limit: "group_max_running", onFinish: true, until: null });
          expect(first.nextScheduleTime).toBeNull();

          const again = await claim(store, 100);
          expect(again.leases).toEqual([]);
          expect(again.heldBack).toEqual({ limit: "group_max_running", onFinish: true, until: null });

          const done = first.leases.find((l) => l.job.groupKey === "b")!;
          await store.complete(done.job.id, done.leaseToken, null);
          const freed = await claim(store, 100);
          expect(groupsOf(freed)).toEqual(["b"]);
          expect(freed.heldBack).toEqual({ limit: "group_max_running", onFinish: true, until: null });
          expect(await runningByGroup()).toEqual(
            new Map([
              ["a", 2],
              ["b", 2],
              ["c", 2],
              ["", 3],
            ]),
          );
        });
      }

      it("names the group rule also when the groups it holds were parked by earlier claims (fair)", async () => {
        await configure(store, { groupMaxRunning: 1, groupRateLimit: 2, ratePeriodMs: 10 * SECOND, fair: true });
        await submitGroup("a", 5);
        await submitGroup("b", 5);
        const t0 = clock.now();
        const first = await claim(store, 10);
        expect(countBy(groupsOf(first))).toEqual(
          new Map([
            ["a", 1],
            ["b", 1],
          ]),
        );
        // The claims after it find both groups held (and park them), and say so however often they ask.
        for (let i = 0; i < 3; i++) {
          const o = await claim(store, 10);
          expect(o.leases).toEqual([]);
          expect(o.heldBack, `claim ${i + 2}`).toEqual({ limit: "group_max_running", onFinish: true, until: null });
        }
        // a's lease is given back, twice: then a has room to run but two grants in its window, and b still runs.
        const a0 = first.leases.find((l) => l.job.groupKey === "a")!;
        await store.release(a0.job.id, a0.leaseToken);
        const again = await claim(store, 10);
        expect(groupsOf(again)).toEqual(["a"]);
        await store.release(again.leases[0].job.id, again.leases[0].leaseToken);
        for (let i = 0; i < 3; i++) {
          const o = await claim(store, 10);
          expect(o.leases).toEqual([]);
          // Freed by b's lease ending or by a's window at t0 + 10 s, whichever comes first.
          expect(o.heldBack, `claim ${i + 6}`).toMatchObject({ onFinish: true, until: t0 + 10 * SECOND });
        }
      });

      it("keeps queue-level max_running on top of the group rules", async () => {
        await configure(store, { groupMaxRunning: 2, maxRunning: 3, fair: true });
        for (const g of ["a", "b", "c"]) await submitGroup(g, 10);
        const o = await claim(store, 100);
        expect(o.leases).toHaveLength(3);
        expect(new Set(groupsOf(o))).toEqual(new Set(["a", "b", "c"]));
        expect(o.heldBack).toEqual({ limit: "max_running" });
      });
    });

    describe("group_rate_limit", () => {
      const PERIOD = 10 * SECOND;

      for (const fair of [false, true]) {
        it(`holds a group at group_rate_limit leases per window and names when the window frees${fair ? " (fair)" : ""}`, async () => {
          await configure(store, { groupRateLimit: 3, ratePeriodMs: PERIOD, fair });
          await submitGroup("a", 10);
          const t0 = clock.now();
          const first = await claim(store, 5);
          expect(first.leases).toHaveLength(3);
          expect(first.heldBack).toEqual({ limit: "group_rate_limit", onFinish: false, until: t0 + PERIOD });
          expect(first.nextScheduleTime).toBeNull();

          // A job without a group due at t0 + 6 s: a claim held back waits for that, the earlier of the two.
          clock.advance(4 * SECOND);
          await submitGroup("", 1, { schedule: { at: t0 + 6 * SECOND } });
          const held = await claim(store, 5);
          expect(held.leases).toEqual([]);
          expect(held.heldBack).toEqual({ limit: "group_rate_limit", onFinish: false, until: t0 + 6 * SECOND });
          expect(held.nextScheduleTime).toBeNull();
          clock.advance(2 * SECOND);
          expect(groupsOf(await claim(store, 5))).toEqual([""]);

          clock.set(t0 + PERIOD - 1);
          expect((await claim(store, 5)).leases).toEqual([]);
          clock.advance(1);
          expect((await claim(store, 5)).leases).toHaveLength(3);
        });

        it(`keeps every group window when claims commit out of time order${fair ? " (fair)" : ""}`, async () => {
          await configure(store, { groupRateLimit: 3, ratePeriodMs: PERIOD, fair });
          await submitGroup("a", 10);
          const t0 = clock.now();
          expect((await claim(store, 2)).leases).toHaveLength(2);
          clock.set(t0 + PERIOD + PERIOD / 2);
          expect((await claim(store, 1)).leases).toHaveLength(1);
          // A claim whose time is in the first window (it read its time before it waited its turn): that window is full.
          clock.set(t0 + PERIOD - 1);
          const late = await claim(store, 3);
          expect(late.leases).toEqual([]);
          expect(late.heldBack).toEqual({ limit: "group_rate_limit", onFinish: false, until: t0 + PERIOD });
        });

        it(`names the oldest grant still in the window, not the claim's own${fair ? " (fair)" : ""}`, async () => {
          await configure(store, { groupRateLimit: 3, ratePeriodMs: PERIOD, fair });
          await submitGroup("a", 10);
          const t0 = clock.now();
          expect((await claim(store, 2)).leases).toHaveLength(2);
          clock.advance(3 * SECOND);
          const second = await claim(store, 5);
          expect(second.leases).toHaveLength(1);
          expect(second.heldBack).toEqual({ limit: "group_rate_limit", onFinish: false, until: t0 + PERIOD });
          clock.set(t0 + PERIOD);
          // The two of t0 left the window; the one of t0 + 3 s is its oldest now.
          const third = await claim(store, 5);
          expect(third.leases).toHaveLength(2);
          expect(third.heldBack).toEqual({ limit: "group_rate_limit", onFinish: false, until: t0 + 3 * SECOND + PERIOD });
        });

        it(`keeps every window of rate_period at or under the limit per group under claims at uneven steps${fair ? " (fair)" : ""}`, async () => {
          await configure(store, { groupRateLimit: 3, ratePeriodMs: PERIOD, fair });
          await submitGroup("a", 40);
          await submitGroup("b", 40);
          await submitGroup("", 30);
          const times = new Map<string, number[]>([
            ["a", []],
            ["b", []],
            ["", []],
          ]);
          const steps = [0, 700, 2300, 0, 4100, 1, 2899, 5000, 999, 1, 6000, 3333, 0, 4000, 9999, 1, 10_000];
          for (const [i, step] of steps.entries()) {
            clock.advance(step);
            const outcomes = await Promise.all(Array.from({ length: 1 + (i % 3) * 3 }, (_, k) => claim(store, 1 + ((i + k) % 4), `w${k}`)));
            for (const o of outcomes) for (const l of o.leases) times.get(l.job.groupKey)!.push(clock.now());
          }
          expect(busiestWindow(times.get("a")!, PERIOD)).toBe(3);
          expect(busiestWindow(times.get("b")!, PERIOD)).toBe(3);
          expect(times.get("a")!.length).toBeGreaterThan(6);
          // Jobs without a group are not limited.
          expect(busiestWindow(times.get("")!, PERIOD)).toBeGreaterThan(3);
        });
      }
    });

    describe("ordered", () => {
      for (const fair of [false, true]) {
        const label = fair ? " (fair)" : "";

        it(`leases one job per group at a time in submission order, whatever the priorities${label}`, async () => {
          await configure(store, { ordered: true, fair });
          const a = await submitGroup("a", 3);
          const [urgent] = await submitGroup("a", 1, { priority: 9 });
          const b = await submitGroup("b", 2);
          const first = await claim(store, 10);
          expect(first.leases.map((l) => l.job.id).sort()).toEqual([a[0].id, b[0].id].sort());
          expect(first.heldBack).toEqual({ limit: "ordered", onFinish: true, until: null });
          let lease = first.leases.find((l) => l.job.groupKey === "a")!;
          for (const expected of [a[1], a[2], urgent]) {
            await store.complete(lease.job.id, lease.leaseToken, null);
            const next = await claim(store, 10);
            expect(next.leases.map((l) => l.job.id)).toEqual([expected.id]);
            lease = next.leases[0];
          }
        });

        it(`keeps a group waiting for a head in RETRY or snoozed; a cancelled or DEAD head lets the next go${label}`, async () => {
          await configure(store, { ordered: true, fair });
          const a = await submitGroup("a", 5);
          const b = await submitGroup("b", 2);
          const t0 = clock.now();
          const first = await claim(store, 10);
          const token = (id: string, o: ClaimOutcome) => o.leases.find((l) => l.job.id === id)!.leaseToken;
          const b0 = token(b[0].id, first);

          // RETRY head: the group waits for it, then gets the same job.
          await store.fail(a[0].id, token(a[0].id, first), { error: "later", permanent: false, retryDelayMs: 5 * SECOND });
          const waiting = await claim(store, 10);
          expect(waiting.leases).toEqual([]);
          // a waits for its head's retry; b's head is running.
          expect(waiting.heldBack).toEqual({ limit: "ordered", onFinish: true, until: t0 + 5 * SECOND });
          clock.advance(5 * SECOND - 1);
          expect((await claim(store, 10)).leases).toEqual([]);
          clock.advance(1);
          const retried = await claim(store, 10);
          expect(retried.leases.map((l) => l.job.id)).toEqual([a[0].id]);

          // Snoozed head: the same.
          await store.snooze(a[0].id, token(a[0].id, retried), 3 * SECOND);
          expect((await claim(store, 10)).leases).toEqual([]);
          clock.advance(3 * SECOND);
          const woke = await claim(store, 10);
          expect(woke.leases.map((l) => l.job.id)).toEqual([a[0].id]);

          // Completed head: the next.
          await store.complete(a[0].id, token(a[0].id, woke), null);
          const second = await claim(store, 10);
          expect(second.leases.map((l) => l.job.id)).toEqual([a[1].id]);

          // A snoozed head, cancelled while the group waits for it: the next goes at once.
          await store.snooze(a[1].id, token(a[1].id, second), MINUTE);
          expect((await claim(store, 10)).leases).toEqual([]);
          await store.cancel(a[1].id, "not needed");
          const third = await claim(store, 10);
          expect(third.leases.map((l) => l.job.id)).toEqual([a[2].id]);

          // A head in RETRY, cancelled: the next at once.
          await store.fail(a[2].id, token(a[2].id, third), { error: "later", permanent: false, retryDelayMs: MINUTE });
          expect((await claim(store, 10)).leases).toEqual([]);
          await store.cancel(a[2].id, "not needed");
          const fourth = await claim(store, 10);
          expect(fourth.leases.map((l) => l.job.id)).toEqual([a[3].id]);

          // A DEAD head (failed permanently): the next.
          await store.fail(b[0].id, b0, { error: "broken", permanent: true });
          expect((await store.getJob(b[0].id))!.state).toBe("dead");
          const fifth = await claim(store, 10);
          expect(fifth.leases.map((l) => l.job.id)).toEqual([b[1].id]);
        });

        it(`lets the next go when a queued head is cancelled before it is claimed, and leaves jobs without a group unordered${label}`, async () => {
          await configure(store, { ordered: true, fair });
          const a = await submitGroup("a", 3);
          const none = await submitGroup("", 3);
          await store.cancel(a[0].id, "not needed");
          const o = await claim(store, 10);
          expect(o.leases.map((l) => l.job.id).sort()).toEqual([a[1].id, ...none.map((j) => j.id)].sort());
        });
      }
    });

    describe("over a reopen and across instances", () => {
      it("keeps the group rules, running counts and group rate windows when the database is opened again", async () => {
        const config: QueueConfig = {
          maxRunning: 0,
          rateLimit: 0,
          ratePeriodMs: MINUTE,
          groupMaxRunning: 1,
          groupRateLimit: 2,
          fair: true,
          ordered: false,
        };
        await store.updateQueueConfig(Q, { config, fields: [...QUEUE_CONFIG_FIELDS] });
        await submitGroup("a", 5);
        await submitGroup("b", 5);
        const first = await claim(store, 10);
        expect(countBy(groupsOf(first))).toEqual(
          new Map([
            ["a", 1],
            ["b", 1],
          ]),
        );
        await store.close();
        const reopened = await harness.openInstance();
        expect((await reopened.queueCounts()).find((q) => q.queue === Q)!.config).toEqual(config);
        expect((await claim(reopened, 10)).leases).toEqual([]);
        const a0 = first.leases.find((l) => l.job.groupKey === "a")!;
        await reopened.complete(a0.job.id, a0.leaseToken, null);
        const second = await claim(reopened, 10);
        expect(groupsOf(second)).toEqual(["a"]);
        await reopened.complete(second.leases[0].job.id, second.leases[0].leaseToken, null);
        // a had 2 leases in the window.
        expect((await claim(reopened, 10)).leases).toEqual([]);
        clock.advance(MINUTE);
        expect(groupsOf(await claim(reopened, 10))).toEqual(["a"]);
      });

      for (const fair of [false, true]) {
        it(`never exceeds group_max_running with two instances claiming at once${fair ? " (fair)" : ""}`, async () => {
          const other = await harness.openInstance();
          await configure(store, { groupMaxRunning: 2, fair });
          for (const g of ["a", "b", "c", "d"]) await submitGroup(g, 8);
          const instances = [store, other];
          const claimAll = () => Promise.all(Array.from({ length: 24 }, (_, i) => claim(instances[i % 2], 1 + (i % 3), `w${i}`)));
          const first = (await claimAll()).flatMap((o) => o.leases);
          expect(first).toHaveLength(8);
          expect(await runningByGroup()).toEqual(new Map(["a", "b", "c", "d"].map((g) => [g, 2])));
          expect(await runningByGroup(other)).toEqual(new Map(["a", "b", "c", "d"].map((g) => [g, 2])));

          // One lease of each group finishes, through either instance; the claims refill exactly those places.
          const finishing = ["a", "b", "c", "d"].map((g) => first.find((l) => l.job.groupKey === g)!);
          await Promise.all(finishing.map((l, i) => instances[i % 2].complete(l.job.id, l.leaseToken, null)));
          const second = (await claimAll()).flatMap((o) => o.leases);
          expect(second).toHaveLength(4);
          expect(await runningByGroup()).toEqual(new Map(["a", "b", "c", "d"].map((g) => [g, 2])));
        });
      }
    });

    describe("reads", () => {
      it("lists groups with unfinished jobs in group_key order with their counts, pages by key, and counts pending groups", async () => {
        const t0 = clock.now();
        // d: its only job completed (not listed).
        const [d] = await submitGroup("d", 1, { priority: 10 });
        const dLease = (await claim(store, 1)).leases[0];
        expect(dLease.job.id).toBe(d.id);
        await store.complete(d.id, dLease.leaseToken, null);
        // a: one running, two queued.
        await submitGroup("a", 1, { priority: 5 });
        expect(groupsOf(await claim(store, 1))).toEqual(["a"]);
        // r: only a running job (listed, but not pending).
        await submitGroup("r", 1, { priority: 4 });
        expect(groupsOf(await claim(store, 1))).toEqual(["r"]);
        // b: one in retry (due at t0 + 30 s), one queued.
        const [b0] = await submitGroup("b", 1, { priority: 3 });
        const bLease = (await claim(store, 1)).leases[0];
        expect(bLease.job.id).toBe(b0.id);
        await store.fail(b0.id, bLease.leaseToken, { error: "later", permanent: false, retryDelayMs: 30 * SECOND });
        clock.advance(SECOND);
        const a = await submitGroup("a", 2);
        await submitGroup("b", 1);
        await submitGroup("c", 1, { schedule: { delayMs: MINUTE } });
        await submitGroup("", 2);
        await submitGroup("e", 1, { queue: "emails" });

        const all = await store.listGroups({ queue: Q, afterKey: "", limit: 100 });
        expect(all).toEqual([
          { groupKey: "a", queued: 2, running: 1, retry: 0, oldestPendingTime: t0 + SECOND },
          { groupKey: "b", queued: 1, running: 0, retry: 1, oldestPendingTime: t0 + SECOND },
          { groupKey: "c", queued: 1, running: 0, retry: 0, oldestPendingTime: t0 + SECOND + MINUTE },
          { groupKey: "r", queued: 0, running: 1, retry: 0, oldestPendingTime: null },
        ]);
        expect(await store.listGroups({ queue: Q, afterKey: "", limit: 2 })).toEqual(all.slice(0, 2));
        expect(await store.listGroups({ queue: Q, afterKey: "b", limit: 2 })).toEqual(all.slice(2, 4));
        expect(await store.listGroups({ queue: Q, afterKey: "r", limit: 2 })).toEqual([]);
        expect(await store.listGroups({ queue: "emails", afterKey: "", limit: 10 })).toEqual([
          { groupKey: "e", queued: 1, running: 0, retry: 0, oldestPendingTime: t0 + SECOND },
        ]);
        expect(await store.listGroups({ queue: "nothing", afterKey: "", limit: 10 })).toEqual([]);

        expect(await store.countPendingGroups(Q)).toBe(3);
        expect(await store.countPendingGroups("emails")).toBe(1);
        expect(await store.countPendingGroups("nothing")).toBe(0);

        const aJobs = await store.listJobs({ queue: Q, groupKey: "a", limit: 100 });
        expect(aJobs.map((j) => j.groupKey)).toEqual(["a", "a", "a"]);
        expect(aJobs.slice(0, 2).map((j) => j.id)).toEqual([a[1].id, a[0].id]);
        expect(aJobs[2].state).toBe("running");
        expect((await store.listJobs({ queue: Q, groupKey: "a", states: ["queued"], limit: 100 })).map((j) => j.id)).toEqual([
          a[1].id,
          a[0].id,
        ]);
        expect((await store.listJobs({ queue: Q, groupKey: "b", states: ["queued", "retry"], limit: 100 })).map((j) => j.state)).toEqual([
          "queued",
          "retry",
        ]);
        const page = await store.listJobs({ queue: Q, groupKey: "a", limit: 1 });
        expect(page.map((j) => j.id)).toEqual([a[1].id]);
        expect((await store.listJobs({ queue: Q, groupKey: "a", limit: 1, beforeId: page[0].id })).map((j) => j.id)).toEqual([a[0].id]);
        expect((await store.listJobs({ queue: Q, groupKey: "d", limit: 10 })).map((j) => j.state)).toEqual(["completed"]);
        expect(await store.listJobs({ queue: Q, groupKey: "e", limit: 10 })).toEqual([]);
        expect((await store.listJobs({ groupKey: "e", limit: 10 })).map((j) => j.queue)).toEqual(["emails"]);
        // Jobs keep their group.
        expect((await store.getJob(a[0].id))!.groupKey).toBe("a");
      });
    });

    describe("turning fair on and off", () => {
      it("serves the groups of jobs submitted before the queue became fair, and again after it was off and on", async () => {
        await submitGroup("a", 20);
        await submitGroup("b", 3);
        await submitGroup("", 2);
        await configure(store, { fair: true });
        const turns: string[] = [];
        for (let i = 0; i < 6; i++) turns.push(...groupsOf(await claim(store, 1)));
        expect(turns).toEqual(["", "a", "b", "", "a", "b"]);

        await configure(store, { fair: false });
        // Not fair: the claim order (a's jobs were submitted first).
        expect(groupsOf(await claim(store, 2))).toEqual(["a", "a"]);
        await submitGroup("c", 2);

        await configure(store, { fair: true });
        const again: string[] = [];
        for (let i = 0; i < 5; i++) again.push(...groupsOf(await claim(store, 1)));
        // Every group starts as never served: a, b, c by group_key; b then has none left.
        expect(again).toEqual(["a", "b", "c", "a", "c"]);
        expect(countBy(groupsOf(await claim(store, 100)))).toEqual(new Map([["a", 20 - 2 - 2 - 2]]));
      });
    });

    describe("random walk", () => {
      // Seeds whose configs between them cover each rule (the failure message names the config):
      // 1 group_max_running + group_rate_limit + max_running; 5 fair + group_rate_limit; 8 fair alone;
      // 13 fair + ordered; 16 fair + ordered + group_rate_limit + max_running; 18 ordered + both group bounds.
      const SEEDS = [1, 5, 8, 13, 16, 18];
      for (const seed of SEEDS) {
        // About 300 writes, each durable: a few seconds on SQLite.
        it(`keeps every group rule after every step (seed ${seed})`, { timeout: 60_000 }, async () => {
          await randomWalk(seed, 300);
        });
      }
    });
  });
}

/**
 * A random walk over one queue with random group rules: submits, claims,
 * every way a lease ends, cancels and clock steps, checking after each
 * step, from the store's own reads, that:
 * - no group has more than group_max_running RUNNING, the queue no more than max_running;
 * - ordered: a group runs at most one job, always its lowest-id open one
 *   (so a RETRY or snoozed head holds its group);
 * - no window of rate_period holds more than group_rate_limit leases of a group;
 * - a claim leases only eligible jobs, inside a group in claim order;
 * - a claim that got fewer than it asked left no job behind that every rule allowed;
 * - fair (with no other group rule): between two claims that served G, a group
 *   X eligible at both was served too (unless G had no open job meanwhile and
 *   so came back as never served).
 */
async function randomWalk(seed: number, steps: number): Promise<void> {
  const rnd = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];

  const PERIOD = 10 * SECOND;
  const pureFair = rnd() < 0.35;
  const config: QueueConfig = {
    ...NO_QUEUE_LIMITS,
    ratePeriodMs: PERIOD,
    maxRunning: rnd() < 0.25 ? int(3, 8) : 0,
    ...(pureFair ? { fair: true } : { fair: rnd() < 0.5, ordered: rnd() < 0.5, groupMaxRunning: int(0, 3), groupRateLimit: int(0, 3) }),
  };
  await store.updateQueueConfig(Q, { config, fields: [...QUEUE_CONFIG_FIELDS] });
  const groupKeys = Array.from({ length: int(1, 6) }, (_, i) => `g${i}`);
  const keys = rnd() < 0.5 ? [...groupKeys, ""] : groupKeys;
  const label = `seed ${seed}, config ${JSON.stringify(config)}, groups ${JSON.stringify(keys)}`;

  const start = clock.now();
  /** What the walk did, for the message of a failed check. */
  const trace: string[] = [];
  const recent = () => `; the steps before: ${trace.slice(-8).join(" | ")}`;
  const name = (id: string) => {
    const j = jobs.get(id)!;
    return `${j.groupKey || "-"}#${[...jobs.keys()].sort().indexOf(id)}`;
  };
  /** Every job of the queue as the store's latest answer about it says. */
  const jobs = new Map<string, Job>();
  const keep = (j: Job) => void jobs.set(j.id, j);
  const tokens = new Map<string, string>();
  const leaseTimes = new Map<string, number[]>(keys.map((k) => [k, []]));
  const claims: Array<{ eligible: Set<string>; served: Set<string> }> = [];
  const servedAt = new Map<string, number[]>(keys.map((k) => [k, []]));
  /** claims.length at the latest step after which the group had no open job. */
  const lastEmpty = new Map<string, number>();
  const windowCount = (g: string, now: number) => leaseTimes.get(g)!.filter((t) => t > now - PERIOD).length;
  const ofGroup = (all: Iterable<Job>, g: string) => [...all].filter((j) => j.groupKey === g);

  /** The rules that hold between steps, on the jobs as the store answered them. */
  const check = (where: string) => {
    const all = [...jobs.values()];
    for (const g of keys) {
      const open = ofGroup(all, g).filter(isOpen);
      if (open.length === 0) lastEmpty.set(g, claims.length);
      const running = open.filter((j) => j.state === "running");
      if (g === "") continue;
      if (config.groupMaxRunning > 0) expect(running.length, `${where}: running in ${g}`).toBeLessThanOrEqual(config.groupMaxRunning);
      if (config.ordered) {
        expect(running.length, `${where}: running in ordered ${g}`).toBeLessThanOrEqual(1);
        if (running.length === 1) expect(running[0].id, `${where}: ordered ${g} runs its head`).toBe(lowestId(open)!.id);
      }
    }
    if (config.maxRunning > 0) {
      expect(all.filter((j) => j.state === "running").length, `${where}: queue running`).toBeLessThanOrEqual(config.maxRunning);
    }
  };
  /** The store's own listing agrees with what its calls answered, and every RUNNING job is one this walk holds the lease of. */
  const reconcile = async (where: string) => {
    const listed = await store.listJobs({ queue: Q, limit: 10_000 });
    expect(listed.length, where).toBe(jobs.size);
    for (const j of listed) expect(j, `${where}: ${j.id}`).toEqual(jobs.get(j.id));
    const running = listed.filter((j) => j.state === "running");
    expect(running.map((j) => j.id).sort(), `${where}: leases`).toEqual([...tokens.keys()].sort());
  };

  const doClaim = async (where: string) => {
    const now = clock.now();
    const before = new Map(jobs);
    const eligible = [...before.values()].filter((j) => isPending(j) && j.scheduleTime <= now);
    const eligibleGroups = new Set(eligible.map((j) => j.groupKey));
    const maxJobs = int(1, 5);
    const out = await claim(store, maxJobs);
    const leased = out.leases.map((l) => l.job);
    const c2 = claims.length;
    for (const l of out.leases) {
      jobs.set(l.job.id, l.job);
      tokens.set(l.job.id, l.leaseToken);
      leaseTimes.get(l.job.groupKey)!.push(now);
    }
    const at = `${where} (claim ${c2} of ${maxJobs} at +${now - start} ms, got ${leased.map((j) => name(j.id)).join(",")})${recent()}`;
    trace.push(`claim ${maxJobs} at +${now - start}: ${leased.map((j) => name(j.id)).join(",")} held ${JSON.stringify(out.heldBack)}`);
    expect(leased.length, at).toBeLessThanOrEqual(maxJobs);
    expect(new Set(leased.map((j) => j.id)).size, at).toBe(leased.length);
    for (const j of leased)
      expect(
        eligible.some((e) => e.id === j.id),
        `${at}: leased ${j.id} was eligible`,
      ).toBe(true);

    const served = new Set(leased.map((j) => j.groupKey));
    for (const g of served) {
      const mine = leased.filter((j) => j.groupKey === g);
      if (config.ordered && g !== "") {
        const open = ofGroup(before.values(), g).filter(isOpen);
        expect(
          mine.map((j) => j.id),
          `${at}: ordered ${g} leases its head alone`,
        ).toEqual([lowestId(open)!.id]);
      } else {
        const inOrder = ofGroup(eligible, g).sort(claimOrder).slice(0, mine.length);
        expect(
          mine.map((j) => j.id),
          `${at}: ${g} in claim order`,
        ).toEqual(inOrder.map((j) => j.id));
      }
      if (config.groupRateLimit > 0 && g !== "") {
        expect(windowCount(g, now), `${at}: leases of ${g} in the window`).toBeLessThanOrEqual(config.groupRateLimit);
      }
    }

    // A short claim left nothing that every rule allowed.
    if (leased.length < maxJobs) {
      const after = [...before.values()].map((j) => (leased.some((l) => l.id === j.id) ? { ...j, state: "running" as const } : j));
      const queueRunning = after.filter((j) => j.state === "running").length;
      if (config.maxRunning === 0 || queueRunning < config.maxRunning) {
        const allowed = (j: Job) => {
          const g = j.groupKey;
          if (g === "") return true;
          const group = ofGroup(after, g);
          if (config.groupMaxRunning > 0 && group.filter((x) => x.state === "running").length >= config.groupMaxRunning) return false;
          if (config.groupRateLimit > 0 && windowCount(g, now) >= config.groupRateLimit) return false;
          if (config.ordered && lowestId(group.filter(isOpen))!.id !== j.id) return false;
          return true;
        };
        const left = eligible.filter((j) => !leased.some((l) => l.id === j.id) && allowed(j));
        expect(
          left.map((j) => `${name(j.id)} ${j.state}`),
          `${at}: allowed jobs left behind (heldBack ${JSON.stringify(out.heldBack)})`,
        ).toEqual([]);
      }
    }
    if (out.heldBack !== null && "onFinish" in out.heldBack)
      expect(leased.length, `${at}: a group hold on a full claim`).toBeLessThan(maxJobs);
    if (out.heldBack?.limit === "max_running") {
      expect(config.maxRunning, at).toBeGreaterThan(0);
      expect([...before.values()].filter((j) => j.state === "running").length + leased.length, at).toBe(config.maxRunning);
    }

    if (pureFair) {
      for (const g of served) {
        for (const c1 of servedAt.get(g)!) {
          // G had no open job after c1: it came back as never served, and may go first.
          if ((lastEmpty.get(g) ?? -1) > c1) continue;
          for (const x of eligibleGroups) {
            if (x === g || !claims[c1].eligible.has(x)) continue;
            const xServed = served.has(x) || servedAt.get(x)!.some((c) => c >= c1);
            expect(
              xServed,
              `${at}: ${x || "-"} was eligible at claims ${c1} and ${c2}, where ${g || "-"} was served, and never in between`,
            ).toBe(true);
          }
        }
      }
    }
    claims.push({ eligible: eligibleGroups, served });
    for (const g of served) servedAt.get(g)!.push(c2);
  };

  for (let step = 0; step < steps; step++) {
    const where = `${label}, step ${step}`;
    const r = rnd();
    if (r < 0.28) {
      const n = int(1, 3);
      const submitted = await store.submit(
        Array.from({ length: n }, () =>
          newJob({
            groupKey: pick(keys),
            priority: int(0, 2),
            schedule: rnd() < 0.2 ? { delayMs: int(1, 6) * SECOND } : null,
          }),
        ),
      );
      for (const o of submitted) keep(o.job);
      trace.push(`submit ${submitted.map((o) => `${name(o.job.id)} p${o.job.priority} at +${o.job.scheduleTime - start}`).join(",")}`);
    } else if (r < 0.58) {
      await doClaim(where);
    } else if (r < 0.8) {
      if (tokens.size > 0) {
        const id = pick([...tokens.keys()].sort());
        const token = tokens.get(id)!;
        tokens.delete(id);
        const action = rnd();
        const what =
          action < 0.3 ? "complete" : action < 0.5 ? "fail" : action < 0.6 ? "fail permanently" : action < 0.8 ? "snooze" : "release";
        if (action < 0.3) keep(await store.complete(id, token, null));
        else if (action < 0.5) {
          const delay = rnd() < 0.5 ? { retryDelayMs: int(0, 8) * SECOND } : {};
          keep(await store.fail(id, token, { error: "later", permanent: false, ...delay }));
        } else if (action < 0.6) keep(await store.fail(id, token, { error: "broken", permanent: true }));
        else if (action < 0.8) keep(await store.snooze(id, token, int(0, 6) * SECOND));
        else keep(await store.release(id, token));
        trace.push(`${what} ${name(id)}: ${jobs.get(id)!.state} at +${jobs.get(id)!.scheduleTime - start}`);
      }
    } else if (r < 0.86) {
      const pending = [...jobs.values()]
        .filter(isPending)
        .map((j) => j.id)
        .sort();
      if (pending.length > 0) {
        const id = pick(pending);
        trace.push(`cancel ${name(id)} (${jobs.get(id)!.state})`);
        keep(await store.cancel(id, "not needed"));
      }
    } else {
      const ms = int(1, 4000);
      clock.advance(ms);
      trace.push(`advance ${ms}`);
    }
    check(where);
    if (step % 25 === 24) await reconcile(where);
  }
  await reconcile(`${label}, at the end`);
  // The walk claimed, and something was leased.
  expect(claims.length, label).toBeGreaterThan(50);
  expect(
    [...servedAt.values()].some((cs) => cs.length > 0),
    label,
  ).toBe(true);
}
