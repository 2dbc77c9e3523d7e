/**
 * kill -9 under load: whatever the server acknowledged before it died is in
 * the database after a restart on the same file
 * (docs/api.md "Commits before answers": every state change and its event
 * commit in one transaction before the response is sent).
 *
 * SIGKILL loses the process, not the OS page cache, so this checks that no
 * response goes out before its COMMIT and that the file recovers (WAL replay,
 * counts consistent with rows); it does not simulate power loss.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseQueueService, WorkRequestSchema, type WorkRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { callJson, listAllJobs, okJson, serversInTempDirs } from "../helpers/process.js";

const LOOPS = 8;

const sandbox = serversInTempDirs("crash");
const start = sandbox.start;

/** Runs `body` in parallel on `n` loops until it returns false or throws; resolves with the errors that ended each loop. */
async function loops(n: number, body: (loop: number, i: number) => Promise<boolean>): Promise<unknown[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, loop) => {
      for (let i = 0; ; i++) {
        try {
          if (!(await body(loop, i))) return undefined;
        } catch (err) {
          return err;
        }
      }
    }),
  );
}

/** GetStats total as plain numbers. */
async function totals(apiUrl: string): Promise<Record<string, number>> {
  const { total } = await okJson(apiUrl, "GetStats", {});
  const n = (v: unknown) => Number(v ?? 0);
  return {
    queued: n(total.queued),
    running: n(total.running),
    retry: n(total.retry),
    completed: n(total.completed),
    dead: n(total.dead),
    cancelled: n(total.cancelled),
    waiting: n(total.waiting),
  };
}

