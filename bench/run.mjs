#!/usr/bin/env node
/**
 * `npm run bench`: LeaseQueue's throughput and latency, next to the ceilings
 * of its two layers and to peer job queues, in one run on one machine.
 *
 * The server under test is `node bin/leasequeue.js serve` in its own process
 * on a fresh SQLite file on a real disk; every client is a separate Node
 * process (gRPC over HTTP/2, @connectrpc/connect-node createGrpcTransport).
 * Workload, the same for every system: JOBS jobs with payload {"i": n},
 * 8 producers (2 processes x 4), 16 worker slots (4 processes x 4); end to
 * end = first submit to last completion, and every job must be completed
 * exactly once (checked from the payloads the workers saw).
 *
 * Ceilings (same run): the in-process SQLite loop (insert -> claim ->
 * complete; 1 and 100 jobs per transaction) and a do-nothing handler on the
 * same gRPC transport (calls/s with 64 concurrent callers). Unary figures
 * are shown as a ratio of (do-nothing calls/s / 3), since a job needs at
 * least three calls; batched ones as a ratio of the 100-per-commit loop.
 *
 *   npm run bench                 full run with peers (several minutes)
 *   npm run bench -- --quick      smaller sizes, no (c), no peers unless named with --peers (< 1 min)
 *   npm run bench -- --no-peers   LeaseQueue and ceilings only
 *   options: --scenarios=a,a2,b,c,d,e  --peers=graphile-worker,pg-boss,bullmq,rabbitmq
 *            ((a2) is (a) with each job's Complete carried by the next Claim: two calls per job;
 *            a scenario named twice runs twice, e.g. --scenarios=b,e,e,b: both orders, so drift cancels)
 *            --jobs=N (every throughput phase: N jobs instead of 5,000, quick 1,000; time limits grow with it)
 *            --groups=10000 ((e)'s distinct group keys; (e) needs --jobs of at least 2 per group)
 *            --submit-first (every batched scenario submits all its jobs first, as (e) always does, so that
 *            (b) against (e) compares claim phases; see (e) below)
 *            --engines=sqlite,postgres (default both; --quick: sqlite) — the PostgreSQL rows
 *            run the same scenarios on the local PostgreSQL, a fresh schema each
 *            --cpu-prof (an extra profiled run of (b); top self-time functions)
 *            --cpu-prof-scenario=a|a2|b|d|e (the scenario that run profiles, default b; (e): its claim phase)
 *            --synchronous=normal (server and SQLite ceiling without an fsync per commit)
 *            --out=FILE (default bench/results/<timestamp>.json)
 *            --payload=order (LeaseQueue rows only: each job's payload is {"i": n} beside an order of
 *            about 700 bytes of JSON, leasequeue-drivers.mjs ORDER, instead of {"i": n} alone)
 *            --no-sdks (skip the worker SDKs' throughput, bench/sdks.mjs, run last in a full run)
 *            --taskset / --no-taskset (default on in a full run, off with --quick): after the SQLite rows,
 *            (b) again with the server under `taskset -c 0` and `taskset -c 0,1`, clients unpinned
 *            --taskset-scenarios=b (default b: which scenarios get those rows)
 *            --otel: after the SQLite rows, (b) again with the server exporting its spans
 *            (OTEL_TRACES_EXPORTER=otlp) to a local OTLP receiver, beside (b) without
 *
 * CPU per job is counted wherever it is spent: the server, the client
 * processes and the database's processes (every postgres process, or
 * redis-server; SQLite runs inside the server), and their total.
 *
 * (e) is (b) on a fair queue with its jobs spread over 10,000 groups
 * (docs/api.md "Groups"): the same producers, workers, batches and job
 * count, but `fair` is set with UpdateQueue (update_mask "fair") and the
 * queue paused before the first submit, job i gets group_key g<i mod
 * 10,000>, and the queue is resumed only once every SubmitBatch is
 * answered. So every claim runs against a backlog in which all 10,000
 * groups hold eligible jobs (checked with ListGroups before the resume:
 * 10,000 groups, every job queued), until the last round of the fair
 * walk drains them: with k jobs per group (--jobs=50000: 5) the first
 * (k-1)/k of the claims see all 10,000 groups. The submit phase (first
 * submit to last answer) and the claim phase (resume answered to last
 * completion) are measured apart, the check and the resume between them
 * in neither; the row's end-to-end rate and CPU are the two phases
 * summed. Claim cost per job = the server's CPU over the claim phase /
 * jobs (on PostgreSQL plus the database's CPU over the same phase): the
 * leases, the acknowledgements and their commits; the printed
 * comparison sets it against (b)'s from the same run, with the claim
 * phases' jobs/s. (b) has a claim phase only with --submit-first
 * (otherwise producers and workers overlap); without it the comparison
 * falls back to whole job lives (submit + claim + complete), which the
 * two shapes share but overlap differently. (e) has no latency phase.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync, renameSync } from "node:fs";
import { createHash } from "node:crypto";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as pb from "../dist/gen/ts/leasequeue/v1/leasequeue_pb.js";
import { MIGRATIONS } from "../dist/src/store/sqlite/migrations.js";
import { forkChild } from "./lib/children.mjs";
import { seedHistory } from "./lib/history.mjs";
import { startLeaseQueueServer, tasksetUnavailable } from "./lib/leasequeue-server.mjs";
import { selectDriver } from "./lib/leasequeue-drivers.mjs";
import { PEERS, POSTGRES_URL, postgresAvailable } from "./lib/peers.mjs";
import { analyzePgSchema, dropPgSchema, seedPgHistory } from "./lib/pg-history.mjs";
import { daemonCpuMeter, inServerProcessMeter, postgresCpuMeter } from "./lib/db-cpu.mjs";
import { mib, processCpuMs } from "./lib/proc.mjs";
import { latencySummary, nowMs, sleep } from "./lib/timing.mjs";
import { printReport } from "./lib/report.mjs";
import { verifyExactlyOnce } from "./lib/verify.mjs";
import { layerBudget, topSelfTime } from "./lib/cpu-profile.mjs";
import { startOtlpReceiver } from "./lib/otlp-receiver.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
/** Now in microseconds of CLOCK_MONOTONIC: the clock of V8's .cpuprofile timestamps, in any process. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
const CHILD = (name) => join(HERE, "children", name);

/** This file's opening comment from its usage lines on: what --help prints, and what a wrong option is answered with. */
function usage() {
  const text = readFileSync(fileURLToPath(import.meta.url), "utf8");
  const from = text.indexOf(" *   npm run bench ");
  const to = text.indexOf("*/", from);
  return text
    .slice(from, to)
    .replace(/^ \* ?/gm, "")
    .trimEnd();
}

