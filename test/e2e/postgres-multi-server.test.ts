/**
 * Several servers on one PostgreSQL schema
 * (docs/postgresql.md "Running several servers": any number of servers may
 * share one database, a job is never leased twice, and streams, long-polls
 * and WatchEvents on one server see what is committed through another). Three
 * real `leasequeue serve` processes share a fresh schema; the clients reach
 * them over gRPC, and the outcome is read back with SQL from the schema's own
 * tables, not through the servers under test.
 *
 * Needs the compiled server (`npm run build`) and PostgreSQL
 * (test/helpers/postgres.ts: skipped when unreachable, failing under CI=true).
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  EventKind,
  JobView,
  WorkRequestSchema,
  type JobEvent,
  type Lease,
  type WorkRequest,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { abortedBy, ClaimRun, complete, describeFailure, number, seconds, startClaimers } from "../helpers/claimers.js";
import { probePostgres, skipWithoutPostgres } from "../helpers/postgres.js";
import { requestQueue } from "../helpers/request-queue.js";
import { useServersOnOneSchema } from "../helpers/servers-on-one-schema.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("three servers on one PostgreSQL schema", () => {
  const fleet = useServersOnOneSchema(probe, "multi_server");
  const { table } = fleet;
  const latestSequence = async (): Promise<number> =>
    Number((await fleet.db.query(`SELECT last_sequence FROM ${table("event_sequence")}`)).rows[0].last_sequence);
  const pendingJobs = async (queue: string): Promise<number> =>
    Number(
      (
        await fleet.db.query(`SELECT count(*) AS n FROM ${table("jobs")} WHERE queue = $1 AND state IN ('queued', 'running', 'retry')`, [
          queue,
        ])
      ).rows[0].n,
    );

  it("leases each of 20,000 jobs once, to one of 32 claimers spread over the three servers, and completes it once", async () => {
    const queue = "many";
    const JOBS = 20_000;
    const BATCH = 500;
    const CLAIMERS = 32;
    const run = new ClaimRun(CLAIMERS * 4);
    const leasedBy = new Map<string, string>(); // job id -> worker
    const leasedTwice: string[] = [];
    const leasesPerServer = [0, 0, 0];
    const completed = new Set<string>();

    // Four kinds of claimer, each kind on every server (32 claimers, claimer n on server n % 3).
    const claimers = startClaimers(fleet.clients, CLAIMERS, {
      run,
      queue,
      leased(lease, worker, server) {
        const id = lease.job!.id;
        if (leasedBy.has(id)) leasedTwice.push(id);
        leasedBy.set(id, worker);
        leasesPerServer[server]++;
      },
      done(id) {
        completed.add(id);
        if (completed.size === JOBS) run.finish();
      },
    });

    // Submitted while the claimers run: one submitter per server, batches of 500.
    const submitted = new Set<string>();
    const submitters = fleet.clients.map(async (client, server) => {
      for (let b = server; b < JOBS / BATCH; b += 3) {
        const jobs = Array.from({ length: BATCH }, (_, i) => ({ queue, task: "multi.work", payload: number(b * BATCH + i) }));
        const { results } = await client.submitBatch({ jobs, view: JobView.BASIC });
        for (const r of results) submitted.add(r.job!.id);
      }
    });
    await Promise.all(submitters);
    expect(submitted.size).toBe(JOBS);
    await Promise.all(claimers);

    expect(run.failures.map(describeFailure), fleet.problems()).toEqual([]);
    expect(leasedTwice, "jobs leased twice").toEqual([]);
    expect(completed).toEqual(submitted);
    expect(new Set(leasedBy.keys())).toEqual(submitted);
    // The load really went through every server.
    for (const [server, n] of leasesPerServer.entries()) expect(n, `leases handed out by server ${server}`).toBeGreaterThan(0);

    // The database agrees: every job completed, delivered once, with exactly one CLAIMED and one COMPLETED event.
    const { rows: jobs } = await fleet.db.query<{ id: string; state: string; deliveries: number; attempts: number }>(
      `SELECT id, state, deliveries, attempts FROM ${table("jobs")} WHERE queue = $1`,
      [queue],
    );
    expect(jobs.length).toBe(JOBS);
    expect(jobs.filter((j) => j.state !== "completed" || j.deliveries !== 1 || j.attempts !== 1).slice(0, 5)).toEqual([]);
    expect(new Set(jobs.map((j) => j.id))).toEqual(submitted);
    const { rows: timelines } = await fleet.db.query<{ job_id: string; kinds: string[]; claimed_by: string | null }>(
      `SELECT job_id, array_agg(kind ORDER BY sequence) AS kinds, min(worker_id) FILTER (WHERE kind = 'claimed') AS claimed_by
       FROM ${table("job_events")} WHERE queue = $1 GROUP BY job_id`,
      [queue],
    );
    expect(timelines.length).toBe(JOBS);
    const odd = timelines.filter((t) => t.kinds.join() !== "submitted,claimed,completed" || t.claimed_by !== leasedBy.get(t.job_id));
    expect(odd.slice(0, 5)).toEqual([]);
    expect(Number((await fleet.db.query(`SELECT count(*) AS n FROM ${table("unsequenced_events")}`)).rows[0].n)).toBe(0);
  }, 120_000);

  // How soon (docs/postgresql.md: at once, by LISTEN/NOTIFY) is measured by bench/pg-handoff.mjs: a time bound here
  // would fail on a slow enough machine and prove nothing a faster one does not.
  it("hands a job submitted through one server to a Work stream open on another", async () => {
    const queue = "handoff";
    const finished = new AbortController();
    const requests = requestQueue<WorkRequest>(finished.signal);
    requests.push(create(WorkRequestSchema, { start: { queue, workerId: "handoff-worker", maxInFlight: 1 } }));
    const responses = fleet.clients[1].work(requests.stream, { signal: finished.signal })[Symbol.asyncIterator]();
    // The first message is a keepalive, sent once the stream is subscribed.
    const first = await responses.next();
    expect(first.done).toBe(false);
    expect(first.value.leases).toEqual([]);

    const { job } = await fleet.clients[0].submit({ queue, task: "handoff", payload: number(1) });
    let lease: Lease | undefined;
    while (lease === undefined) {
      const next = await responses.next();
      expect(next.done).toBe(false);
      lease = next.value.leases[0];
    }
    expect(lease.job!.id).toBe(job!.id);

    requests.push(create(WorkRequestSchema, { acks: [complete(lease)] }));
    const acked = await responses.next();
    if (acked.done === true) throw new Error("the Work stream ended before answering the acknowledgement");
    expect(acked.value.results.map((r) => r.status?.code ?? 0)).toEqual([0]);
    finished.abort();
    await responses.return?.().catch(() => {});
  }, 60_000);

  it("answers a WaitJob waiting on one server when the job completes through another", async () => {
    const queue = "wait-across";
    const { job } = await fleet.clients[0].submit({ queue, task: "t" });
    const waiting = fleet.clients[2].waitJob({ jobId: job!.id, timeout: { seconds: 600n } });
    // Wait until server 2 reports the waiter (a state it reports, not a time).
    const waiters = async () =>
      Number(/^leasequeue_job_waiters (\d+)$/m.exec(await (await fetch(`${fleet.servers[2].metricsUrl}/metrics`)).text())?.[1] ?? NaN);
    while ((await waiters()) !== 1) await new Promise((resolve) => setImmediate(resolve));
    const { leases } = await fleet.clients[1].claim({ queue, workerId: "w" });
    await fleet.clients[1].complete({ jobId: job!.id, leaseToken: leases[0].leaseToken, result: number(7) });
    const answer = await waiting;
    expect(answer.finished).toBe(true);
    expect(answer.job?.result?.kind).toEqual({ case: "numberValue", value: 7 });
  }, 60_000);

  it("shows a WatchEvents subscriber on one server every event committed through all three, with no gap and no duplicate", async () => {
    const queue = "watched";
    const from = await latestSequence();
    const stop = new AbortController();
    const seen: JobEvent[] = [];
    let reached: (() => void) | undefined;
    const watching = (async () => {
      try {
        for await (const res of fleet.clients[0].watchEvents({ afterSequence: BigInt(from) }, { signal: stop.signal })) {
          if (res.event === undefined) continue;
          seen.push(res.event);
          reached?.();
        }
      } catch (err) {
        if (!abortedBy(stop.signal, err)) throw err;
      }
    })();

    // A workload on all three servers that makes every kind of event:
    // payload n % 8 decides what the first worker to get the job does.
    const JOBS = 360;
    let submitting = true;
    const submits = fleet.clients.map(async (client, server) => {
      const mine = Array.from({ length: JOBS / 3 }, (_, i) => 3 * i + server);
      for (let i = 0; i < mine.length; i += 40) {
        const jobs = mine.slice(i, i + 20).map((n) => ({ queue, task: "watched", payload: number(n), maxAttempts: 2 }));
        await client.submitBatch({ jobs });
        for (const n of mine.slice(i + 20, i + 40)) {
          // Every 40th job is due in a minute and cancelled at once through the next server.
          const later = n % 40 === 39;
          const { job } = await client.submit({
            queue,
            task: "watched",
            payload: number(n),
            maxAttempts: 2,
            schedule: later ? { case: "delay", value: seconds(60) } : { case: undefined },
          });
          if (later) await fleet.clients[(server + 1) % 3].cancel({ jobId: job!.id, reason: "not needed" });
        }
      }
    });
    const settled = Promise.all(submits).finally(() => (submitting = false));

    const worker = async (server: number, w: number) => {
      const client = fleet.clients[server];
      const workerId = `watched-${server}-${w}`;
      for (;;) {
        const { leases } = await client.claim({ queue, workerId, leaseDuration: seconds(300), maxJobs: 5, wait: { nanos: 200_000_000 } });
        if (leases.length === 0) {
          if (!submitting && (await pendingJobs(queue)) === 0) return;
          continue;
        }
        for (const { job, leaseToken } of leases) {
          const jobId = job!.id;
          const n = job!.payload!.kind.value as number;
          const firstTime = job!.deliveries === 1;
          const other = fleet.clients[(server + 1) % 3];
          if (firstTime && n % 8 === 1) {
            await client.fail({ jobId, leaseToken, error: "try again", retryDelay: seconds(0) });
          } else if (firstTime && n % 8 === 2) {
            await client.fail({ jobId, leaseToken, error: "hopeless", permanent: true });
            await other.redrive({ jobId });
          } else if (firstTime && n % 8 === 3) {
            await client.release({ jobId, leaseToken });
          } else if (n % 8 === 4) {
            await client.heartbeat({ jobId, leaseToken });
            await other.complete({ jobId, leaseToken });
          } else if (n % 8 === 5) {
            const { results } = await other.acknowledge({ acks: [{ jobId, leaseToken, outcome: { case: "complete", value: {} } }] });
            expect(results[0].status?.code ?? 0).toBe(0);
          } else {
            await client.complete({ jobId, leaseToken });
          }
        }
      }
    };
    await Promise.all([settled, ...[0, 1, 2].flatMap((server) => [0, 1, 2, 3].map((w) => worker(server, w)))]);

    // Every answer came after its events were numbered: the last one is known now.
    const through = await latestSequence();
    await new Promise<void>((resolve, reject) => {
      reached = () => (seen.at(-1)?.sequence ?? BigInt(from)) >= BigInt(through) && resolve();
      reached();
      watching.then(() => reject(new Error("WatchEvents ended before the last event reached it")), reject);
    });
    stop.abort();
    await watching;

    const { rows } = await fleet.db.query<{ sequence: string; job_id: string; kind: string; worker_id: string | null }>(
      `SELECT sequence, job_id, kind, worker_id FROM ${table("job_events")} WHERE sequence > $1 ORDER BY sequence`,
      [from],
    );
    const stored = rows.map((r) => `${r.sequence} ${r.job_id} ${r.kind.toUpperCase()}`);
    const watched = seen.map((e) => `${e.sequence} ${e.jobId} ${EventKind[e.kind]}`);
    expect(watched).toEqual(stored);
    // Nothing is pruned here, so the numbers run on without a hole.
    expect(seen.map((e) => Number(e.sequence))).toEqual(Array.from({ length: through - from }, (_, i) => from + 1 + i));
    // The events were committed through all three servers, and are of every kind the workload makes.
    const claimedOn = new Set(rows.filter((r) => r.kind === "claimed").map((r) => r.worker_id!.split("-")[1]));
    expect(claimedOn).toEqual(new Set(["0", "1", "2"]));
    expect(new Set(rows.map((r) => r.kind))).toEqual(
      new Set(["submitted", "claimed", "heartbeat", "completed", "failed", "dead_lettered", "redriven", "released", "cancelled"]),
    );
    expect(await pendingJobs(queue)).toBe(0);
  }, 60_000);
});