function sum(counts: Record<string, number>): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** Every loop must have ended on a connection error (fetch's "fetch failed"), none on a wrong answer. */
function endedOnConnectionErrors(ended: unknown[]): void {
  for (const err of ended) {
    if (err instanceof TypeError && err.message === "fetch failed") continue;
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows, as is, what the loop failed with
    throw err ?? new Error("a loop ended before the server was killed");
  }
}

function integrityCheck(dbPath: string): void {
  const db = new Database(dbPath, { readonly: true });
  try {
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
  } finally {
    db.close();
  }
}

describe("SIGKILL while calls are in flight", () => {
  it("keeps every acknowledged submit, with its event, its idempotency key and consistent counts", async () => {
    const dbPath = join(sandbox.dir(), "jobs.db");
    const first = await start(dbPath);
    const KILL_AFTER_ACKS = 400;
    const MAX_PER_LOOP = 250; // bound if the kill never happened

    const acked = new Map<string, string>(); // idempotency key -> job id
    const attempted = new Set<string>(); // every key sent, acknowledged or not
    let killedAt: number | undefined;
    const request = (key: string) => ({
      queue: "crash",
      task: "crash.submit",
      payload: { key, n: key.length },
      idempotencyKey: key,
    });

    const ended = await loops(LOOPS, async (loop, i) => {
      if (i >= MAX_PER_LOOP) return false;
      const key = `crash-${loop}-${i}`;
      attempted.add(key);
      const reply = await callJson(first.apiUrl, "Submit", request(key));
      // A reply that reaches us after the kill was still sent by the server,
      // hence after its commit: it counts as acknowledged too.
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      expect(reply.body.deduplicated ?? false).toBe(false);
      acked.set(key, reply.body.job.id);
      if (killedAt === undefined && acked.size >= KILL_AFTER_ACKS) {
        killedAt = acked.size;
        first.child.kill("SIGKILL");
      }
      return true;
    });
    expect(killedAt, "the server was killed mid-load").toBe(KILL_AFTER_ACKS);
    const exit = await first.exited;
    expect(exit.signal).toBe("SIGKILL");
    endedOnConnectionErrors(ended);
    // Each loop's last request got no reply: sent, but cut off by the kill.
    expect(attempted.size).toBe(acked.size + LOOPS);

    const second = await start(dbPath);
    const ids = [...acked.values()];
    expect(new Set(ids).size).toBe(ids.length);

    // Every acknowledged job exists, as submitted, with its SUBMITTED event.
    await Promise.all(
      [...acked].map(async ([key, id]) => {
        const { job } = await okJson(second.apiUrl, "GetJob", { jobId: id });
        expect(job).toMatchObject({ id, queue: "crash", state: "JOB_STATE_QUEUED", payload: { key } });
        const { events } = await okJson(second.apiUrl, "ListJobEvents", { jobId: id });
        expect(events.map((e: any) => e.kind)).toEqual(["EVENT_KIND_SUBMITTED"]);
      }),
    );

    // The stored jobs are the acknowledged ones plus, at most, those whose
    // reply was lost in the crash; the counts agree with the rows.
    const stored = await listAllJobs(second.apiUrl);
    const storedIds = new Set(stored.map((j) => j.id));
    expect(storedIds.size).toBe(stored.length);
    for (const id of ids) expect(storedIds.has(id)).toBe(true);
    const unacknowledged = stored.filter((j) => !acked.has(j.payload.key));
    expect(unacknowledged.length).toBeLessThanOrEqual(attempted.size - acked.size);
    for (const j of unacknowledged) expect(attempted.has(j.payload.key)).toBe(true);
    const counts = await totals(second.apiUrl);
    expect(counts).toEqual({ queued: stored.length, running: 0, retry: 0, completed: 0, dead: 0, cancelled: 0, waiting: 0 });
    const { queues } = await okJson(second.apiUrl, "GetStats", {});
    expect(queues.map((q: any) => [q.queue, Number(q.queued)])).toEqual([["crash", stored.length]]);

    // Every acknowledged key is still reserved for its job.
    await Promise.all(
      [...acked].map(async ([key, id]) => {
        const body = await okJson(second.apiUrl, "Submit", request(key));
        expect(body.deduplicated).toBe(true);
        expect(body.job.id).toBe(id);
      }),
    );
    expect(sum(await totals(second.apiUrl))).toBe(stored.length);

    expect(await second.stop()).toEqual({ code: 0, signal: null });
    integrityCheck(dbPath);
  }, 60_000);

  it("keeps a dependency's completion and its dependents' release together: no dependent waits on a completed job after the restart", async () => {
    const dbPath = join(sandbox.dir(), "jobs.db");
    const first = await start(dbPath);
    const PAIRS = 300;
    const KILL_AFTER_COMPLETES = 100;
    // Each pair: a job in "deps" and a job in "after" that depends on it (refs in one batch).
    const batches = await Promise.all(
      Array.from({ length: PAIRS / 100 }, (_, b) =>
        okJson(first.apiUrl, "SubmitBatch", {
          jobs: Array.from({ length: 100 }, (_, i) => [
            { queue: "deps", task: "crash.dep", payload: { i: b * 100 + i }, ref: `d${i}` },
            { queue: "after", task: "crash.after", payload: { i: b * 100 + i }, dependsOnRefs: [`d${i}`] },
          ]).flat(),
        }),
      ),
    );
    const dependentOf = new Map<string, string>();
    for (const { results } of batches)
      for (let i = 0; i < results.length; i += 2) dependentOf.set(results[i].job.id, results[i + 1].job.id);

    const completed = new Set<string>();
    let killed = false;
    const ended = await loops(LOOPS, async (loop) => {
      const { leases } = (await okJson(first.apiUrl, "Claim", { queue: "deps", workerId: `w${loop}`, maxJobs: 5 })) as { leases?: any[] };
      if (leases === undefined) return !killed;
      await Promise.all(
        leases.map(async (l) => {
          await okJson(first.apiUrl, "Complete", { jobId: l.job.id, leaseToken: l.leaseToken });
          completed.add(l.job.id);
          if (!killed && completed.size >= KILL_AFTER_COMPLETES) {
            killed = true;
            first.child.kill("SIGKILL");
          }
        }),
      );
      return true;
    });
    expect(killed, "the server was killed mid-load").toBe(true);
    expect((await first.exited).signal).toBe("SIGKILL");
    endedOnConnectionErrors(ended);

    const second = await start(dbPath);
    const jobs = new Map((await listAllJobs(second.apiUrl)).map((j) => [j.id, j]));
    for (const [dep, dependent] of dependentOf) {
      const depState = jobs.get(dep).state;
      const dependentState = jobs.get(dependent).state;
      // Both changed in one transaction, or neither did.
      expect([dep, depState, dependentState]).toEqual([
        dep,
        depState,
        depState === "JOB_STATE_COMPLETED" ? "JOB_STATE_QUEUED" : "JOB_STATE_WAITING",
      ]);
      if (completed.has(dep)) expect(depState).toBe("JOB_STATE_COMPLETED");
    }
    expect(await second.stop()).toEqual({ code: 0, signal: null });
    integrityCheck(dbPath);
  }, 60_000);

  it("keeps acknowledged completes completed and never leases a job to two workers", async () => {
    const dbPath = join(sandbox.dir(), "jobs.db");
    const first = await start(dbPath);
    const JOBS = 400;
    const KILL_AFTER_COMPLETES = 120;

    const submitted = await okJson(first.apiUrl, "SubmitBatch", {
      jobs: Array.from({ length: JOBS }, (_, i) => ({ queue: "work", task: "crash.work", payload: { i } })),
    });
    const allIds = new Set<string>(submitted.results.map((r: any) => r.job.id));
    expect(allIds.size).toBe(JOBS);

    const leases = new Map<string, { token: string; worker: string }>(); // job id -> lease we received
    const completed = new Set<string>(); // acknowledged completes
    let killed = false;

    const ended = await loops(LOOPS, async (loop, i) => {
      const worker = `crash-worker-${loop}`;
      const claim = await okJson(first.apiUrl, "Claim", {
        queue: "work",
        workerId: worker,
        leaseDuration: "60s",
        maxJobs: 1 + ((loop + i) % 3),
      });
      const got: any[] = claim.leases ?? [];
      if (got.length === 0) return false;
      for (const lease of got) {
        const id = lease.job.id;
        expect(leases.has(id), `job ${id} leased twice`).toBe(false);
        expect(lease.job).toMatchObject({ state: "JOB_STATE_RUNNING", workerId: worker, deliveries: 1 });
        leases.set(id, { token: lease.leaseToken, worker });
      }
      for (const lease of got) {
        const done = await okJson(first.apiUrl, "Complete", {
          jobId: lease.job.id,
          leaseToken: lease.leaseToken,
          result: { by: worker },
        });
        expect(done.job.state).toBe("JOB_STATE_COMPLETED");
        completed.add(lease.job.id);
        if (!killed && completed.size >= KILL_AFTER_COMPLETES) {
          killed = true;
          first.child.kill("SIGKILL");
        }
      }
      return true;
    });
    expect(killed, "the server was killed mid-load").toBe(true);
    await first.exited;
    endedOnConnectionErrors(ended);
    expect(completed.size).toBeGreaterThanOrEqual(KILL_AFTER_COMPLETES);
    expect(completed.size).toBeLessThan(JOBS);

    const second = await start(dbPath);
    const before = new Map((await listAllJobs(second.apiUrl, "work")).map((j) => [j.id as string, j]));
    expect(new Set(before.keys())).toEqual(allIds);

    for (const [id, job] of before) {
      // No lease expired and nothing was retried: nobody got a job twice.
      expect(job.deliveries ?? 0, id).toBeLessThanOrEqual(1);
      if (completed.has(id)) {
        expect(job.state, id).toBe("JOB_STATE_COMPLETED");
        expect(job.result).toEqual({ by: leases.get(id)!.worker });
      }
      if (job.state === "JOB_STATE_RUNNING") {
        expect(job.deliveries).toBe(1);
        // Running under the one worker that got it (if its reply reached us).
        const lease = leases.get(id);
        if (lease !== undefined) expect(job.workerId).toBe(lease.worker);
      }
      if (job.state === "JOB_STATE_QUEUED") expect(leases.has(id), id).toBe(false);
    }
    // Each job's timeline agrees: one CLAIMED at most.
    await Promise.all(
      [...before.keys()].map(async (id) => {
        const { events } = await okJson(second.apiUrl, "ListJobEvents", { jobId: id });
        const kinds: string[] = events.map((e: any) => e.kind);
        expect(kinds[0]).toBe("EVENT_KIND_SUBMITTED");
        expect(kinds.filter((k) => k === "EVENT_KIND_CLAIMED").length).toBe(before.get(id)!.deliveries ?? 0);
      }),
    );
    const counts = await totals(second.apiUrl);
    const byState = (s: string) => [...before.values()].filter((j) => j.state === s).length;
    expect(counts).toEqual({
      queued: byState("JOB_STATE_QUEUED"),
      running: byState("JOB_STATE_RUNNING"),
      retry: 0,
      completed: byState("JOB_STATE_COMPLETED"),
      dead: 0,
      cancelled: 0,
      waiting: 0,
    });
    expect(sum(counts)).toBe(JOBS);

    // Leases survive the crash: a token we got for a job that is still
    // running completes it; one whose complete committed but whose reply was
    // lost is refused, because the job is no longer running.
    const unacked = [...leases].filter(([id]) => !completed.has(id));
    for (const [id, lease] of unacked) {
      const reply = await callJson(second.apiUrl, "Complete", { jobId: id, leaseToken: lease.token });
      if (before.get(id)!.state === "JOB_STATE_RUNNING") {
        expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      } else {
        expect(before.get(id)!.state).toBe("JOB_STATE_COMPLETED");
        expect(reply.body.code).toBe("aborted");
      }
    }

    // A new worker gets exactly the jobs that are still queued, once each,
    // and none that is running or completed.
    const queuedIds = new Set([...before.values()].filter((j) => j.state === "JOB_STATE_QUEUED").map((j) => j.id));
    const fresh: string[] = [];
    for (;;) {
      const { leases: got = [] } = await okJson(second.apiUrl, "Claim", {
        queue: "work",
        workerId: "after-restart",
        leaseDuration: "60s",
        maxJobs: 100,
      });
      if (got.length === 0) break;
      fresh.push(...got.map((l: any) => l.job.id));
    }
    expect(fresh.length).toBe(new Set(fresh).size);
    expect(new Set(fresh)).toEqual(queuedIds);

    expect(await second.stop()).toEqual({ code: 0, signal: null });
    integrityCheck(dbPath);
  }, 60_000);

  it("keeps every completion acknowledged on a Work stream, and leases nothing twice", async () => {
    const dbPath = join(sandbox.dir(), "jobs.db");
    const first = await start(dbPath);
    const JOBS = 500;
    const KILL_AFTER_ACKS = 150;
    const STREAMS = 3;
    const submitted = await okJson(first.apiUrl, "SubmitBatch", {
      jobs: Array.from({ length: JOBS }, (_, i) => ({ queue: "work-stream", task: "crash.work", payload: { i } })),
      view: "JOB_VIEW_BASIC",
    });
    const allIds = new Set<string>(submitted.results.map((r: any) => r.job.id));

    const client = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: first.apiUrl }));
    const leasedBy = new Map<string, string>(); // job id -> worker
    const acknowledged = new Set<string>(); // completions whose result said OK
    let killed = false;
    const streams = Array.from({ length: STREAMS }, async (_, n) => {
      const worker = `work-crash-${n}`;
      const outbox: WorkRequest[] = [create(WorkRequestSchema, { start: { queue: "work-stream", workerId: worker, maxInFlight: 50 } })];
      let wake: (() => void) | undefined;
      let done = false;
      async function* requests(): AsyncGenerator<WorkRequest> {
        for (;;) {
          const m = outbox.shift();
          if (m !== undefined) {
            yield m;
            continue;
          }
          if (done) return;
          await new Promise<void>((r) => (wake = r));
        }
      }
      try {
        for await (const res of client.work(requests())) {
          for (const lease of res.leases) {
            const id = lease.job!.id;
            expect(leasedBy.has(id), `job ${id} leased twice`).toBe(false);
            leasedBy.set(id, worker);
          }
          if (res.leases.length > 0) {
            outbox.push(
              create(WorkRequestSchema, {
                acks: res.leases.map((l) => ({
                  jobId: l.job!.id,
                  leaseToken: l.leaseToken,
                  outcome: { case: "complete" as const, value: { result: { kind: { case: "stringValue" as const, value: worker } } } },
                })),
              }),
            );
            wake?.();
          }
          for (const r of res.results) {
            expect(r.status?.code ?? 0, r.status?.message).toBe(0);
            acknowledged.add(r.jobId);
          }
          if (!killed && acknowledged.size >= KILL_AFTER_ACKS) {
            killed = true;
            first.child.kill("SIGKILL");
          }
        }
      } catch {
        // The server died under the stream: expected.
      } finally {
        done = true;
        wake?.();
      }
    });
    await Promise.all(streams);
    expect(killed, "the server was killed mid-load").toBe(true);
    await first.exited;
    expect(acknowledged.size).toBeGreaterThanOrEqual(KILL_AFTER_ACKS);
    expect(acknowledged.size).toBeLessThan(JOBS);

    const second = await start(dbPath);
    const after = new Map((await listAllJobs(second.apiUrl, "work-stream")).map((j) => [j.id as string, j]));
    expect(new Set(after.keys())).toEqual(allIds);
    for (const id of acknowledged) {
      expect(after.get(id)!.state, id).toBe("JOB_STATE_COMPLETED");
      expect(after.get(id)!.result).toBe(leasedBy.get(id));
    }
    for (const [id, job] of after) {
      expect(job.deliveries ?? 0, id).toBeLessThanOrEqual(1);
      if (job.state === "JOB_STATE_QUEUED") expect(leasedBy.has(id), id).toBe(false);
    }
    const counts = await totals(second.apiUrl);
    expect(sum(counts)).toBe(JOBS);
    expect(counts.completed).toBe([...after.values()].filter((j) => j.state === "JOB_STATE_COMPLETED").length);
    expect(await second.stop()).toEqual({ code: 0, signal: null });
    integrityCheck(dbPath);
  }, 60_000);
});
