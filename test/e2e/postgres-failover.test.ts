/**
 * Failure and maintenance with several servers on one PostgreSQL schema
 * (docs/postgresql.md "Running several servers"):
 * - kill -9 of one of three servers under load: every acknowledged submit
 *   survives, and the leases the dead server handed out expire (docs/api.md
 *   "Lease recovery") and are leased again and completed by
 *   the others;
 * - the lease sweepers and retention pruners of three servers running at
 *   once never recover an expired lease twice nor delete a job twice.
 *
 * The outcome is read back with SQL from the schema's own tables. Needs the
 * compiled server (`npm run build`) and PostgreSQL (test/helpers/postgres.ts:
 * skipped when unreachable, failing under CI=true).
 */
import { setMaxListeners } from "node:events";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseQueueService, WorkRequestSchema, type Lease, type WorkRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startServer, type RunningServer } from "../../src/app.js";
import { resolveConfig } from "../../src/config/config.js";
import { prunePass, type PassSummary } from "../../src/maintenance/pruner.js";
import { ManualClock } from "../../src/testing/index.js";
import type { JobEvent } from "../../src/domain/job.js";
import type { Logger, LogFields } from "../../src/logger.js";
import { dropSchema, probePostgres, requirePostgres, skipWithoutPostgres, uniqueSchemaName } from "../helpers/postgres.js";
import { spawnPostgresServer, type SpawnedServer } from "../helpers/process.js";
import { requestQueue } from "../helpers/request-queue.js";

const probe = await probePostgres();

type LeaseQueueClient = Client<typeof LeaseQueueService>;

const seconds = (n: number) => ({ seconds: BigInt(n) });
const grpcClient = (apiUrl: string): LeaseQueueClient => createClient(LeaseQueueService, createGrpcTransport({ baseUrl: apiUrl }));

/** Each job's event kinds in sequence order, with the worker of its last CLAIMED event. */
async function timelines(db: pg.Pool, schema: string, queue: string): Promise<Map<string, { kinds: string; lastClaimedBy: string }>> {
  const { rows } = await db.query<{ job_id: string; kinds: string[]; claimed_by: string[] }>(
    `SELECT job_id, array_agg(kind ORDER BY sequence) AS kinds,
       array_agg(worker_id ORDER BY sequence) FILTER (WHERE kind = 'claimed') AS claimed_by
     FROM ${schema}.job_events WHERE queue = $1 GROUP BY job_id`,
    [queue],
  );
  return new Map(rows.map((r) => [r.job_id, { kinds: r.kinds.join(), lastClaimedBy: r.claimed_by?.at(-1) ?? "" }]));
}

