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
import { setMaxListeners } from "node:events";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AcknowledgementSchema,
  EventKind,
  JobView,
  LeaseQueueService,
  WorkRequestSchema,
  type JobEvent,
  type Lease,
  type WorkRequest,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { dropSchema, probePostgres, requirePostgres, skipWithoutPostgres, uniqueSchemaName } from "../helpers/postgres.js";
import { spawnPostgresServer, type SpawnedServer } from "../helpers/process.js";
import { requestQueue } from "../helpers/request-queue.js";

const probe = await probePostgres();

type LeaseQueueClient = Client<typeof LeaseQueueService>;

const seconds = (n: number) => ({ seconds: BigInt(n) });
const number = (n: number) => ({ kind: { case: "numberValue" as const, value: n } });
const complete = (lease: Lease): MessageInitShape<typeof AcknowledgementSchema> => ({
  jobId: lease.job!.id,
  leaseToken: lease.leaseToken,
  outcome: { case: "complete", value: {} },
});

/** True for the error a call ends with when the test itself aborted it. */
function abortedBy(signal: AbortSignal, err: unknown): boolean {
  return signal.aborted && ConnectError.from(err).code === Code.Canceled;
}

describe.skipIf(skipWithoutPostgres(probe))("three servers on one PostgreSQL schema", () => {
  const schema = uniqueSchemaName("multi_server");
  let db: pg.Pool;
  let servers: SpawnedServer[] = [];
  let clients: LeaseQueueClient[] = [];

  beforeAll(async () => {
    requirePostgres(probe);
    db = new pg.Pool({ connectionString: probe.url, max: 4 });
    // Started together on an empty schema: they migrate it once, under the advisory lock.
    servers = await Promise.all([0, 1, 2].map(() => spawnPostgresServer(probe.url, schema, ["--database-pool-size", "6"])));
    clients = servers.map((s) => createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl })));
  }, 30_000);

  afterAll(async () => {
    const exits = await Promise.all(servers.map((s) => s.stop()));
    await db?.end();
    if (probe.available) await dropSchema(schema, probe.url);
    // A server that crashed during the tests would show here, whatever the tests saw.
    for (const [i, exit] of exits.entries()) {
      expect(exit, `server ${i} exit\n${servers[i].stderrLines.join("\n")}\n${servers[i].lines.join("\n")}`).toEqual({
        code: 0,
        signal: null,
      });
    }
  }, 30_000);

  const table = (name: string) => `${schema}.${name}`;
  const latestSequence = async (): Promise<number> =>
    Number((await db.query(`SELECT last_sequence FROM ${table("event_sequence")}`)).rows[0].last_sequence);
  const pendingJobs = async (queue: string): Promise<number> =>
    Number(
      (await db.query(`SELECT count(*) AS n FROM ${table("jobs")} WHERE queue = $1 AND state IN ('queued', 'running', 'retry')`, [queue]))
        .rows[0].n,
    );

  it("leases each of 20,000 jobs once, to one of 32 claimers spread over the three servers, and completes it once", async () => {
    const queue = "many";
    const JOBS = 20_000;
    const BATCH = 500;
    const CLAIMERS = 32;
    const finished = new AbortController();
    setMaxListeners(CLAIMERS * 4, finished.signal);
    const leasedBy = new Map<string, string>(); // job id -> worker
    const leasedTwice: string[] = [];
    const leasesPerServer = [0, 0, 0];
    const completed = new Set<string>();
    const failures: unknown[] = [];

    const leased = (lease: Lease, worker: string, server: number) => {
      const id = lease.job!.id;
      if (leasedBy.has(id)) leasedTwice.push(id);
      leasedBy.set(id, worker);
      leasesPerServer[server]++;
    };
    const done = (id: string) => {
      completed.add(id);
      if (completed.size === JOBS) finished.abort();
    };
    /** Any failure ends every claimer, and the test reports it. */
    const fail = (err: unknown) => {
      if (abortedBy(finished.signal, err)) return;
      failures.push(err);
      finished.abort();
    };
    const claimer = (body: () => Promise<void>) => body().catch(fail);
    const acknowledge = async (client: LeaseQueueClient, leases: Lease[]) => {
      const { results } = await client.acknowledge({ acks: leases.map(complete) }, { signal: finished.signal });
      for (const r of results) {
        expect(r.status?.code ?? 0, r.status?.message).toBe(0);
        done(r.jobId);
      }
    };

    // Four kinds of claimer, each kind on every server (32 claimers, claimer n on server n % 3).
    const workStream = (client: LeaseQueueClient, worker: string, server: number) =>
      claimer(async () => {
        const requests = requestQueue<WorkRequest>(finished.signal);
        requests.push(create(WorkRequestSchema, { start: { queue, workerId: worker, leaseDuration: seconds(300), maxInFlight: 50 } }));
        for await (const res of client.work(requests.stream, { signal: finished.signal })) {
          for (const lease of res.leases) leased(lease, worker, server);
          if (res.leases.length > 0) requests.push(create(WorkRequestSchema, { acks: res.leases.map(complete) }));
          for (const r of res.results) {
            expect(r.status?.code ?? 0, r.status?.message).toBe(0);
            done(r.jobId);
          }
        }
      });
    const streamClaims = (client: LeaseQueueClient, worker: string, server: number) =>
      claimer(async () => {
        // Leases that arrive together are acknowledged together, one Acknowledge at a time.
        let batch: Lease[] = [];
        let flushing = Promise.resolve();
        const flush = () => {
          const leases = batch;
          batch = [];
          flushing = flushing.then(() => acknowledge(client, leases)).catch(fail);
        };
        const stream = client.streamClaims(
          { queue, workerId: worker, leaseDuration: seconds(300), maxInFlight: 20 },
          { signal: finished.signal },
        );
        for await (const res of stream) {
          if (res.lease === undefined) continue;
          leased(res.lease, worker, server);
          if (batch.push(res.lease) === 1) setImmediate(flush);
        }
        await flushing;
      });
    const claimLoop = (client: LeaseQueueClient, worker: string, server: number, maxJobs: number, batched: boolean) =>
      claimer(async () => {
        while (!finished.signal.aborted) {
          const { leases } = await client.claim(
            { queue, workerId: worker, leaseDuration: seconds(300), maxJobs, wait: seconds(1) },
            { signal: finished.signal },
          );
          for (const lease of leases) leased(lease, worker, server);
          if (batched) {
            if (leases.length > 0) await acknowledge(client, leases);
            continue;
          }
          for (const lease of leases) {
            const { job } = await client.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken }, { signal: finished.signal });
            expect(job?.deliveries).toBe(1);
            done(lease.job!.id);
          }
        }
      });
    const claimers = Array.from({ length: CLAIMERS }, (_, n) => {
      const server = n % 3;
      const worker = `claimer-${n}-on-${server}`;
      const client = clients[server];
      switch (n % 4) {
        case 0:
          return workStream(client, worker, server);
        case 1:
          return streamClaims(client, worker, server);
        case 2:
          return claimLoop(client, worker, server, 20, true);
        default:
          return claimLoop(client, worker, server, 5, false);
      }
    });

    // Submitted while the claimers run: one submitter per server, batches of 500.
    const submitted = new Set<string>();
    const submitters = clients.map(async (client, server) => {
      for (let b = server; b < JOBS / BATCH; b += 3) {
        const jobs = Array.from({ length: BATCH }, (_, i) => ({ queue, task: "multi.work", payload: number(b * BATCH + i) }));
        const { results } = await client.submitBatch({ jobs, view: JobView.BASIC });
        for (const r of results) submitted.add(r.job!.id);
      }
    });
    await Promise.all(submitters);
    expect(submitted.size).toBe(JOBS);
    await Promise.all(claimers);

    expect(failures).toEqual([]);
    expect(leasedTwice, "jobs leased twice").toEqual([]);
    expect(completed).toEqual(submitted);
    expect(new Set(leasedBy.keys())).toEqual(submitted);
    // The load really went through every server.
    for (const [server, n] of leasesPerServer.entries()) expect(n, `leases handed out by server ${server}`).toBeGreaterThan(0);

    // The database agrees: every job completed, delivered once, with exactly one CLAIMED and one COMPLETED event.
    const { rows: jobs } = await db.query<{ id: string; state: string; deliveries: number; attempts: number }>(
      `SELECT id, state, deliveries, attempts FROM ${table("jobs")} WHERE queue = $1`,
      [queue],
    );
    expect(jobs.length).toBe(JOBS);
    expect(jobs.filter((j) => j.state !== "completed" || j.deliveries !== 1 || j.attempts !== 1).slice(0, 5)).toEqual([]);
    expect(new Set(jobs.map((j) => j.id))).toEqual(submitted);
    const { rows: timelines } = await db.query<{ job_id: string; kinds: string[]; claimed_by: string | null }>(
      `SELECT job_id, array_agg(kind ORDER BY sequence) AS kinds, min(worker_id) FILTER (WHERE kind = 'claimed') AS claimed_by
       FROM ${table("job_events")} WHERE queue = $1 GROUP BY job_id`,
      [queue],
    );
    expect(timelines.length).toBe(JOBS);
    const odd = timelines.filter((t) => t.kinds.join() !== "submitted,claimed,completed" || t.claimed_by !== leasedBy.get(t.job_id));
    expect(odd.slice(0, 5)).toEqual([]);
    expect(Number((await db.query(`SELECT count(*) AS n FROM ${table("unsequenced_events")}`)).rows[0].n)).toBe(0);
  }, 120_000);

  it("hands a job submitted through one server to a Work stream open on another within a second", async () => {
    const queue = "handoff";
    const finished = new AbortController();
    const requests = requestQueue<WorkRequest>(finished.signal);
    requests.push(create(WorkRequestSchema, { start: { queue, workerId: "handoff-worker", maxInFlight: 1 } }));
    const responses = clients[1].work(requests.stream, { signal: finished.signal })[Symbol.asyncIterator]();
    // The first message is a keepalive, sent once the stream is subscribed.
    const first = await responses.next();
    expect(first.done).toBe(false);
    expect(first.value.leases).toEqual([]);

    const submittedAt = performance.now();
    const { job } = await clients[0].submit({ queue, task: "handoff", payload: number(1) });
    let lease: Lease | undefined;
    while (lease === undefined) {
      const next = await responses.next();
      expect(next.done).toBe(false);
      lease = next.value.leases[0];
    }
    const elapsedMs = performance.now() - submittedAt;
    expect(lease.job!.id).toBe(job!.id);
    expect(elapsedMs, "from Submit on server 0 to the lease on server 1's Work stream (ms)").toBeLessThan(1000);

    requests.push(create(WorkRequestSchema, { acks: [complete(lease)] }));
    const acked = await responses.next();
    if (acked.done === true) throw new Error("the Work stream ended before answering the acknowledgement");
    expect(acked.value.results.map((r) => r.status?.code ?? 0)).toEqual([0]);
    finished.abort();
    await responses.return?.().catch(() => {});
  }, 20_000);

  it("shows a WatchEvents subscriber on one server every event committed through all three, with no gap and no duplicate", async () => {
    const queue = "watched";
    const from = await latestSequence();
    const stop = new AbortController();
    const seen: JobEvent[] = [];
    let reached: (() => void) | undefined;
    const watching = (async () => {
      try {
        for await (const res of clients[0].watchEvents({ afterSequence: BigInt(from) }, { signal: stop.signal })) {
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
    const submits = clients.map(async (client, server) => {
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
          if (later) await clients[(server + 1) % 3].cancel({ jobId: job!.id, reason: "not needed" });
        }
      }
    });
    const settled = Promise.all(submits).finally(() => (submitting = false));

    const worker = async (server: number, w: number) => {
      const client = clients[server];
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
          const other = clients[(server + 1) % 3];
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

    const { rows } = await db.query<{ sequence: string; job_id: string; kind: string; worker_id: string | null }>(
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
