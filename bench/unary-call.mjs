#!/usr/bin/env node
/**
 * The cost of one unary call (docs/performance.md "The cost of one unary
 * call"): a do-nothing Submit served three ways in one run, by the same
 * client, in alternating runs.
 *
 *   project       the server's own adapter (app.ts createApiHandler behind
 *                 its API listener) with a do-nothing service mounted on it
 *   connect-node  connect-node's connectNodeAdapter, same service, same listener
 *   raw-http2     node:http2 answering a gRPC-framed empty message by hand
 *
 * Client: one process, connect-node createGrpcTransport (gRPC, h2c, binary
 * protobuf), one HTTP/2 connection, `--callers` concurrent callers (the
 * `noop` role of bench/children/leasequeue-client.mjs, as the transport
 * ceiling of `npm run bench`). Each run starts a fresh server and client:
 * 200 warm-up calls, then `--calls` calls timed; server (and client) CPU
 * from /proc over the timed phase. Runs go round-robin over the variants,
 * `--rounds` times, the starting variant moving by one each round.
 *
 *   npm run build && node bench/unary-call.mjs
 *   options: --calls=20000 --callers=64 --rounds=2
 *            --variants=project,connect-node,raw-http2
 *            --compare=DIR (also the project adapter of another build: DIR is
 *              a copy of its dist/ inside this checkout, e.g. bench/.data/before/dist;
 *              may be given several times; --variants= then runs only those builds)
 *            --cpu-prof (an extra run of the project adapter under node
 *              --cpu-prof, not in the figures: top self-time functions of its timed phase)
 *            --out=FILE (default bench/results/unary-call-<timestamp>.json)
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { forkChild } from "./lib/children.mjs";
import { topSelfTime } from "./lib/cpu-profile.mjs";
import { processCpuMs } from "./lib/proc.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const CHILD = (name) => join(HERE, "children", name);
/** Now in microseconds of CLOCK_MONOTONIC: the clock of V8's .cpuprofile timestamps, in any process. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

const { values: args } = parseArgs({
  options: {
    calls: { type: "string", default: "20000" },
    callers: { type: "string", default: "64" },
    rounds: { type: "string", default: "2" },
    variants: { type: "string", default: "project,connect-node,raw-http2" },
    compare: { type: "string", multiple: true },
    "cpu-prof": { type: "boolean", default: false },
    out: { type: "string" },
  },
});
const calls = Number(args.calls);
const callers = Number(args.callers);
const rounds = Number(args.rounds);

/** Each variant: what the server child serves, and from which build. */
const variants = args.variants
  .split(",")
  .filter(Boolean)
  .map((name) => ({ name, variant: name }));
for (const compared of args.compare ?? []) {
  const dist = resolve(compared);
  variants.push({ name: `project@${relative(process.cwd(), dist)}`, variant: "project", dist });
}