describe.skipIf(skipWithoutPostgres(probe))("kill -9 of one of three servers on one PostgreSQL schema", () => {
  const schema = uniqueSchemaName("failover");
  const VICTIM = 2;
  let db: pg.Pool;
  let servers: SpawnedServer[] = [];
  let clients: LeaseQueueClient[] = [];

  beforeAll(async () => {
    requirePostgres(probe);
    db = new pg.Pool({ connectionString: probe.url, max: 4 });
    servers = await Promise.all([0, 1, 2].map(() => spawnPostgresServer(probe.url, schema, ["--database-pool-size", "6"])));
    clients = servers.map((s) => grpcClient(s.apiUrl));
  }, 60_000);

  afterAll(async () => {
    const exits = await Promise.all(servers.map((s) => s.stop()));
    await db?.end();
    if (probe.available) await dropSchema(schema, probe.url);
    for (const [i, exit] of exits.entries()) {
      if (i === VICTIM) continue;
      expect(exit, `server ${i} exit\n${servers[i].stderrLines.join("\n")}`).toEqual({ code: 0, signal: null });
    }
  }, 60_000);

  it("loses no acknowledged job, and the killed server's leases expire and are leased and completed by the others", async () => {
    const queue = "failover";
    const LEASE = seconds(2);
    const SUBMIT_LOOPS = 6; // loop l submits through server l % 3
    const SUBMITS_PER_LOOP = 100;
    const HELD_BY_VICTIM = 20;
    // Longer than the holder may take to gather its leases on a loaded machine:
    // a lease of its that expired before the kill could be leased again and
    // completed by the victim's own workers.
    const HOLDER_LEASE = seconds(10);
    const victim = servers[VICTIM];

    const finished = new AbortController();
    setMaxListeners(100, finished.signal);
    const failures: unknown[] = [];
    const acked = new Map<string, string>(); // idempotency key -> job id
    const attempted = new Set<string>();
    const leases: Array<{ id: string; server: number; worker: string }> = [];
    const completed = new Set<string>(); // completes acknowledged to us
    const refused = new Set<string>(); // completes refused because the lease had expired meanwhile
    const heldByVictim = new Set<string>(); // leased on the victim and never completed
    let killed = false;

    // Once the load is under way, a worker on the victim takes leases that it
    // never completes, and the victim is killed as soon as it holds them.
    let holder: Promise<void> | undefined;
    const killWhenLoaded = () => {
      if (holder !== undefined || acked.size < 250 || completed.size < 80) return;
      holder = (async () => {
        try {
          while (heldByVictim.size < HELD_BY_VICTIM && !finished.signal.aborted) {
            const got = await clients[VICTIM].claim({
              queue,
              workerId: "holder-on-2",
              leaseDuration: HOLDER_LEASE,
              maxJobs: 10,
              wait: seconds(1),
            });
            for (const lease of got.leases) {
              leased(lease, VICTIM, "holder-on-2");
              heldByVictim.add(lease.job!.id);
            }
          }
          killed = true;
          victim.child.kill("SIGKILL");
        } catch (err) {
          expected(VICTIM, err);
        }
      })();
    };
    /** An error is expected only from the victim once it was killed; anything else fails the test. */
    const expected = (server: number, err: unknown) => {
      if (server === VICTIM && killed) return true;
      if (finished.signal.aborted && ConnectError.from(err).code === Code.Canceled) return true;
      failures.push(err);
      finished.abort();
      return false;
    };
    const leased = (lease: Lease, server: number, worker: string) => leases.push({ id: lease.job!.id, server, worker });
    const acknowledged = (jobId: string, code: Code | 0 = 0) => {
      if (code === 0) completed.add(jobId);
      // A worker slow enough to outlive its lease is refused, and the job is leased again.
      else if (code === Code.Aborted) refused.add(jobId);
      else throw new Error(`completing ${jobId}: code ${code}`);
      killWhenLoaded();
    };

    const submitLoop = async (loop: number) => {
      const server = loop % 3;
      try {
        for (let i = 0; i < SUBMITS_PER_LOOP && !(server === VICTIM && killed); i++) {
          const keys = i % 5 === 4 ? [0, 1, 2, 3, 4].map((k) => `k-${loop}-${i}-${k}`) : [`k-${loop}-${i}`];
          for (const key of keys) attempted.add(key);
          const { results } = await clients[server].submitBatch({
            jobs: keys.map((key) => ({ queue, task: "failover", idempotencyKey: key })),
          });
          for (const [k, r] of results.entries()) {
            expect(r.deduplicated).toBe(false);
            acked.set(keys[k], r.job!.id);
          }
          killWhenLoaded();
        }
      } catch (err) {
        expected(server, err);
      }
    };
    let submitting = true;
    const submits = Promise.all(Array.from({ length: SUBMIT_LOOPS }, (_, l) => submitLoop(l))).finally(() => (submitting = false));

    // On every server: a Work stream and a Claim + Complete loop. The survivors'
    // claim loops end the test once nothing of the queue is left unfinished.
    const workStream = async (server: number) => {
      const worker = `stream-on-${server}`;
      const requests = requestQueue<WorkRequest>(finished.signal);
      requests.push(create(WorkRequestSchema, { start: { queue, workerId: worker, leaseDuration: LEASE, maxInFlight: 10 } }));
      try {
        for await (const res of clients[server].work(requests.stream, { signal: finished.signal })) {
          for (const lease of res.leases) leased(lease, server, worker);
          if (res.leases.length > 0) {
            const acks = res.leases.map((l) => ({
              jobId: l.job!.id,
              leaseToken: l.leaseToken,
              outcome: { case: "complete" as const, value: {} },
            }));
            requests.push(create(WorkRequestSchema, { acks }));
          }
          for (const r of res.results) acknowledged(r.jobId, r.status?.code);
        }
      } catch (err) {
        expected(server, err);
      }
    };
    const pending = async () =>
      Number(
        (await db.query(`SELECT count(*) AS n FROM ${schema}.jobs WHERE queue = $1 AND state IN ('queued', 'running', 'retry')`, [queue]))
          .rows[0].n,
      );
    const claimLoop = async (server: number) => {
      const worker = `claimer-on-${server}`;
      const client = clients[server];
      try {
        while (!finished.signal.aborted) {
          const got = await client.claim(
            { queue, workerId: worker, leaseDuration: LEASE, maxJobs: 5, wait: seconds(1) },
            { signal: finished.signal },
          );
          if (got.leases.length === 0 && server !== VICTIM && !submitting && (await pending()) === 0) finished.abort();
          for (const lease of got.leases) {
            leased(lease, server, worker);
            try {
              await client.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken }, { signal: finished.signal });
              acknowledged(lease.job!.id);
            } catch (err) {
              if (ConnectError.from(err).code !== Code.Aborted) throw err;
              acknowledged(lease.job!.id, Code.Aborted);
            }
          }
        }
      } catch (err) {
        expected(server, err);
      }
    };
    await Promise.all([submits, ...[0, 1, 2].flatMap((server) => [workStream(server), claimLoop(server)])]);
    await holder;

    expect(failures).toEqual([]);
    expect(killed, "the server was killed under load").toBe(true);
    expect((await victim.exited).signal).toBe("SIGKILL");
    expect(heldByVictim.size).toBeGreaterThanOrEqual(HELD_BY_VICTIM);

    // Every acknowledged submit is there, completed; nothing is there that was not submitted.
    const { rows } = await db.query<{ id: string; key: string; state: string; deliveries: number }>(
      `SELECT id, idempotency_key AS key, state, deliveries FROM ${schema}.jobs WHERE queue = $1`,
      [queue],
    );
    const stored = new Map(rows.map((r) => [r.key, r]));
    for (const [key, id] of acked) expect(stored.get(key), key).toMatchObject({ id, state: "completed" });
    expect(rows.filter((r) => !attempted.has(r.key))).toEqual([]);
    expect(rows.filter((r) => r.state !== "completed")).toEqual([]);

    // Each delivery but the last ended in exactly one recovery of its expired
    // lease (by a sweeper or a claim of either survivor); one completion.
    const history = await timelines(db, schema, queue);
    expect(history.size).toBe(rows.length);
    const odd = rows.filter((r) => {
      const kinds = history.get(r.id)?.kinds ?? "";
      return kinds !== ["submitted", ...Array(r.deliveries - 1).fill("claimed,lease_expired"), "claimed", "completed"].join();
    });
    expect(odd.map((r) => ({ ...r, kinds: history.get(r.id)?.kinds }))).toEqual([]);

    // The victim's unfinished leases expired, and the survivors leased and completed those jobs.
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const id of heldByVictim) {
      expect(byId.get(id)!.deliveries, id).toBeGreaterThanOrEqual(2);
      expect(history.get(id)!.lastClaimedBy, id).not.toMatch(/-on-2$/);
    }
    // Every server handed out leases, and no job reached us more often than it was delivered.
    expect(new Set(leases.map((l) => l.server))).toEqual(new Set([0, 1, 2]));
    const received = new Map<string, number>();
    for (const l of leases) received.set(l.id, (received.get(l.id) ?? 0) + 1);
    expect([...received].filter(([id, n]) => n > (byId.get(id)?.deliveries ?? 0))).toEqual([]);
    // A refused complete is one whose lease had expired, never another failure.
    for (const id of refused) expect(history.get(id)!.kinds, id).toContain("lease_expired");

    // The survivors' counts agree with the rows.
    const { queues } = await clients[0].getStats({});
    const stats = queues.find((q) => q.queue === queue)!;
    expect([stats.completed, stats.queued, stats.running, stats.retry, stats.dead]).toEqual([BigInt(rows.length), 0n, 0n, 0n, 0n]);
  }, 60_000);
});

