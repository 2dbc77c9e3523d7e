/**
 * Groups across several servers on one PostgreSQL schema (docs/api.md
 * "Groups": the group rules hold for every lease of the queue, whichever
 * worker, stream or server asks, on both engines and across servers).
 * Three real `leasequeue serve` processes share a fresh schema; claimers of
 * every kind (test/helpers/claimers.ts) run on all three, and what happened
 * is read back with SQL from the schema's own tables, not through the
 * servers under test.
 *
 * Needs the compiled server (`npm run build`) and PostgreSQL
 * (test/helpers/postgres.ts: skipped when unreachable, failing under CI=true).
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { JobView, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { ClaimRun, describeFailure, number, seconds, startClaimers } from "../helpers/claimers.js";
import { probePostgres, skipWithoutPostgres } from "../helpers/postgres.js";
import { useServersOnOneSchema } from "../helpers/servers-on-one-schema.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("groups across three servers on one PostgreSQL schema", () => {
  const fleet = useServersOnOneSchema(probe, "groups");
  const { table } = fleet;

  /** PostgreSQL's count of deadlocks it broke in the test database (pg_stat_database), for the messages of failed checks. */
  const deadlocks = async (): Promise<number> =>
    Number((await fleet.db.query(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`)).rows[0].deadlocks);

  /** What the three servers share: the queue's config row, read with SQL. */
  const storedConfig = async (queue: string) =>
    (
      await fleet.db.query(
        `SELECT max_running, rate_limit, rate_period_ms::int AS rate_period_ms, group_max_running, group_rate_limit, fair, ordered
         FROM ${table("queue_configs")} WHERE queue = $1`,
        [queue],
      )
    ).rows;

  /** Every job of the queue completed, delivered and attempted once, with the events submitted, claimed, completed. */
  const expectEachCompletedOnce = async (queue: string, submitted: Set<string>, leasedBy: Map<string, string>) => {
    const { rows: jobs } = await fleet.db.query<{ id: string; state: string; deliveries: number; attempts: number }>(
      `SELECT id, state, deliveries, attempts FROM ${table("jobs")} WHERE queue = $1`,
      [queue],
    );
    expect(jobs.length).toBe(submitted.size);
    expect(jobs.filter((j) => j.state !== "completed" || j.deliveries !== 1 || j.attempts !== 1).slice(0, 5)).toEqual([]);
    expect(new Set(jobs.map((j) => j.id))).toEqual(submitted);
    const { rows: timelines } = await fleet.db.query<{ job_id: string; kinds: string[]; claimed_by: string | null }>(
      `SELECT job_id, array_agg(kind ORDER BY sequence) AS kinds, min(worker_id) FILTER (WHERE kind = 'claimed') AS claimed_by
       FROM ${table("job_events")} WHERE queue = $1 GROUP BY job_id`,
      [queue],
    );
    expect(timelines.length).toBe(submitted.size);
    const odd = timelines.filter((t) => t.kinds.join() !== "submitted,claimed,completed" || t.claimed_by !== leasedBy.get(t.job_id));
    expect(odd.slice(0, 5)).toEqual([]);
  };

  it("fair, ordered, group_max_running 2: 20,000 jobs in 1,000 groups, 32 claimers over three servers; each job leased once, one running per group, in submission order", async () => {
    const queue = "ordered-accounts";
    const JOBS = 20_000;
    const GROUPS = 1_000;
    const PER_GROUP = JOBS / GROUPS;
    const BATCH = 500;
    const CLAIMERS = 32;
    const groupKey = (g: number) => `account-${String(g).padStart(4, "0")}`;

    // Set through one server, with the mask naming the three rules; the row is what every server reads.
    const { config } = await fleet.clients[0].updateQueue({
      queue,
      config: { groupMaxRunning: 2, fair: true, ordered: true },
      updateMask: { paths: ["group_max_running", "fair", "ordered"] },
    });
    expect(config).toMatchObject({ maxRunning: 0, rateLimit: 0, groupMaxRunning: 2, groupRateLimit: 0, fair: true, ordered: true });
    expect(await storedConfig(queue)).toEqual([
      { max_running: 0, rate_limit: 0, rate_period_ms: 1000, group_max_running: 2, group_rate_limit: 0, fair: true, ordered: true },
    ]);
    const deadlocksBefore = await deadlocks();
    const startedAt = performance.now();

    const run = new ClaimRun(CLAIMERS * 4 + 4);
    const leasedBy = new Map<string, string>(); // job id -> worker
    const leasedTwice: string[] = [];
    const leasesPerServer = [0, 0, 0];
    const leaseOrder = new Map<string, string[]>(); // group -> job ids in the order their leases reached the claimers
    const completed = new Set<string>();
    const progress = async () =>
      `after ${((performance.now() - startedAt) / 1000).toFixed(1)} s; ${completed.size} of ${JOBS} completed; ` +
      `PostgreSQL broke ${(await deadlocks()) - deadlocksBefore} deadlocks meanwhile (in the whole test database)\n${fleet.problems()}`;
    // On any failure, a timeout too: where the run had got, and the claimers stopped (so the servers stop cleanly).
    onTestFailed(async () => {
      run.finish();
      console.error(`groups across three servers: ${await progress()}`);
    });

    // While the run goes, the RUNNING jobs per group, each sample one
    // statement (one snapshot) on the jobs table: one after every
    // SAMPLE_EVERY completions (none is skipped, however the machine paces
    // them), so the number of samples rests on the work done, not on time.
    const SAMPLE_EVERY = 500;
    let samplesDue = 0;
    let wakeSampler: (() => void) | undefined;
    run.signal.addEventListener("abort", () => wakeSampler?.());
    let samples = 0;
    let mostRunningSeen = 0; // in the whole queue, in one sample
    const overfull: string[] = [];

    // A job's lease goes out only once the one before it in its group is
    // completed, which its claimer asked for after its lease reached this
    // process: the order leases reach the claimers here is the order they were
    // handed out in, within a group.
    const claimers = startClaimers(fleet.clients, CLAIMERS, {
      run,
      queue,
      leased(lease: Lease, worker, server) {
        const id = lease.job!.id;
        if (leasedBy.has(id)) leasedTwice.push(id);
        leasedBy.set(id, worker);
        leasesPerServer[server]++;
        const group = lease.job!.groupKey;
        const order = leaseOrder.get(group) ?? [];
        order.push(id);
        leaseOrder.set(group, order);
      },
      done(id) {
        const before = completed.size;
        completed.add(id);
        if (completed.size > before && completed.size % SAMPLE_EVERY === 0) {
          samplesDue++;
          wakeSampler?.();
        }
        if (completed.size === JOBS) run.finish();
      },
    });

    const sampler = (async () => {
      // Takes every sample that came due, also those the end of the run left to take.
      for (;;) {
        if (samples === samplesDue) {
          if (run.signal.aborted) return;
          await new Promise<void>((resolve) => (wakeSampler = resolve));
          continue;
        }
        const { rows } = await fleet.db.query<{ group_key: string; running: number }>(
          `SELECT group_key, count(*)::int AS running FROM ${table("jobs")} WHERE queue = $1 AND state = 'running' GROUP BY group_key`,
          [queue],
        );
        samples++;
        mostRunningSeen = Math.max(
          mostRunningSeen,
          rows.reduce((n, r) => n + r.running, 0),
        );
        for (const r of rows) if (r.running > 1) overfull.push(`sample ${samples}: ${r.running} running in group "${r.group_key}"`);
      }
    })().catch(run.fail);

    // Submitted while the claimers run: group g through server g % 3 only, so
    // a group's submission order is the order its submitter's batches (500
    // each, one after another) answer its jobs. A batch holds a job of each
    // of the server's groups in turn, so each group's jobs span many batches.
    const submittedOrder = new Map<string, string[]>(); // group -> job ids in submission order
    const submitted = new Set<string>();
    const submitters = fleet.clients.map(async (client, server) => {
      const mine = Array.from({ length: GROUPS }, (_, g) => g).filter((g) => g % 3 === server);
      const jobs = Array.from({ length: PER_GROUP }, (_, k) =>
        mine.map((g) => ({ queue, task: "groups.ordered", groupKey: groupKey(g), payload: number(k) })),
      ).flat();
      for (let i = 0; i < jobs.length; i += BATCH) {
        const { results } = await client.submitBatch({ jobs: jobs.slice(i, i + BATCH), view: JobView.BASIC });
        for (const r of results) {
          const group = r.job!.groupKey;
          const order = submittedOrder.get(group) ?? [];
          order.push(r.job!.id);
          submittedOrder.set(group, order);
          submitted.add(r.job!.id);
        }
      }
    });
    // The backlog is queued: the planner gets the statistics autovacuum would gather.
    await Promise.all(submitters)
      .then(() => fleet.analyze())
      .catch(run.fail);
    await Promise.all(claimers);
    await sampler;
    const context = await progress();

    expect(run.failures.map(describeFailure), `claimers or submitters failed ${context}`).toEqual([]);
    expect(submitted.size).toBe(JOBS);
    expect(leasedTwice, "jobs leased twice").toEqual([]);
    expect(completed).toEqual(submitted);
    expect(new Set(leasedBy.keys())).toEqual(submitted);
    for (const [server, n] of leasesPerServer.entries()) expect(n, `leases handed out by server ${server}`).toBeGreaterThan(0);

    // Never two RUNNING jobs of one group (ordered allows one, group_max_running 2 is the looser bound), while many ran at once.
    expect(overfull.slice(0, 10), `groups with more than one RUNNING job, in ${samples} samples`).toEqual([]);
    expect(samples, "samples of the running jobs").toBe(JOBS / SAMPLE_EVERY);
    expect(mostRunningSeen, "most RUNNING jobs of the queue seen in one sample").toBeGreaterThan(1);

    // Within a group, leased in submission order, which is id order (ordered: "submitted first" is the lowest id).
    expect(submittedOrder.size).toBe(GROUPS);
    const outOfIdOrder = [...submittedOrder].filter(([, ids]) => ids.some((id, i) => i > 0 && ids[i - 1] >= id)).map(([g]) => g);
    expect(outOfIdOrder.slice(0, 5), "groups whose ids do not rise in submission order").toEqual([]);
    const outOfOrder = [...submittedOrder]
      .filter(([group, ids]) => (leaseOrder.get(group) ?? []).join() !== ids.join())
      .map(([group, ids]) => ({ group, submitted: ids, leased: leaseOrder.get(group) }));
    expect(outOfOrder.slice(0, 3), `groups not leased in submission order (${outOfOrder.length} of ${GROUPS})`).toEqual([]);

    await expectEachCompletedOnce(queue, submitted, leasedBy);
    // The events say the same of every moment, not only of the samples: in
    // each group, in event order, a lease and its completion, then the next
    // job's lease (a claim sees the previous job completed only once that
    // completion committed, so its event is numbered first).
    const { rows: groups } = await fleet.db.query<{ group_key: string; kinds: string[]; claimed: string[] }>(
      `SELECT group_key, array_agg(kind ORDER BY sequence) AS kinds, array_agg(job_id::text ORDER BY sequence) FILTER (WHERE kind = 'claimed') AS claimed
       FROM ${table("job_events")} WHERE queue = $1 AND kind IN ('claimed', 'completed') GROUP BY group_key`,
      [queue],
    );
    expect(groups.length).toBe(GROUPS);
    const alternating = Array.from({ length: PER_GROUP }, () => "claimed,completed").join();
    const overlapping = groups.filter((g) => g.kinds.join() !== alternating).map((g) => `${g.group_key}: ${g.kinds.join()}`);
    expect(overlapping.slice(0, 3), "groups whose leases overlapped, by their events").toEqual([]);
    const claimedOutOfOrder = groups.filter((g) => g.claimed.join() !== submittedOrder.get(g.group_key)?.join()).map((g) => g.group_key);
    expect(claimedOutOfOrder.slice(0, 5), "groups whose CLAIMED events are not in submission order").toEqual([]);
  }, 180_000);

  it("group_rate_limit 5 per second: no group gets more than 5 leases in any second, with claimers on all three servers", async () => {
    const queue = "rated-accounts";
    const RATE = 5;
    const PERIOD_MS = 1000;
    // A window lets out 40 * 5 leases, more than the claimers of one server take at once (see test/helpers/claimers.ts),
    // so each window's leases go out through more than one server.
    const GROUPS = 40;
    const PER_GROUP = 15;
    const JOBS = GROUPS * PER_GROUP;
    const CLAIMERS = 12; // every kind of claimer on every server
    const ratedGroup = (g: number) => `rated-${String(g).padStart(2, "0")}`;

    const { config } = await fleet.clients[1].updateQueue({
      queue,
      config: { groupRateLimit: RATE, ratePeriod: seconds(PERIOD_MS / 1000), fair: true },
      updateMask: { paths: ["group_rate_limit", "rate_period", "fair"] },
    });
    expect(config).toMatchObject({ groupRateLimit: RATE, ratePeriod: { seconds: BigInt(PERIOD_MS / 1000) }, fair: true, ordered: false });
    expect(await storedConfig(queue)).toEqual([
      {
        max_running: 0,
        rate_limit: 0,
        rate_period_ms: PERIOD_MS,
        group_max_running: 0,
        group_rate_limit: RATE,
        fair: true,
        ordered: false,
      },
    ]);
    const deadlocksBefore = await deadlocks();

    // All submitted before any claimer starts: 15 jobs of each group, through the three servers.
    const submitted = new Set<string>();
    for (const [server, client] of fleet.clients.entries()) {
      const jobs = Array.from({ length: JOBS }, (_, n) => n)
        .filter((n) => n % 3 === server)
        .map((n) => ({ queue, task: "groups.rated", groupKey: ratedGroup(n % GROUPS), payload: number(n) }));
      const { results } = await client.submitBatch({ jobs, view: JobView.BASIC });
      for (const r of results) submitted.add(r.job!.id);
    }
    expect(submitted.size).toBe(JOBS);

    const run = new ClaimRun(CLAIMERS * 4);
    const leasedBy = new Map<string, string>();
    const leasedTwice: string[] = [];
    const leasesPerServer = [0, 0, 0];
    const completed = new Set<string>();
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
    await Promise.all(claimers);
    const context = `${completed.size} of ${JOBS} completed; PostgreSQL broke ${(await deadlocks()) - deadlocksBefore} deadlocks meanwhile (in the whole test database)\n${fleet.problems()}`;

    expect(run.failures.map(describeFailure), `claimers failed ${context}`).toEqual([]);
    expect(leasedTwice, "jobs leased twice").toEqual([]);
    expect(completed).toEqual(submitted);
    for (const [server, n] of leasesPerServer.entries()) expect(n, `leases handed out by server ${server}`).toBeGreaterThan(0);
    await expectEachCompletedOnce(queue, submitted, leasedBy);

    // The lease times as the store recorded them (a CLAIMED event's time is its claim's, the time its grant
    // counts at). Per group, the window of one period starting at each lease holds at most RATE leases: the
    // fullest window of any start holds as many as the fullest one starting at a lease.
    const { rows } = await fleet.db.query<{ group_key: string; times: string[] }>(
      `SELECT group_key, array_agg(event_time ORDER BY event_time) AS times FROM ${table("job_events")}
       WHERE queue = $1 AND kind = 'claimed' GROUP BY group_key ORDER BY group_key`,
      [queue],
    );
    expect(rows.map((r) => [r.group_key, r.times.length])).toEqual(Array.from({ length: GROUPS }, (_, g) => [ratedGroup(g), PER_GROUP]));
    const tooMany: string[] = [];
    let fullest = 0; // most leases of one group seen in one window
    for (const { group_key, times } of rows) {
      const t = times.map(Number);
      for (let i = 0; i < t.length; i++) {
        const inWindow = t.filter((x) => x >= t[i] && x < t[i] + PERIOD_MS).length;
        fullest = Math.max(fullest, inWindow);
        if (inWindow > RATE) tooMany.push(`${group_key}: ${inWindow} leases from ${t[i]} to ${t[i + inWindow - 1]} (ms)`);
      }
    }
    expect(tooMany.slice(0, 5), "windows of one period holding more leases of a group than group_rate_limit").toEqual([]);
    // The claimers, which without the limit would take every job at once, did press against it.
    expect(fullest, "most leases of one group in one window").toBe(RATE);
  }, 60_000);
});