const { values: args } = (() => {
  try {
    return parseArgs({
      options: {
        quick: { type: "boolean", default: false },
        peers: { type: "string" },
        "no-peers": { type: "boolean", default: false },
        scenarios: { type: "string" },
        "cpu-prof": { type: "boolean", default: false },
        "cpu-prof-scenario": { type: "string", default: "b" },
        jobs: { type: "string" },
        groups: { type: "string", default: "10000" },
        "submit-first": { type: "boolean", default: false },
        synchronous: { type: "string", default: "full" },
        engines: { type: "string" },
        out: { type: "string" },
        "no-sdks": { type: "boolean", default: false },
        taskset: { type: "boolean", default: false },
        "no-taskset": { type: "boolean", default: false },
        "taskset-scenarios": { type: "string", default: "b" },
        otel: { type: "boolean", default: false },
        payload: { type: "string", default: "small" },
        help: { type: "boolean", default: false },
      },
    });
  } catch (err) {
    console.error(`bench/run.mjs: ${err.message}\n\n${usage()}`);
    process.exit(2);
  }
})();
if (args.help) {
  console.log(usage());
  process.exit(0);
}

/** A positive integer option, or its default. */
function countOption(name, fallback) {
  if (args[name] === undefined) return fallback;
  const n = Number(args[name]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: a positive integer, not "${args[name]}"`);
  return n;
}

/** Fixed sizes, so that runs compare. */
const SIZES = args.quick
  ? {
      jobs: 1000,
      latencySamples: 50,
      latencyWarmup: 10,
      historyJobs: 0,
      watchers: 1000,
      watcherConnections: 50,
      noopCalls: 2000,
      sqliteBatch1Jobs: 500,
      sqliteBatch100Jobs: 5000,
      scenarioTimeoutMs: 40_000,
      peerTimeoutMs: 40_000,
      peerLatencySamples: 50,
    }
  : {
      jobs: 5000,
      latencySamples: 500,
      latencyWarmup: 20,
      historyJobs: 1_000_000,
      watchers: 1000,
      watcherConnections: 50,
      noopCalls: 20_000,
      sqliteBatch1Jobs: 5000,
      sqliteBatch100Jobs: 50_000,
      scenarioTimeoutMs: 120_000,
      peerTimeoutMs: 60_000,
      peerLatencySamples: 200,
    };
// --jobs: every throughput phase's job count; its time limits grow in proportion.
{
  const jobs = countOption("jobs", SIZES.jobs);
  const scale = Math.max(1, jobs / SIZES.jobs);
  SIZES.jobs = jobs;
  SIZES.scenarioTimeoutMs = Math.round(SIZES.scenarioTimeoutMs * scale);
  SIZES.peerTimeoutMs = Math.round(SIZES.peerTimeoutMs * scale);
}
/** (e)'s distinct group keys (--groups). */
const GROUPS = countOption("groups", 10_000);
/** Client layout: 8 producers and 16 worker slots, as processes x per process. */
const LAYOUT = { producerProcesses: 2, producersPerProcess: 4, workerProcesses: 4, slotsPerWorker: 4, maxInFlight: 64, batchSize: 100 };

const SCENARIOS = {
  a: { name: "(a) unary", kind: "unary", driver: "submit+claim+complete" },
  a2: { name: "(a2) unary with acks", kind: "unary", driver: "submit+claim-with-acks" },
  b: { name: "(b) batched", kind: "batched" },
  c: { name: "(c) batched, 1M completed in the table", kind: "batched", history: true },
  d: { name: "(d) batched, 1000 idle WatchEvents", kind: "batched", watchers: true },
  // The header comment says how (e) keeps every group eligible while it claims.
  e: {
    name: `(e) batched, fair queue, ${GROUPS.toLocaleString("en")} groups, submitted first`,
    kind: "batched",
    fair: true,
    groups: GROUPS,
    submitFirst: true,
    noLatency: true,
  },
};
if (args["submit-first"])
  for (const s of Object.values(SCENARIOS))
    if (s.kind === "batched" && !s.submitFirst) Object.assign(s, { submitFirst: true, name: `${s.name}, submitted first` });
if (!["full", "normal"].includes(args.synchronous)) throw new Error(`--synchronous: "full" or "normal", not "${args.synchronous}"`);
const wantedScenarios = (args.scenarios ?? (args.quick ? "a,a2,b,d" : "a,a2,b,c,d"))
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
const wantedEngines = (args.engines ?? (args.quick ? "sqlite" : "sqlite,postgres"))
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
for (const e of wantedEngines) if (!["sqlite", "postgres"].includes(e)) throw new Error(`--engines: "sqlite" or "postgres", not "${e}"`);
for (const s of wantedScenarios)
  if (SCENARIOS[s] === undefined) throw new Error(`--scenarios: unknown scenario "${s}" (${Object.keys(SCENARIOS).join(", ")})`);
const PROFILABLE = ["a", "a2", "b", "d", "e"];
if (args["cpu-prof"] && !PROFILABLE.includes(args["cpu-prof-scenario"]))
  throw new Error(`--cpu-prof-scenario: one of ${PROFILABLE.join(", ")}, not ${args["cpu-prof-scenario"]}`);
if ((wantedScenarios.includes("e") || (args["cpu-prof"] && args["cpu-prof-scenario"] === "e")) && SIZES.jobs < 2 * GROUPS)
  throw new Error(
    `(e) needs at least 2 jobs per group, so that its groups still hold eligible jobs while it claims: --jobs=${2 * GROUPS} or more (e.g. --jobs=${5 * GROUPS}), or fewer --groups`,
  );
const wantedPeers =
  args["no-peers"] || (args.quick && args.peers === undefined)
    ? []
    : (args.peers ?? Object.keys(PEERS).join(","))
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
if (!["small", "order"].includes(args.payload)) throw new Error(`--payload: "small" or "order", not "${args.payload}"`);
if (args.payload !== "small" && wantedPeers.length > 0)
  throw new Error('--payload=order: the peers\' drivers send {"i": n} only; add --no-peers');
for (const p of wantedPeers) if (PEERS[p] === undefined) throw new Error(`--peers: unknown peer "${p}" (${Object.keys(PEERS).join(", ")})`);
/** The pinned server's cores, one then two: what a second core buys the server (the clients stay unpinned). */
const PINNINGS = [
  { cpus: "0", label: "server on 1 core" },
  { cpus: "0,1", label: "server on 2 cores" },
];
const wantTaskset = !args["no-taskset"] && (args.taskset || !args.quick);
const tasksetScenarios = wantTaskset
  ? args["taskset-scenarios"]
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean)
  : [];
for (const s of tasksetScenarios)
  if (SCENARIOS[s] === undefined) throw new Error(`--taskset-scenarios: unknown scenario "${s}" (${Object.keys(SCENARIOS).join(", ")})`);

// ------------------------------------------------------------------ setup

const DATA_DIR = join(HERE, ".data");
const RESULTS_DIR = join(HERE, "results");
mkdirSync(DATA_DIR, { recursive: true });
mkdirSync(RESULTS_DIR, { recursive: true });
const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;
const fsType = statfsSync(DATA_DIR).type;
if (fsType === TMPFS_MAGIC || fsType === RAMFS_MAGIC)
  throw new Error(`${DATA_DIR} is on a RAM file system; the bench needs a real disk (fsync must cost what it costs)`);

const runId = new Date().toISOString().replace(/[:.]/g, "-");
const runDir = join(DATA_DIR, `run-${runId}`);
mkdirSync(runDir);
process.on("exit", () => rmSync(runDir, { recursive: true, force: true }));

function machine() {
  let disk = "unknown";
  try {
    const mounts = readFileSync("/proc/mounts", "utf8")
      .split("\n")
      .map((l) => l.split(" "));
    const best = mounts.filter((m) => m[1] && DATA_DIR.startsWith(m[1])).sort((x, y) => y[1].length - x[1].length)[0];
    if (best) disk = `${best[0]} (${best[2]}) mounted at ${best[1]}`;
  } catch {
    // no /proc/mounts
  }
  return {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    memoryGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
    loadAverage: os.loadavg().map((x) => Number(x.toFixed(2))),
    kernel: os.release(),
    node: process.version,
    disk,
    dataDir: DATA_DIR,
  };
}

const t0 = performance.now();
const log = (msg) => process.stderr.write(`[bench ${((performance.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}\n`);

function producerRanges(n) {
  const total = LAYOUT.producerProcesses * LAYOUT.producersPerProcess;
  const per = Math.ceil(n / total);
  const ranges = [];
  for (let k = 0; k < total; k++) ranges.push([Math.min(n, k * per), Math.min(n, (k + 1) * per)]);
  const byProcess = [];
  for (let p = 0; p < LAYOUT.producerProcesses; p++)
    byProcess.push(ranges.slice(p * LAYOUT.producersPerProcess, (p + 1) * LAYOUT.producersPerProcess));
  return byProcess;
}

/**
 * The throughput phase shared by every system: workers ready, producers
 * ready, go; producers report their first and last submit; workers report
 * progress until every job is done (or the time limit), then their
 * completions. `storeDone` (peers, and drivers whose completions are
 * answered late) is polled after the workers have seen every job, and its
 * time is the end of the run. CPU over the phase: `serverMeter` (sync
 * start/stop; none for the peers, which have no server process), the client
 * processes, and `dbMeterFor(clientPids)` (bench/lib/db-cpu.mjs).
 *
 * `claimGate` (submit first: the queue is paused while the producers
 * submit) is awaited once every producer is done; it checks the backlog
 * and resumes the queue, and answers what it saw. The submit phase (go to
 * the producers' last answer) and the claim phase (after claimGate to the
 * end) are metered apart, the gate in neither; the phase's figures are
 * their sums, and `claimPhase` has the claim phase's own.
 */
async function throughputPhase({
  label,
  workerScript,
  workerConfig,
  producerScript,
  producerConfig,
  n,
  timeoutMs,
  serverMeter,
  dbMeterFor,
  storeDone,
  claimGate,
}) {
  const readyTimeout = 60_000;
  const workers = Array.from({ length: LAYOUT.workerProcesses }, (_, k) =>
    forkChild(workerScript, { ...workerConfig(k), role: "worker", timeLimitMs: timeoutMs + 120_000 }, `${label} worker ${k}`),
  );
  const producers = producerRanges(n).map((ranges, k) =>
    forkChild(
      producerScript,
      { ...producerConfig, role: "producer", producers: ranges, timeLimitMs: timeoutMs + 120_000 },
      `${label} producer ${k}`,
    ),
  );
  try {
    await Promise.all([...workers, ...producers].map((c) => c.next("ready", readyTimeout)));
    log(`  ${label}: ${workers.length} worker and ${producers.length} producer processes ready`);
    const counts = new Array(workers.length).fill(0);
    let allHandled;
    const handled = new Promise((resolve) => (allHandled = resolve));
    workers.forEach((w, k) =>
      w.on("progress", (m) => {
        counts[k] = m.completed;
        if (counts.reduce((a, b) => a + b, 0) >= n) allHandled();
      }),
    );
    const clientPids = [...workers, ...producers].map((c) => c.pid);
    // The client processes' own CPU over the same phase (their protocol and decoding work shares the 2 cores with the server).
    const clientCpuNow = () => clientPids.map((pid) => processCpuMs(pid));
    const clientCpuSince = (before) => clientCpuNow().reduce((sum, ms, k) => sum + ((ms ?? before[k]) - before[k]), 0);
    let dbMeter = dbMeterFor(clientPids);
    dbMeter.start();
    serverMeter?.start();
    let clientCpuBefore = clientCpuNow().map((ms) => ms ?? 0);
    const goAt = nowMs();
    const goUs = monotonicUs();
    for (const p of producers) p.send({ type: "go" });
    const produced = Promise.all(producers.map((p) => p.next("done", timeoutMs)));
    produced.catch(() => {});
    let timer;
    const timedOut = new Promise((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
    let submitPhase;
    let claimStart;
    if (claimGate !== undefined && (await Promise.race([produced.then(() => "produced"), timedOut])) === "produced") {
      const { ms: dbCpuMs, ...dbCpu } = await dbMeter.stop();
      submitPhase = { serverCpuMs: serverMeter?.stop() ?? null, clientCpuMs: clientCpuSince(clientCpuBefore), dbCpuMs, dbCpu };
      const gate = await claimGate();
      dbMeter = dbMeterFor(clientPids);
      dbMeter.start();
      serverMeter?.start();
      clientCpuBefore = clientCpuNow().map((ms) => ms ?? 0);
      claimStart = { at: nowMs(), us: monotonicUs(), gate };
    }
    let outcome = await Promise.race([handled.then(() => "handled"), timedOut, produced.then(() => new Promise(() => {}))]).finally(() =>
      clearTimeout(timer),
    );
    let end;
    let storeCheck;
    if (outcome === "handled" && storeDone !== undefined) {
      const deadline = goAt + timeoutMs;
      for (;;) {
        storeCheck = await storeDone();
        if (storeCheck.done >= n || nowMs() > deadline) break;
        await sleep(25);
      }
      end = nowMs();
      if (storeCheck.done < n) outcome = "store-timeout";
    }
    // With claimGate these are the claim phase's; the submit phase's are added below.
    let serverCpuMs = serverMeter === undefined ? null : serverMeter.stop();
    const window = { fromUs: goUs, toUs: monotonicUs() };
    let clientCpuMs = clientCpuSince(clientCpuBefore);
    let { ms: dbCpuMs, ...dbCpuSplit } = await dbMeter.stop();
    const produceResults = outcome === "handled" ? await produced : await Promise.race([produced, sleep(1000).then(() => [])]);
    const results = await Promise.all(workers.map((w) => (w.send({ type: "stop" }), w.next("result", 30_000))));
    const check = verifyExactlyOnce(
      results.map((r) => r.completed),
      n,
    );
    const first = Math.min(...produceResults.map((r) => r.first));
    const lastSubmit = Math.max(...produceResults.map((r) => r.last));
    end ??= Math.max(...results.map((r) => r.last));
    const submitCalls = produceResults.reduce((a, r) => a + r.calls, 0);
    let claimPhase;
    // first submit -> last completion; submitted first: the submit phase and the claim phase, without the gate between them
    let e2eMs = end - first;
    if (claimStart !== undefined) {
      const ms = end - claimStart.at;
      claimPhase = {
        seconds: ms / 1000,
        jobsPerSec: outcome === "handled" ? n / (ms / 1000) : null,
        serverCpuMs,
        serverCpuMsPerJob: serverCpuMs === null ? null : serverCpuMs / n,
        clientCpuMsPerJob: clientCpuMs / n,
        dbCpuMsPerJob: dbCpuMs / n,
        totalCpuMsPerJob: ((serverCpuMs ?? 0) + clientCpuMs + dbCpuMs) / n,
        gate: claimStart.gate,
        gateSeconds: (claimStart.at - Math.max(lastSubmit, goAt)) / 1000,
        window: { fromUs: claimStart.us, toUs: window.toUs },
      };
      e2eMs = lastSubmit - first + ms;
      serverCpuMs = serverCpuMs === null ? null : serverCpuMs + submitPhase.serverCpuMs;
      clientCpuMs += submitPhase.clientCpuMs;
      dbCpuMs += submitPhase.dbCpuMs;
      // PostgreSQL's split (db-cpu.mjs): milliseconds add up, backend counts do not.
      for (const [k, v] of Object.entries(submitPhase.dbCpu))
        if (typeof v === "number") dbCpuSplit[k] = k.endsWith("Ms") ? (dbCpuSplit[k] ?? 0) + v : Math.max(dbCpuSplit[k] ?? 0, v);
    }
    return {
      outcome,
      check,
      storeCheck,
      enqueueJobsPerSec: produceResults.length === producers.length ? n / ((lastSubmit - first) / 1000) : null,
      e2eJobsPerSec: outcome === "handled" ? n / (e2eMs / 1000) : null,
      partialJobsPerSec: outcome === "handled" ? null : check.completions / ((nowMs() - goAt) / 1000),
      e2eSeconds: outcome === "handled" ? e2eMs / 1000 : null,
      submitCalls,
      serverCpuMs,
      serverCpuSeconds: serverCpuMs === null ? null : serverCpuMs / 1000,
      serverCpuMsPerJob: serverCpuMs === null ? null : serverCpuMs / n,
      clientCpuMs,
      clientCpuMsPerJob: clientCpuMs / n,
      dbCpuMs,
      dbCpuMsPerJob: dbCpuMs / n,
      dbCpu: { processes: dbMeter.database, ...dbCpuSplit },
      totalCpuMsPerJob: ((serverCpuMs ?? 0) + clientCpuMs + dbCpuMs) / n,
      window,
      claimPhase,
    };
  } finally {
    await Promise.all([...workers, ...producers].map((c) => c.stop(3000)));
  }
}

async function latencyPhase(script, config, label) {
  const child = forkChild(script, { ...config, role: "latency", timeLimitMs: 120_000 }, `${label} latency`);
  try {
    await child.next("ready", 60_000);
    child.send({ type: "go" });
    const { samples } = await child.next("done", 110_000);
    return latencySummary(samples);
  } finally {
    await child.kill(3000);
  }
}

// --------------------------------------------------------------- ceilings

async function sqliteCeiling(batch, jobs) {
  const dbPath = join(runDir, `ceiling-${batch}.db`);
  const child = forkChild(
    CHILD("sqlite-ceiling.mjs"),
    { dbPath, jobs, batch, synchronous: args.synchronous, timeLimitMs: 120_000 },
    `sqlite ceiling batch ${batch}`,
  );
  try {
    const r = await child.next("done", 110_000);
    return { batch, jobs: r.jobs, commits: r.commits, seconds: r.ms / 1000, jobsPerSec: r.jobs / (r.ms / 1000) };
  } finally {
    await child.kill(3000);
    rmSync(dbPath, { force: true });
    rmSync(`${dbPath}-wal`, { force: true });
    rmSync(`${dbPath}-shm`, { force: true });
  }
}

async function noopCeiling() {
  const server = forkChild(CHILD("unary-server.mjs"), { variant: "connect-node", timeLimitMs: 120_000 }, "do-nothing server");
  try {
    const { url } = await server.next("ready", 30_000);
    const client = forkChild(
      CHILD("leasequeue-client.mjs"),
      { role: "noop", url, callers: 64, calls: SIZES.noopCalls, warmup: 200, timeLimitMs: 120_000 },
      "do-nothing client",
    );
    try {
      await client.next("ready", 30_000);
      const cpu0 = processCpuMs(server.pid);
      client.send({ type: "go" });
      const r = await client.next("done", 110_000);
      const cpuMs = processCpuMs(server.pid) - cpu0;
      return {
        callers: 64,
        calls: r.calls,
        seconds: r.ms / 1000,
        callsPerSec: r.calls / (r.ms / 1000),
        serverCpuMsPerCall: cpuMs / r.calls,
      };
    } finally {
      await client.kill(3000);
    }
  } finally {
    await server.stop(3000);
  }
}

// ------------------------------------------------------------- LeaseQueue

/** A seeded history file, made once per schema and size and copied for each run (the copy is the fresh database). */
function historyTemplate(count) {
  const schemaHash = createHash("sha256").update(JSON.stringify(MIGRATIONS)).digest("hex").slice(0, 12);
  const file = join(DATA_DIR, `history-${count}-${schemaHash}.db`);
  if (!existsSync(file)) {
    for (const old of readdirSync(DATA_DIR)) if (old.startsWith("history-")) rmSync(join(DATA_DIR, old), { force: true });
    log(`seeding ${count.toLocaleString("en")} completed jobs into a template database (once per schema)`);
    const partial = `${file}.partial`;
    rmSync(partial, { force: true });
    const r = seedHistory(partial, count);
    renameSync(partial, file);
    log(`seeded ${r.jobs} jobs and ${r.events} events in ${(r.ms / 1000).toFixed(1)} s`);
  }
  return file;
}

/**
 * A submitted-first scenario's gate: every job must be queued (GetStats),
 * and with groups every group must hold its share (ListGroups, paged), or
 * the claim phase would not measure what it says; then ResumeQueue.
 * Answers what it saw.
 */
async function checkBacklogAndResume(client, queue, groups, n, postgres) {
  const { queues } = await client.getStats({});
  const queued = Number(queues.find((q) => q.queue === queue)?.queued ?? 0n);
  if (queued !== n) throw new Error(`${queued} of ${n} jobs queued when the claims were to start`);
  let groupsSeen = null;
  if (groups > 0) {
    groupsSeen = 0;
    let jobsInGroups = 0;
    let smallest = Infinity;
    let pageToken = "";
    do {
      const page = await client.listGroups({ queue, pageSize: 1000, pageToken });
      for (const g of page.groups) {
        groupsSeen++;
        jobsInGroups += Number(g.queued);
        smallest = Math.min(smallest, Number(g.queued));
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (groupsSeen !== groups || jobsInGroups !== n)
      throw new Error(`ListGroups: ${groupsSeen} groups holding ${jobsInGroups} queued jobs, not ${groups} holding ${n}`);
    log(`  backlog: ${n} jobs queued in ${groupsSeen} groups (at least ${smallest} each); resuming the queue`);
  } else log(`  backlog: ${n} jobs queued; resuming the queue`);
  // A fresh schema has no statistics yet: without them PostgreSQL may plan a
  // group's claim as a walk over the whole queue.
  if (postgres !== undefined) await analyzePgSchema(postgres.url, postgres.schema);
  await client.resumeQueue({ queue });
  return { queued, groups: groupsSeen };
}

/** One LeaseQueue scenario on a fresh database; `pinning` ({cpus, label}) starts the server under `taskset -c cpus`. */
async function runLeaseQueueScenario(key, { cpuProfDir, traceGc = false, skipLatency = false, engine = "sqlite", pinning, otel } = {}) {
  const scenario = SCENARIOS[key];
  const { driver, unusedBatchedRpcs, submitBatchView } = selectDriver(scenario.kind, pb.LeaseQueueService, pb, scenario.driver);
  const db = join(
    runDir,
    `leasequeue-${key}${cpuProfDir ? "-profiled" : ""}${pinning ? `-cpus-${pinning.cpus.replace(/\W/g, "_")}` : ""}.db`,
  );
  const postgres = engine === "postgres" ? { url: POSTGRES_URL, schema: `bench_leasequeue_${key}` } : undefined;
  if (postgres !== undefined) {
    await dropPgSchema(postgres.url, postgres.schema);
    if (scenario.history) {
      log(`seeding ${SIZES.historyJobs.toLocaleString("en")} completed jobs into PostgreSQL schema ${postgres.schema}`);
      const r = await seedPgHistory(postgres.url, postgres.schema, SIZES.historyJobs);
      log(`seeded ${r.jobs} jobs and ${r.events} events in ${(r.ms / 1000).toFixed(1)} s`);
    }
  } else if (scenario.history) copyFileSync(historyTemplate(SIZES.historyJobs), db);
  const server = await startLeaseQueueServer({
    db,
    postgres,
    cpuProfDir,
    traceGc,
    cpus: pinning?.cpus,
    env: {
      LEASEQUEUE_SQLITE_SYNCHRONOUS: args.synchronous,
      ...(otel === undefined ? {} : { OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_ENDPOINT: otel.url }),
    },
  });
  // What the kernel allows the server, read back (taskset execs node, so the pid is the server's).
  const serverCpusAllowed = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"))?.[1];
  // The server meter's readings: CPU and (traceGc) bytes allocated over the last phase it measured.
  let cpuAtStart = 0;
  let allocatedAtStart = 0;
  let allocatedInPhase = 0;
  log(`  server listening at ${server.url}${pinning ? ` (taskset -c ${pinning.cpus}: Cpus_allowed_list ${serverCpusAllowed})` : ""}`);
  let watchers;
  try {
    const script = CHILD("leasequeue-client.mjs");
    let watchersResult;
    if (scenario.watchers) {
      watchers = forkChild(
        script,
        {
          role: "watchers",
          url: server.url,
          count: SIZES.watchers,
          connections: SIZES.watcherConnections,
          queue: "bench-quiet",
          timeLimitMs: SIZES.scenarioTimeoutMs + 180_000,
        },
        "watchers",
      );
      await watchers.next("ready", 60_000);
      log(`  ${SIZES.watchers} WatchEvents streams open`);
    }
    const stats = driver.storeDone ? createClient(pb.LeaseQueueService, createGrpcTransport({ baseUrl: server.url })) : undefined;
    const control =
      scenario.fair || scenario.submitFirst ? createClient(pb.LeaseQueueService, createGrpcTransport({ baseUrl: server.url })) : undefined;
    if (scenario.fair) {
      // docs/api.md "Groups": a fair queue, set before the first submit (the mask keeps the queue's other fields).
      const { config } = await control.updateQueue({ queue: "bench", config: { fair: true }, updateMask: { paths: ["fair"] } });
      if (config?.fair !== true) throw new Error(`UpdateQueue answered ${JSON.stringify(config)}, not fair`);
    }
    // Submitted first: nothing is leased until every job is in (docs/api.md "Queue controls": PauseQueue).
    if (scenario.submitFirst) await control.pauseQueue({ queue: "bench" });
    const tp = await throughputPhase({
      label: `leasequeue ${key}`,
      workerScript: script,
      workerConfig: (k) => ({
        url: server.url,
        kind: scenario.kind,
        driver: scenario.driver,
        slots: LAYOUT.slotsPerWorker,
        maxInFlight: LAYOUT.maxInFlight,
        queue: "bench",
        workerId: `bench-worker-${k}`,
      }),
      producerScript: script,
      producerConfig: {
        url: server.url,
        kind: scenario.kind,
        driver: scenario.driver,
        batchSize: LAYOUT.batchSize,
        queue: "bench",
        groups: scenario.groups ?? 0,
        payload: args.payload,
      },
      n: SIZES.jobs,
      timeoutMs: SIZES.scenarioTimeoutMs,
      serverMeter: {
        start: () => {
          cpuAtStart = server.cpuMs();
          allocatedAtStart = server.allocatedBytes();
        },
        stop: () => {
          allocatedInPhase = server.allocatedBytes() - allocatedAtStart;
          return server.cpuMs() - cpuAtStart;
        },
      },
      // The PostgreSQL rows: the server's pool connections are the run's backends.
      dbMeterFor: () => (postgres === undefined ? inServerProcessMeter() : postgresCpuMeter(postgres.url, () => [server.pid])),
      storeDone:
        stats === undefined
          ? undefined
          : async () => {
              const { queues } = await stats.getStats({});
              return { done: Number(queues.find((q) => q.queue === "bench")?.completed ?? 0n) };
            },
      claimGate: scenario.submitFirst
        ? () => checkBacklogAndResume(control, "bench", scenario.groups ?? 0, SIZES.jobs, postgres)
        : undefined,
    });
    log(`  throughput phase done: ${tp.outcome}, e2e ${tp.e2eSeconds?.toFixed(1)} s`);
    const latency =
      skipLatency || scenario.noLatency
        ? null
        : await latencyPhase(
            script,
            {
              url: server.url,
              kind: scenario.kind,
              driver: scenario.driver,
              samples: SIZES.latencySamples,
              warmup: SIZES.latencyWarmup,
              queue: "latency",
            },
            `leasequeue ${key}`,
          );
    if (watchers !== undefined) {
      watchers.send({ type: "stop" });
      watchersResult = await watchers.next("result", 30_000);
      if (watchersResult.stillOpen !== SIZES.watchers)
        throw new Error(`only ${watchersResult.stillOpen} of ${SIZES.watchers} WatchEvents streams were still open at the end`);
    }
    log("  latency phase done");
    const warnings = server.warnings();
    const final = await server.stop();
    log("  server stopped");
    return {
      scenario: scenario.name,
      key,
      kind: scenario.kind,
      system:
        (engine === "postgres"
          ? "leasequeue on postgresql"
          : args.synchronous === "full"
            ? "leasequeue"
            : `leasequeue (synchronous=${args.synchronous})`) +
        (pinning ? `, ${pinning.label}` : "") +
        (otel ? ", spans exported over OTLP" : ""),
      engine,
      serverCpus: pinning === undefined ? undefined : { taskset: `taskset -c ${pinning.cpus}`, cpusAllowed: serverCpusAllowed },
      api: driver.label,
      driver: driver.key,
      callsPerJob: driver.callsPerJob,
      submitBatchView: scenario.kind === "batched" ? submitBatchView : undefined,
      batchedRpcsNotUsed: unusedBatchedRpcs.length > 0 ? unusedBatchedRpcs : undefined,
      latencyOn: latency === null ? undefined : driver.latencyLabel,
      ...tp,
      // Over the last phase measured: the claim phase when submitted first, else the whole throughput phase.
      allocatedBytesPerJob: traceGc ? allocatedInPhase / SIZES.jobs : undefined,
      latency,
      peakRssMiB: mib(final.peakRssBytes),
      watchers:
        watchersResult === undefined
          ? undefined
          : { streams: SIZES.watchers, connections: SIZES.watcherConnections, eventsReceived: watchersResult.events },
      historyJobs: scenario.history ? SIZES.historyJobs : 0,
      fair: scenario.fair === true,
      groups: scenario.groups ?? 0,
      submitFirst: scenario.submitFirst === true,
      serverWarnings: warnings.slice(0, 5),
      otlpReceived: otel?.stats(),
    };
  } finally {
    await watchers?.kill(3000);
    await server.stop();
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${db}${suffix}`, { force: true });
    if (postgres !== undefined) await dropPgSchema(postgres.url, postgres.schema);
  }
}

// ------------------------------------------------------------------ peers

async function runPeer(name) {
  const peer = PEERS[name];
  const availability = await peer.available();
  const version = await peer.version();
  if (!availability.ok) return [{ system: name, version, skipped: availability.why }];
  const rows = [];
  const script = CHILD("peer-client.mjs");
  let latency;
  for (const kind of ["unary", "batched"]) {
    const setup = await peer.setup();
    try {
      log(`${name} ${version}, ${kind}`);
      const tp = await throughputPhase({
        label: `${name} ${kind}`,
        workerScript: script,
        workerConfig: () => ({ system: name, setup, kind, slots: LAYOUT.slotsPerWorker, prefetch: LAYOUT.maxInFlight }),
        producerScript: script,
        producerConfig: { system: name, setup, kind, batchSize: LAYOUT.batchSize },
        n: SIZES.jobs,
        timeoutMs: SIZES.peerTimeoutMs,
        // No server process: the library runs in the clients, the rest is the database's CPU.
        dbMeterFor: (clientPids) =>
          peer.daemon === "postgres" ? postgresCpuMeter(POSTGRES_URL, () => clientPids) : daemonCpuMeter(peer.daemon),
        storeDone: () => peer.finished(SIZES.jobs, setup),
      });
      if (kind === "batched") {
        const samples = name === "pg-boss" ? Math.min(20, SIZES.peerLatencySamples) : SIZES.peerLatencySamples;
        latency = await latencyPhase(script, { system: name, setup, samples, warmup: 3 }, name);
      }
      rows.push({
        scenario: kind === "unary" ? SCENARIOS.a.name : SCENARIOS.b.name,
        key: kind === "unary" ? "a" : "b",
        kind,
        system: name,
        version,
        api: PEER_API[name][kind],
        durability: availability.durability,
        ...tp,
        peakRssMiB: null,
      });
    } finally {
      await peer.teardown(setup);
    }
  }
  // one idle-worker latency per peer, measured after the batched run
  for (const r of rows) r.latency = latency;
  for (const r of rows) r.latencyOn = "idle worker (one measurement per peer)";
  return rows;
}

const PEER_API = {
  "graphile-worker": { unary: "addJob; run(concurrency 4)/process", batched: "addJobs(100); localQueue 64 + batched completes" },
  "pg-boss": { unary: "send; 4 x work(batchSize 1, poll 0.5 s)/process", batched: "insert(100); work(batchSize 64, poll 0.5 s)/process" },
  bullmq: { unary: "add; Worker(concurrency 4)/process", batched: "addBulk(100); Worker(concurrency 64)/process" },
  rabbitmq: {
    unary: "publish, confirmed; quorum queue; consume(prefetch 4), ack/process",
    batched: "100 publishes, confirmed together; quorum queue; consume(prefetch 64), ack/process",
  },
};

// ------------------------------------------------------------------- main

const startedAt = new Date();
const report = {
  startedAt: startedAt.toISOString(),
  mode: args.quick ? "quick" : "full",
  machine: machine(),
  sizes: SIZES,
  payload: args.payload,
  layout: LAYOUT,
  transport:
    "gRPC over HTTP/2 (h2c), @connectrpc/connect-node createGrpcTransport, binary protobuf, one connection per producer and per worker process",
  serverCommand: `node bin/leasequeue.js serve --db <fresh file> --port 0 --metrics-port 0 (LEASEQUEUE_SQLITE_SYNCHRONOUS=${args.synchronous}); PostgreSQL rows: --database-url ${POSTGRES_URL} --database-schema <fresh schema>`,
  engines: wantedEngines,
  synchronous: args.synchronous,
  ceilings: {},
  rows: [],
  skipped: [],
};

log(`mode ${report.mode}; data on ${report.machine.disk}; ${report.machine.cpus} CPUs; load ${report.machine.loadAverage.join(" ")}`);
log("ceiling: in-process SQLite loop, batch 1");
report.ceilings.sqliteBatch1 = await sqliteCeiling(1, SIZES.sqliteBatch1Jobs);
log("ceiling: in-process SQLite loop, batch 100");
report.ceilings.sqliteBatch100 = await sqliteCeiling(100, SIZES.sqliteBatch100Jobs);
log("ceiling: do-nothing gRPC handler, 64 callers");
report.ceilings.noopGrpc = await noopCeiling();

for (const engine of wantedEngines) {
  if (engine === "postgres") {
    const availability = await postgresAvailable();
    if (!availability.ok) {
      report.skipped.push({ system: "leasequeue on postgresql", skipped: availability.why });
      continue;
    }
    report.postgres = availability.durability;
  }
  for (const key of wantedScenarios) {
    log(`LeaseQueue ${SCENARIOS[key].name}${engine === "postgres" ? " on PostgreSQL" : ""}`);
    report.rows.push(await runLeaseQueueScenario(key, { engine }));
  }
  // Right after the unpinned SQLite rows, so that the 2-core row (every core here) is close in time to its unpinned twin.
  if (engine === "sqlite" && tasksetScenarios.length > 0) {
    const why = tasksetUnavailable();
    if (why !== null) {
      log(`pinned server rows skipped: ${why}`);
      report.skipped.push({ system: "leasequeue, server pinned with taskset", skipped: why });
    } else
      for (const key of tasksetScenarios)
        for (const pinning of PINNINGS) {
          log(`LeaseQueue ${SCENARIOS[key].name}, ${pinning.label} (taskset -c ${pinning.cpus}; clients unpinned)`);
          report.rows.push(await runLeaseQueueScenario(key, { pinning }));
        }
  }
  if (engine === "sqlite" && args.otel) await runTracedScenario();
}
/** `--otel`: (b) with spans exported to a local receiver, next to (b) without (run again unless the table has it), and both figures. */
async function runTracedScenario() {
  const plain =
    report.rows.find((r) => r.key === "b" && r.engine === "sqlite" && r.serverCpus === undefined) ?? (await runScenarioRow("b"));
  const receiver = await startOtlpReceiver();
  log(`LeaseQueue ${SCENARIOS.b.name}, spans exported to a local OTLP receiver at ${receiver.url}`);
  let traced;
  try {
    traced = await runLeaseQueueScenario("b", { otel: receiver });
  } finally {
    await receiver.close();
  }
  report.rows.push(traced);
  const figures = (r) => `${Math.round(r.e2eJobsPerSec ?? 0)} jobs/s, ${r.serverCpuMsPerJob?.toFixed(3)} ms server CPU per job`;
  log(
    `(b) without spans: ${figures(plain)}; with spans exported: ${figures(traced)} (${traced.otlpReceived.exports} exports, ${mib(traced.otlpReceived.bytes).toFixed(1)} MiB)`,
  );
  report.otel = { without: figures(plain), with: figures(traced), received: traced.otlpReceived };

  async function runScenarioRow(key) {
    log(`LeaseQueue ${SCENARIOS[key].name} (for --otel)`);
    const row = await runLeaseQueueScenario(key);
    report.rows.push(row);
    return row;
  }
}

for (const name of wantedPeers) {
  let rows;
  try {
    rows = await runPeer(name);
  } catch (err) {
    // A peer that breaks mid-run is reported, not allowed to lose the LeaseQueue figures.
    log(`${name} failed: ${err.message}`);
    rows = [{ system: name, skipped: `failed during the run: ${err.message.split("\n")[0]}` }];
  }
  for (const row of rows) {
    if (row.skipped !== undefined) report.skipped.push(row);
    else report.rows.push(row);
  }
}
if (args["cpu-prof"]) {
  // The engine profiled: the last one asked for (--engines=postgres profiles the PostgreSQL store).
  const engine = wantedEngines.at(-1) ?? "sqlite";
  const profiled = args["cpu-prof-scenario"]; // checked against PROFILABLE above
  log(`profiled extra run of (${profiled}) on ${engine} (not in the table)`);
  const profDir = join(runDir, "profile");
  mkdirSync(profDir);
  const row = await runLeaseQueueScenario(profiled, { cpuProfDir: profDir, traceGc: true, skipLatency: true, engine });
  // One profile per thread: CPU.<date>.<time>.<pid>.<thread id>.<n>.cpuprofile; thread 0 is the
  // server's main thread, any other a worker thread of the server's.
  const profiles = readdirSync(profDir)
    .filter((f) => f.endsWith(".cpuprofile"))
    .map((f) => ({ f, thread: Number(f.split(".")[4]) }))
    .sort((x, y) => x.thread - y.thread);
  // Submitted first: the claim phase alone, what (e) is about.
  const profiledWindow = row.claimPhase?.window ?? row.window;
  const summaryOf = (file, name) => {
    // Kept beside the JSON (bench/results/ is ignored by git) for a closer look in DevTools or a script.
    const kept = join(RESULTS_DIR, `${runId}-${name}.cpuprofile`);
    copyFileSync(join(profDir, file), kept);
    return { file: kept, ...topSelfTime(JSON.parse(readFileSync(join(profDir, file), "utf8")), 25, profiledWindow) };
  };
  const main = profiles.find((p) => p.thread === 0);
  const threads = profiles.map((p) => ({ ...p, summary: summaryOf(p.f, p.thread === 0 ? "server" : `server-thread-${p.thread}`) }));
  const profiledCpuMsPerJob = row.claimPhase?.serverCpuMsPerJob ?? row.serverCpuMsPerJob;
  report.cpuProfile = {
    scenario: `${SCENARIOS[profiled].name} on ${engine}, server started with --cpu-prof; samples of the ${row.claimPhase === undefined ? "throughput phase only (first submit to last completion)" : "claim phase only (the queue resumed to the last completion)"}`,
    e2eJobsPerSec: row.e2eJobsPerSec,
    claimPhase: row.claimPhase,
    serverCpuMsPerJob: row.serverCpuMsPerJob,
    clientCpuMsPerJob: row.clientCpuMsPerJob,
    dbCpuMsPerJob: row.dbCpuMsPerJob,
    totalCpuMsPerJob: row.totalCpuMsPerJob,
    ...(main === undefined ? { top: [] } : threads.find((t) => t.thread === 0).summary),
    workers: threads.filter((t) => t.thread !== 0).map((t) => ({ thread: t.thread, ...t.summary })),
    // The server's CPU per job by layer, every thread's samples together (bench/lib/cpu-profile.mjs).
    budget: {
      serverCpuMsPerJob: profiledCpuMsPerJob,
      allocatedBytesPerJob: row.allocatedBytesPerJob,
      layers:
        profiledCpuMsPerJob === null
          ? []
          : layerBudget(
              threads.map((t) => t.summary),
              SIZES.jobs,
              profiledCpuMsPerJob,
            ),
    },
  };
}

report.finishedAt = new Date().toISOString();
report.seconds = (Date.now() - startedAt.getTime()) / 1000;
const out = args.out ?? join(RESULTS_DIR, `${runId}.json`);
printReport(report); // also adds each row's ratios to the report
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`\nJSON: ${out}`);
// The worker SDKs' throughput (TypeScript, Python, Go), each against a server of its own.
if (!args.quick && !args["no-sdks"]) {
  console.log("\nWorker SDKs (bench/sdks.mjs):");
  const sdks = spawnSync(process.execPath, [join(HERE, "sdks.mjs"), String(SIZES.jobs), "64"], { stdio: "inherit" });
  if (sdks.status !== 0) process.exitCode = 1;
}
const failed = report.rows.filter((r) => r.system.startsWith("leasequeue") && (!r.check.ok || r.outcome !== "handled"));
if (failed.length > 0) {
  console.error(`LeaseQueue did not complete every job exactly once in: ${failed.map((r) => r.scenario).join(", ")}`);
  process.exitCode = 1;
}