describe.skipIf(skipWithoutPostgres(probe))("lease sweepers and pruners of three servers on one PostgreSQL schema", () => {
  const schema = uniqueSchemaName("maintenance");
  // One fake clock for the three servers: leases expire when the test says so, not after a sleep.
  const clock = new ManualClock(Date.now());
  const logs: Array<Array<{ level: string; msg: string; fields: LogFields }>> = [[], [], []];
  const capture = (i: number): Logger => {
    const at =
      (level: string) =>
      (msg: string, fields: LogFields = {}) =>
        void logs[i].push({ level, msg, fields });
    return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
  };
  let db: pg.Pool;
  let servers: RunningServer[] = [];
  let clients: LeaseQueueClient[] = [];

  beforeAll(async () => {
    requirePostgres(probe);
    db = new pg.Pool({ connectionString: probe.url, max: 4 });
    const config = resolveConfig(
      { "database-url": probe.url, "database-schema": schema, "database-pool-size": "4", port: "0", "metrics-port": "0" },
      {},
    );
    // Sweeping every 5 ms on each server, so their sweeps overlap.
    servers = await Promise.all(
      [0, 1, 2].map((i) => startServer(config, { log: capture(i), clock, databaseClock: clock, sweepIntervalMs: 5 })),
    );
    clients = servers.map((s) => grpcClient(s.apiUrl));
  }, 60_000);

  afterAll(async () => {
    for (const s of servers) await s.close();
    await db?.end();
    if (probe.available) await dropSchema(schema, probe.url);
  }, 60_000);

  it("recover each expired lease once and delete each finished job once while all three sweep and prune", async () => {
    const queue = "maintained";
    const JOBS = 300;
    const { results } = await clients[0].submitBatch({ jobs: Array.from({ length: JOBS }, () => ({ queue, task: "maintained" })) });
    const ids = new Set(results.map((r) => r.job!.id));

    // Leased through all three servers, never finished; then the clock passes every lease.
    const claimAll = async (leaseSeconds: number) => {
      const got: Lease[] = [];
      for (let round = 0; got.length < JOBS; round++) {
        const { leases } = await clients[round % 3].claim({
          queue,
          workerId: `w-${round % 3}`,
          leaseDuration: seconds(leaseSeconds),
          maxJobs: 100,
        });
        expect(leases.length, "a claim round came back empty").toBeGreaterThan(0);
        got.push(...leases);
      }
      expect(new Set(got.map((l) => l.job!.id))).toEqual(ids);
      return got;
    };
    await claimAll(60);
    const expired = new Set<string>();
    let allExpired!: () => void;
    const recovered = new Promise<void>((resolve) => (allExpired = resolve));
    const unsubscribe = servers[0].store.onCommitted(({ events }: { events: JobEvent[] }) => {
      for (const e of events) if (e.queue === queue && e.kind === "lease_expired" && expired.add(e.jobId).size === JOBS) allExpired();
    });
    clock.advance(61_000);
    await recovered; // the sweepers run every 5 ms; bounded by the test timeout
    unsubscribe();

    // Each job came back once: leased again and completed once.
    const again = await claimAll(60);
    const { results: acks } = await clients[1].acknowledge({
      acks: again.map((l) => ({ jobId: l.job!.id, leaseToken: l.leaseToken, outcome: { case: "complete" as const, value: {} } })),
    });
    expect(acks.filter((r) => (r.status?.code ?? 0) !== 0)).toEqual([]);
    const history = await timelines(db, schema, queue);
    const kinds = new Set([...history.values()].map((h) => h.kinds));
    expect(kinds).toEqual(new Set(["submitted,claimed,lease_expired,claimed,completed"]));
    expect(history.size).toBe(JOBS);
    // Only the sweepers recovered (no claim ran meanwhile): their counts add up to one per lease.
    const sweptCounts = logs.flat().filter((l) => l.msg === "recovered expired leases");
    expect(sweptCounts.reduce((n, l) => n + Number(l.fields.count), 0)).toBe(JOBS);

    // Three retention passes at once, in small batches, an hour after the jobs finished.
    clock.advance(3_600_000);
    const policy = { retentionMs: 60_000, deadRetentionMs: null };
    const passes: PassSummary[] = await Promise.all(servers.map((s) => prunePass({ store: s.store, clock, policy, batchSize: 7 })));
    expect(passes.reduce((n, p) => n + p.jobs, 0)).toBe(JOBS);
    expect(passes.reduce((n, p) => n + p.events, 0)).toBe(JOBS * 5);
    const left = await db.query(
      `SELECT (SELECT count(*) FROM ${schema}.jobs WHERE queue = $1) AS jobs, (SELECT count(*) FROM ${schema}.job_events WHERE queue = $1) AS events`,
      [queue],
    );
    expect(left.rows[0]).toEqual({ jobs: "0", events: "0" });
    const { queues } = await clients[2].getStats({});
    expect(queues.find((q) => q.queue === queue)).toBeUndefined();

    expect(logs.flat().filter((l) => l.level === "warn" || l.level === "error")).toEqual([]);
  }, 60_000);
});
