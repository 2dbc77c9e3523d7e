/**
 * Dependencies (docs/api.md "Workflows"): a job WAITING until its
 * dependencies are COMPLETED, released in the transaction of the last one's
 * change, the failure policies applied transitively, graphs in one batch,
 * the results a lease carries, the listings, retention, and a release made
 * exactly once by two instances completing the last two dependencies at once.
 */
import { describe, expect, it } from "vitest";
import type { DependencyPolicy } from "../../../src/domain/job.js";
import type { NewJobDependencies } from "../../../src/domain/submission.js";
import { claimLeases } from "../../helpers/store.js";
import { claimOne, clock, DAY, harness, kinds, MINUTE, newJob, recordAnnouncements, refusal, store, submitOne } from "./helpers.js";

/** NewJob.dependencies as validation makes them. */
function deps(ids: string[], policy: DependencyPolicy = "wait", refIndexes: number[] = []): NewJobDependencies {
  return { ids, refs: refIndexes.map((k) => `r${k}`), refIndexes, policy, path: "" };
}

/** Claims `jobId` (alone in its queue) and completes it with `result`. */
async function run(jobId: string, queue: string, result: string | null = null) {
  const [lease] = await claimLeases(store, { queue, workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
  expect(lease.job.id).toBe(jobId);
  return store.complete(jobId, lease.leaseToken, result);
}

/** Claims `jobId` (alone in its queue) and fails it for good. */
async function kill(jobId: string, queue: string) {
  const [lease] = await claimLeases(store, { queue, workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
  expect(lease.job.id).toBe(jobId);
  return store.fail(jobId, lease.leaseToken, { error: "boom", permanent: true });
}

export function describeDependencies(): void {
  describe("dependencies", () => {
    it("keeps a job WAITING until its dependency completes, then releases it in the same commit as the completion", async () => {
      const render = await submitOne({ queue: "render" });
      const merge = await submitOne({ queue: "merge", dependencies: deps([render.id]) });
      expect(merge).toMatchObject({ state: "waiting", dependsOn: [render.id], dependencyCounts: { total: 1, completed: 0, failed: 0 } });
      expect(await kinds(merge.id)).toEqual(["submitted:->waiting"]);
      expect(await claimLeases(store, { queue: "merge", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 })).toEqual([]);
      expect((await store.queueCounts()).find((q) => q.queue === "merge")!.counts.waiting).toBe(1);

      const announced = recordAnnouncements(store);
      await run(render.id, "render", '{"pages":3}');
      const commit = announced.changes.find((c) => c.events.some((e) => e.kind === "completed"))!;
      expect(commit.events.map((e) => `${e.kind}:${e.jobId === merge.id ? "merge" : "render"}`)).toEqual([
        "completed:render",
        "dependencies_met:merge",
      ]);
      announced.off();
      expect(await store.getJob(merge.id)).toMatchObject({ state: "queued", dependencyCounts: { total: 1, completed: 1, failed: 0 } });
      expect(await kinds(merge.id)).toEqual(["submitted:->waiting", "dependencies_met:waiting>queued"]);

      const [lease] = await claimLeases(store, { queue: "merge", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
      expect(lease.dependencies).toEqual([{ jobId: render.id, state: "completed", resultJson: '{"pages":3}', lastError: null }]);
    });

    it("queues a job whose dependencies are already COMPLETED at once, with no DEPENDENCIES_MET", async () => {
      const first = await submitOne({ queue: "a" });
      await run(first.id, "a");
      const next = await submitOne({ queue: "b", dependencies: deps([first.id]) });
      expect(next).toMatchObject({ state: "queued", dependencyCounts: { total: 1, completed: 1, failed: 0 } });
      expect(await kinds(next.id)).toEqual(["submitted:->queued"]);
    });

    it("refuses an unknown dependency with JOB_NOT_FOUND naming its field, creating nothing of the batch", async () => {
      const known = await submitOne({ queue: "a" });
      const unknown = "01935c3e-0000-7000-8000-000000000000";
      const err = await refusal(
        store.submit([newJob({ queue: "b" }), newJob({ queue: "b", dependencies: { ...deps([known.id, unknown]), path: "jobs[1]." } })]),
      );
      expect(err.reason).toBe("JOB_NOT_FOUND");
      expect(err.message).toBe(`jobs[1].depends_on[1]: job ${unknown} does not exist`);
      expect((await store.queueCounts()).find((q) => q.queue === "b")).toBeUndefined();
      expect(await store.listJobs({ dependentsOf: known.id, limit: 10 })).toEqual([]);
    });

    it("WAIT: a DEAD dependency keeps the job WAITING, counted as failed; a redrive lets the flow go on", async () => {
      const dep = await submitOne({ queue: "a", maxAttempts: 1 });
      const waiting = await submitOne({ queue: "b", dependencies: deps([dep.id]) });
      await kill(dep.id, "a");
      expect(await store.getJob(waiting.id)).toMatchObject({ state: "waiting", dependencyCounts: { total: 1, completed: 0, failed: 1 } });
      await store.redrive(dep.id);
      expect((await store.getJob(waiting.id))!.dependencyCounts).toEqual({ total: 1, completed: 0, failed: 0 });
      await run(dep.id, "a");
      expect((await store.getJob(waiting.id))!.state).toBe("queued");
    });

    it("CANCEL: a DEAD dependency cancels the job, and the cancellation goes on to its own dependents by their policies", async () => {
      const dep = await submitOne({ queue: "a", maxAttempts: 1 });
      const cancelPolicy = await submitOne({ queue: "b", dependencies: deps([dep.id], "cancel") });
      const waitOnIt = await submitOne({ queue: "c", dependencies: deps([cancelPolicy.id], "wait") });
      const ignoreIt = await submitOne({ queue: "d", dependencies: deps([cancelPolicy.id], "ignore") });
      await kill(dep.id, "a");
      expect((await store.listJobEvents(cancelPolicy.id)).at(-1)).toMatchObject({
        kind: "cancelled",
        fromState: "waiting",
        message: `dependency ${dep.id} is dead`,
      });
      expect((await store.listJobEvents(waitOnIt.id)).at(-1)).toMatchObject({
        kind: "cancelled",
        message: `dependency ${cancelPolicy.id} is cancelled`,
      });
      expect(await kinds(ignoreIt.id)).toEqual(["submitted:->waiting", "dependencies_met:waiting>queued"]);
      expect(await store.getJob(ignoreIt.id)).toMatchObject({ dependencyCounts: { total: 1, completed: 0, failed: 1 } });
    });

    it("IGNORE: runs once every dependency finished, the lease showing which failed and why", async () => {
      const ok = await submitOne({ queue: "a" });
      const bad = await submitOne({ queue: "a2", maxAttempts: 1 });
      const job = await submitOne({ queue: "b", dependencies: deps([bad.id, ok.id], "ignore") });
      await kill(bad.id, "a2");
      expect((await store.getJob(job.id))!.state).toBe("waiting");
      await run(ok.id, "a", "1");
      const [lease] = await claimLeases(store, { queue: "b", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
      expect(lease.dependencies).toEqual([
        { jobId: bad.id, state: "dead", resultJson: null, lastError: "boom" },
        { jobId: ok.id, state: "completed", resultJson: "1", lastError: null },
      ]);
    });

    it("cancels at submit a job whose WAIT dependency is already CANCELLED, with its dependents of the same batch", async () => {
      const dep = await submitOne({ queue: "a" });
      await store.cancel(dep.id, "no");
      const outcomes = await store.submit([
        newJob({ queue: "b", dependencies: deps([dep.id]) }),
        newJob({ queue: "b", dependencies: deps([], "wait", [0]) }),
      ]);
      expect(outcomes.map((o) => o.job.state)).toEqual(["cancelled", "cancelled"]);
      expect(await kinds(outcomes[0].job.id)).toEqual(["submitted:->waiting", "cancelled:waiting>cancelled"]);
    });

    it("resolves a graph of one batch, refs before and after, and runs it in order", async () => {
      // 0 merge <- 1 page, 2 page; 3 notify <- 0 merge
      const outcomes = await store.submit([
        newJob({ queue: "merge", dependencies: deps([], "wait", [1, 2]) }),
        newJob({ queue: "page" }),
        newJob({ queue: "page" }),
        newJob({ queue: "notify", dependencies: deps([], "wait", [0]) }),
      ]);
      const [merge, p1, p2, notify] = outcomes.map((o) => o.job);
      expect(merge).toMatchObject({ state: "waiting", dependsOn: [p1.id, p2.id] });
      expect(notify).toMatchObject({ state: "waiting", dependsOn: [merge.id] });
      const pages = await claimLeases(store, { queue: "page", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 2 });
      await store.complete(pages[0].job.id, pages[0].leaseToken, null);
      expect((await store.getJob(merge.id))!.state).toBe("waiting");
      await store.complete(pages[1].job.id, pages[1].leaseToken, null);
      expect((await store.getJob(merge.id))!.state).toBe("queued");
      await run(merge.id, "merge");
      expect((await store.getJob(notify.id))!.state).toBe("queued");
    });

    it("releases nothing twice: a repeated completion is refused by its lease and counts nothing", async () => {
      const dep = await submitOne({ queue: "a" });
      const job = await submitOne({ queue: "b", dependencies: deps([dep.id]) });
      const lease = await claimOne("a");
      await store.complete(dep.id, lease.leaseToken, null);
      expect((await refusal(store.complete(dep.id, lease.leaseToken, null))).reason).toBe("LEASE_REJECTED");
      expect((await store.getJob(job.id))!.dependencyCounts).toEqual({ total: 1, completed: 1, failed: 0 });
      expect((await kinds(job.id)).filter((k) => k.startsWith("dependencies_met"))).toHaveLength(1);
    });

    it("cancels a WAITING job on a plain Cancel, and a running dependency's cancellation reaches its dependents", async () => {
      const dep = await submitOne({ queue: "a" });
      const waiting = await submitOne({ queue: "b", dependencies: deps([dep.id]) });
      const other = await submitOne({ queue: "c", dependencies: deps([dep.id]) });
      expect(await store.cancel(waiting.id, "not needed")).toMatchObject({ state: "cancelled" });
      const lease = await claimOne("a");
      await store.cancel(lease.job.id, "stop", true);
      expect((await store.listJobEvents(other.id)).at(-1)).toMatchObject({
        kind: "cancelled",
        message: `dependency ${dep.id} is cancelled`,
      });
    });

    it("releases 300 dependents of one job in the commit of its completion, and a job waiting on 300 when the last completes", async () => {
      const root = await submitOne({ queue: "root" });
      const fanOut = await store.submit(Array.from({ length: 300 }, () => newJob({ queue: "out", dependencies: deps([root.id]) })));
      await run(root.id, "root");
      expect((await store.queueCounts()).find((q) => q.queue === "out")!.counts).toMatchObject({ queued: 300, waiting: 0 });
      const fanIn = await store.submit([newJob({ queue: "in", dependencies: deps(fanOut.map((o) => o.job.id)) })]);
      expect(fanIn[0].job.dependencyCounts).toEqual({ total: 300, completed: 0, failed: 0 });
      for (let done = 0; done < 300; done += 100) {
        const leases = await claimLeases(store, { queue: "out", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 100 });
        await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
      }
      expect(await store.getJob(fanIn[0].job.id)).toMatchObject({
        state: "queued",
        dependencyCounts: { total: 300, completed: 300, failed: 0 },
      });
      const [lease] = await claimLeases(store, { queue: "in", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
      expect(lease.dependencies).toHaveLength(100);
      expect(lease.dependencies!.map((d) => d.jobId)).toEqual(fanOut.slice(0, 100).map((o) => o.job.id));
    });

    it("lets a running job's handler submit a job that depends on it: a workflow that grows", async () => {
      await submitOne({ queue: "grow" });
      const lease = await claimOne("grow");
      const child = await submitOne({ queue: "grow-next", dependencies: deps([lease.job.id]) });
      expect(child.state).toBe("waiting");
      await store.complete(lease.job.id, lease.leaseToken, '"parent done"');
      const [next] = await claimLeases(store, { queue: "grow-next", workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
      expect(next.dependencies).toEqual([{ jobId: lease.job.id, state: "completed", resultJson: '"parent done"', lastError: null }]);
    });

    it("lists a job's dependencies and its dependents", async () => {
      const a = await submitOne({ queue: "a" });
      const b = await submitOne({ queue: "a" });
      const c = await submitOne({ queue: "c", dependencies: deps([a.id, b.id]) });
      const d = await submitOne({ queue: "d", dependencies: deps([a.id]) });
      const ids = (jobs: Array<{ id: string }>) => jobs.map((j) => j.id);
      expect(ids(await store.listJobs({ dependenciesOf: c.id, limit: 10 }))).toEqual([b.id, a.id]);
      expect(ids(await store.listJobs({ dependentsOf: a.id, limit: 10 }))).toEqual([d.id, c.id]);
      expect(ids(await store.listJobs({ dependentsOf: a.id, queue: "c", limit: 10 }))).toEqual([c.id]);
      expect(ids(await store.listJobs({ dependentsOf: a.id, states: ["waiting"], limit: 1 }))).toEqual([d.id]);
    });

    it("never prunes a finished job that a job still waits on; prunes it once none does", async () => {
      const early = await submitOne({ queue: "a" });
      const late = await submitOne({ queue: "a2" });
      const job = await submitOne({ queue: "b", dependencies: deps([early.id, late.id]) });
      await run(early.id, "a", '"kept"');
      clock.advance(DAY);
      const first = await store.pruneJobs({ finishedBefore: { completed: clock.now() }, limit: 100 });
      expect(first.pruned).toEqual([]);
      await run(late.id, "a2");
      await run(job.id, "b");
      clock.advance(DAY);
      const second = await store.pruneJobs({ finishedBefore: { completed: clock.now() }, limit: 100 });
      expect(second.pruned.reduce((n, p) => n + p.jobs, 0)).toBe(3);
    });

    it("compares dependencies for an idempotency key", async () => {
      const dep = await submitOne({ queue: "a" });
      const [first] = await store.submit([newJob({ queue: "b", idempotencyKey: "k", dependencies: deps([dep.id]) })]);
      const [again] = await store.submit([newJob({ queue: "b", idempotencyKey: "k", dependencies: deps([dep.id]) })]);
      expect(again).toMatchObject({ deduplicated: true, job: { id: first.job.id } });
      expect((await refusal(store.submit([newJob({ queue: "b", idempotencyKey: "k" })]))).reason).toBe("IDEMPOTENCY_MISMATCH");
    });

    it("releases a job exactly once when two instances complete its last two dependencies at the same moment", async () => {
      const other = await harness.openInstance();
      for (let round = 0; round < 5; round++) {
        const [a, b] = (await store.submit([newJob({ queue: `x${round}` }), newJob({ queue: `y${round}` })])).map((o) => o.job);
        const job = await submitOne({ queue: `z${round}`, dependencies: deps([a.id, b.id]) });
        const [la] = await claimLeases(store, { queue: `x${round}`, workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
        const [lb] = await claimLeases(other, { queue: `y${round}`, workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
        await Promise.all([store.complete(a.id, la.leaseToken, null), other.complete(b.id, lb.leaseToken, null)]);
        expect(await store.getJob(job.id)).toMatchObject({ state: "queued", dependencyCounts: { total: 2, completed: 2, failed: 0 } });
        expect((await kinds(job.id)).filter((k) => k.startsWith("dependencies_met"))).toHaveLength(1);
      }
    });
  });
}

/** A small seeded PRNG (mulberry32), so that a failing graph can be run again. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type ModelState = "queued" | "running" | "completed" | "dead" | "cancelled" | "waiting";
interface ModelJob {
  id: string;
  queue: string;
  state: ModelState;
  deps: string[];
  policy: DependencyPolicy;
  dependents: string[];
}

/**
 * The rules of docs/api.md "Dependencies", written again from the docs
 * alone: what each job's state and counts must be after each step.
 */
class Model {
  readonly jobs = new Map<string, ModelJob>();

  counts(job: ModelJob) {
    const states = job.deps.map((d) => this.jobs.get(d)!.state);
    return {
      total: job.deps.length,
      completed: states.filter((s) => s === "completed").length,
      failed: states.filter((s) => s === "dead" || s === "cancelled").length,
    };
  }

  /** Whether a dependency now in `state` cancels a waiting job of `policy`. */
  static cancels(policy: DependencyPolicy, state: ModelState): boolean {
    return policy === "cancel" ? state === "dead" || state === "cancelled" : policy === "wait" && state === "cancelled";
  }

  met(job: ModelJob): boolean {
    const c = this.counts(job);
    return job.policy === "ignore" ? c.completed + c.failed === c.total : c.completed === c.total;
  }

  submit(id: string, queue: string, deps: string[], policy: DependencyPolicy): void {
    const job: ModelJob = { id, queue, state: "waiting", deps, policy, dependents: [] };
    this.jobs.set(id, job);
    for (const d of deps) this.jobs.get(d)!.dependents.push(id);
    if (deps.some((d) => Model.cancels(policy, this.jobs.get(d)!.state))) this.set(id, "cancelled");
    else if (this.met(job)) job.state = "queued";
  }

  /** A job's change, and what it does to the jobs waiting on it. */
  set(id: string, state: ModelState): void {
    const job = this.jobs.get(id)!;
    job.state = state;
    for (const dId of job.dependents) {
      const dependent = this.jobs.get(dId)!;
      if (dependent.state !== "waiting") continue;
      if (Model.cancels(dependent.policy, state)) this.set(dId, "cancelled");
      else if (this.met(dependent)) dependent.state = "queued";
    }
  }
}

export function describeDependencyModel(): void {
  describe("dependencies against a model", () => {
    it.each([1, 2, 3, 4])(
      "agrees with the rules over a random graph of submissions, completions, failures, redrives and cancellations (seed %i)",
      async (seed) => {
        const next = random(seed);
        const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];
        const model = new Model();
        const policies: DependencyPolicy[] = ["wait", "cancel", "ignore"];
        let n = 0;
        for (let step = 0; step < 60; step++) {
          const all = [...model.jobs.values()];
          const inState = (...states: ModelState[]) => all.filter((j) => states.includes(j.state));
          const roll = next();
          if (roll < 0.35 || all.length < 3) {
            // A submission: up to 3 dependencies among the jobs so far, sometimes a second job of the batch naming the first by ref.
            const ids = [
              ...new Set(Array.from({ length: Math.floor(next() * 4) }, () => pick(all)?.id).filter((x) => x !== undefined)),
            ] as string[];
            const policy = pick(policies);
            const withRef = next() < 0.3;
            const queues = [`m${n++}`, `m${n++}`];
            const specs = [
              newJob({ queue: queues[0], maxAttempts: 1, ...(ids.length > 0 ? { dependencies: deps(ids, policy) } : {}) }),
              ...(withRef ? [newJob({ queue: queues[1], maxAttempts: 1, dependencies: deps([], policy, [0]) })] : []),
            ];
            const outcomes = await store.submit(specs);
            model.submit(outcomes[0].job.id, queues[0], ids, policy);
            if (withRef) model.submit(outcomes[1].job.id, queues[1], [outcomes[0].job.id], policy);
          } else if (roll < 0.6 && inState("queued").length > 0) {
            const job = pick(inState("queued"));
            const [lease] = await claimLeases(store, { queue: job.queue, workerId: "w", leaseDurationMs: MINUTE, maxJobs: 1 });
            await store.complete(job.id, lease.leaseToken, `"${job.id}"`);
            model.set(job.id, "completed");
          } else if (roll < 0.75 && inState("queued").length > 0) {
            const job = pick(inState("queued"));
            await kill(job.id, job.queue);
            model.set(job.id, "dead");
          } else if (roll < 0.85 && inState("dead").length > 0) {
            const job = pick(inState("dead"));
            await store.redrive(job.id);
            model.set(job.id, "queued");
          } else if (inState("queued", "waiting").length > 0) {
            const job = pick(inState("queued", "waiting"));
            await store.cancel(job.id, "model");
            model.set(job.id, "cancelled");
          }
          const stored = await store.listJobs({ limit: 500 });
          const actual = Object.fromEntries(stored.map((j) => [j.id, { state: j.state, counts: j.dependencyCounts }]));
          const expected = Object.fromEntries(
            [...model.jobs.values()].map((j) => [j.id, { state: j.state, counts: j.deps.length === 0 ? null : model.counts(j) }]),
          );
          expect(actual, `seed ${seed}, step ${step}`).toEqual(expected);
        }
      },
    );
  });
}