/** One timed run: a fresh server of `v`, a fresh client, `calls` calls. */
async function runOnce(v, { execArgv } = {}) {
  const server = forkChild(CHILD("unary-server.mjs"), { variant: v.variant, dist: v.dist, timeLimitMs: 300_000 }, `${v.name} server`, {
    execArgv,
  });
  try {
    const { url } = await server.next("ready", 30_000);
    const client = forkChild(
      CHILD("leasequeue-client.mjs"),
      { role: "noop", url, callers, calls, warmup: 200, timeLimitMs: 300_000 },
      `${v.name} client`,
    );
    try {
      await client.next("ready", 60_000);
      const serverCpu0 = processCpuMs(server.pid);
      const clientCpu0 = processCpuMs(client.pid);
      const fromUs = monotonicUs();
      client.send({ type: "go" });
      const r = await client.next("done", 290_000);
      const toUs = monotonicUs();
      const serverCpuMs = processCpuMs(server.pid) - serverCpu0;
      const clientCpuMs = processCpuMs(client.pid) - clientCpu0;
      return {
        variant: v.name,
        calls: r.calls,
        seconds: r.ms / 1000,
        callsPerSec: Math.round(r.calls / (r.ms / 1000)),
        serverCpuUsPerCall: Math.round((serverCpuMs * 1000) / r.calls),
        clientCpuUsPerCall: Math.round((clientCpuMs * 1000) / r.calls),
        window: { fromUs, toUs },
      };
    } finally {
      await client.kill(3000);
    }
  } finally {
    await server.stop(10_000);
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const startedAt = new Date();
const report = {
  bench: "unary-call",
  startedAt: startedAt.toISOString(),
  machine: {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    loadAverage: os.loadavg().map((x) => Number(x.toFixed(2))),
    node: process.version,
  },
  sizes: { calls, callers, rounds, warmup: 200 },
  runs: [],
};
console.log(
  `unary-call: ${calls} do-nothing Submit calls per run, ${callers} callers on one connection, ${rounds} rounds of ${variants.map((v) => v.name).join(", ")}; load ${report.machine.loadAverage.join(" ")}`,
);
for (let round = 0; round < rounds; round++) {
  for (let k = 0; k < variants.length; k++) {
    const v = variants[(round + k) % variants.length];
    const run = await runOnce(v);
    report.runs.push(run);
    console.log(
      `  ${v.name.padEnd(24)} ${String(run.callsPerSec).padStart(6)} calls/s  server ${String(run.serverCpuUsPerCall).padStart(4)} µs/call  client ${String(run.clientCpuUsPerCall).padStart(4)} µs/call`,
    );
  }
}
report.summary = variants.map((v) => {
  const runs = report.runs.filter((r) => r.variant === v.name);
  return {
    variant: v.name,
    callsPerSec: runs.map((r) => r.callsPerSec),
    serverCpuUsPerCall: runs.map((r) => r.serverCpuUsPerCall),
    clientCpuUsPerCall: runs.map((r) => r.clientCpuUsPerCall),
    medianCallsPerSec: median(runs.map((r) => r.callsPerSec)),
    medianServerCpuUsPerCall: median(runs.map((r) => r.serverCpuUsPerCall)),
  };
});
console.log("\n| server | calls/s (each run) | server CPU µs/call (each run) | client CPU µs/call |");
console.log("|---|--:|--:|--:|");
for (const s of report.summary) {
  console.log(
    `| ${s.variant} | ${s.callsPerSec.join(" / ")} | ${s.serverCpuUsPerCall.join(" / ")} | ${s.clientCpuUsPerCall.join(" / ")} |`,
  );
}

const runId = startedAt.toISOString().replace(/[:.]/g, "-");
const resultsDir = join(HERE, "results");
mkdirSync(resultsDir, { recursive: true });
if (args["cpu-prof"]) {
  const project = variants.find((v) => v.variant === "project" && v.dist === undefined) ?? { name: "project", variant: "project" };
  const profDir = mkdtempSync(join(os.tmpdir(), "unary-call-prof-"));
  try {
    const run = await runOnce(project, { execArgv: ["--cpu-prof", `--cpu-prof-dir=${profDir}`] });
    const file = readdirSync(profDir).find((f) => f.endsWith(".cpuprofile"));
    if (file === undefined) throw new Error("the profiled server wrote no .cpuprofile");
    const kept = join(resultsDir, `unary-call-${runId}-server.cpuprofile`);
    copyFileSync(join(profDir, file), kept);
    const profile = topSelfTime(JSON.parse(readFileSync(kept, "utf8")), 30, run.window);
    report.cpuProfile = { file: kept, run, ...profile };
    console.log(
      `\nServer CPU profile of ${project.name} (extra run, ${run.callsPerSec} calls/s under --cpu-prof); idle ${(profile.idleShare * 100).toFixed(0)}% of ${profile.totalMs} ms; top self time, share of busy time:`,
    );
    for (const e of profile.top) console.log(`  ${(e.share * 100).toFixed(1).padStart(5)}%  ${e.fn}  ${e.where}`);
    console.log("By area:");
    for (const a of profile.byArea) console.log(`  ${(a.share * 100).toFixed(1).padStart(5)}%  ${a.area}`);
  } finally {
    rmSync(profDir, { recursive: true, force: true });
  }
}
const out = args.out ?? join(resultsDir, `unary-call-${runId}.json`);
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`\nJSON: ${out}`);
