#!/usr/bin/env node
/**
 * Fan-out and fan-in (docs/performance.md "Workflows"; docs/api.md
 * "Dependencies"), through the store in this process, on each engine:
 *
 * - fan-out: one job with N dependents completes; the one transaction that
 *   completes it releases all N. Its wall and CPU time per released edge,
 *   for two N: flat when the release costs O(1) per edge.
 * - fan-in: M jobs complete, one by one in batches of 100, while one job
 *   waits on all of them, against the same M jobs with nothing waiting:
 *   the cost a dependent adds to each completion, for two M (flat when a
 *   completion costs the same whether 1 or 999 of the others are done: no
 *   scan of the waiting job's dependencies).
 *
 * Each scenario runs on a fresh database; the runs alternate. Prints the
 * figures and checks the outcome (every dependent released); asserts no time.
 *
 *   npm run build && node bench/workflows.mjs [--rounds=3] [--engines=sqlite,postgres]
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { newJob } from "./lib/new-job.mjs";
import { POSTGRES_URL, postgresAvailable } from "./lib/peers.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    engines: { type: "string", default: "sqlite,postgres" },
  },
});

const { openSqliteStore } = await import("../dist/src/store/sqlite/sqlite-store.js");
const { openPgStore } = await import("../dist/src/store/postgres/pg-store.js");
const { systemClock } = await import("../dist/src/domain/clock.js");
const pg = (await import("pg")).default;

const job = (queue, dependsOn = []) => ({
  ...newJob(0),
  queue,
  ...(dependsOn.length > 0 ? { dependencies: { ids: dependsOn, refs: [], refIndexes: [], policy: "wait", path: "" } } : {}),
});

/** A fresh store of `engine`, and how to throw it away. */
async function freshStore(engine) {
  if (engine === "sqlite") {
    const dir = mkdtempSync(join(HERE, ".data", "workflows-"));
    const store = openSqliteStore({ path: join(dir, "bench.db"), clock: systemClock, synchronous: "normal" });
    return { store, dispose: async () => (await store.close(), rmSync(dir, { recursive: true, force: true })) };
  }
  const schema = `bench_workflows_${process.pid}_${Math.floor(Math.random() * 1e9)}`;
  const store = await openPgStore({ url: POSTGRES_URL, schema, clock: systemClock, poolSize: 10, statementTimeoutMs: 0 });
  return {
    store,
    dispose: async () => {
      await store.close();
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    },
  };
}

async function submitInBatches(store, specs) {
  const jobs = [];
  for (let i = 0; i < specs.length; i += 500) jobs.push(...(await store.submit(specs.slice(i, i + 500))).map((o) => o.job));
  return jobs;
}

async function claim(store, queue, maxJobs) {
  return (await store.claimOutcome({ queue, workerId: "w", leaseDurationMs: 600_000, maxJobs })).leases;
}

/** Time and CPU of `run`, in µs. */
async function measured(run) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await run();
  const cpu = process.cpuUsage(cpu0);
  return { wallUs: (performance.now() - t0) * 1000, cpuUs: cpu.user + cpu.system };
}

/** One job with `n` dependents completes: µs per released edge. */
async function fanOut(engine, n) {
  const { store, dispose } = await freshStore(engine);
  const [root] = await submitInBatches(store, [job("root")]);
  await submitInBatches(
    store,
    Array.from({ length: n }, () => job("out", [root.id])),
  );
  const [lease] = await claim(store, "root", 1);
  const t = await measured(() => store.complete(root.id, lease.leaseToken, null));
  const counts = (await store.queueCounts()).find((q) => q.queue === "out").counts;
  if (counts.queued !== n || counts.waiting !== 0) throw new Error(`fan-out ${n}: ${JSON.stringify(counts)}`);
  await dispose();
  return { wallPerEdge: t.wallUs / n, cpuPerEdge: t.cpuUs / n };
}

/** `m` jobs complete, with one job waiting on all of them or not: µs per completion. */
async function fanIn(engine, m, waited) {
  const { store, dispose } = await freshStore(engine);
  const deps = await submitInBatches(
    store,
    Array.from({ length: m }, () => job("in")),
  );
  const [callback] = waited
    ? await submitInBatches(store, [
        job(
          "callback",
          deps.map((d) => d.id),
        ),
      ])
    : [];
  const t = await measured(async () => {
    for (;;) {
      const leases = await claim(store, "in", 100);
      if (leases.length === 0) break;
      await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
    }
  });
  if (waited) {
    const after = await store.getJob(callback.id);
    if (after.state !== "queued" || after.dependencyCounts.completed !== m) throw new Error(`fan-in ${m}: ${JSON.stringify(after)}`);
  }
  await dispose();
  return { wallPerJob: t.wallUs / m, cpuPerJob: t.cpuUs / m };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x) => x.toFixed(1).padStart(7);

mkdirSync(join(HERE, ".data"), { recursive: true });
const engines = [];
for (const engine of args.engines.split(",")) {
  if (engine === "sqlite") engines.push(engine);
  else if (engine === "postgres") {
    const up = await postgresAvailable();
    if (up.ok) engines.push(engine);
    else console.log(`postgres skipped: ${up.why}`);
  } else throw new Error(`--engines: "sqlite" or "postgres", not "${engine}"`);
}
const rounds = Number(args.rounds);
console.log(`workflows: fan-out of 1,000 and 10,000 dependents, fan-in of 100 and 1,000 dependencies, ${rounds} rounds (median)`);
for (const engine of engines) {
  const out = { 1000: [], 10000: [] };
  const inWith = { 100: [], 1000: [] };
  const inWithout = { 100: [], 1000: [] };
  for (let r = 0; r < rounds; r++) {
    for (const n of r % 2 === 0 ? [1000, 10000] : [10000, 1000]) out[n].push(await fanOut(engine, n));
    for (const m of [100, 1000]) {
      for (const waited of r % 2 === 0 ? [true, false] : [false, true])
        (waited ? inWith : inWithout)[m].push(await fanIn(engine, m, waited));
    }
  }
  for (const n of [1000, 10000]) {
    console.log(
      `  ${engine.padEnd(8)} fan-out ${String(n).padStart(6)} dependents released by one Complete: ` +
        `wall ${f(median(out[n].map((x) => x.wallPerEdge)))} µs/edge, cpu ${f(median(out[n].map((x) => x.cpuPerEdge)))} µs/edge`,
    );
  }
  for (const m of [100, 1000]) {
    const w = median(inWith[m].map((x) => x.cpuPerJob));
    const wo = median(inWithout[m].map((x) => x.cpuPerJob));
    console.log(
      `  ${engine.padEnd(8)} fan-in  ${String(m).padStart(6)} completions: cpu ${f(w)} µs/job with one job waiting on all, ` +
        `${f(wo)} without (+${(w - wo).toFixed(1)} µs per edge); wall ${f(median(inWith[m].map((x) => x.wallPerJob)))} against ${f(median(inWithout[m].map((x) => x.wallPerJob)))}`,
    );
  }
}
