#!/usr/bin/env node
// Submit-to-lease latency on an idle StreamClaims stream (issue 3; tracked
// by issue 5): a server in this process, one worker stream waiting on an
// empty queue, then one job at a time: Submit, and the time until its lease
// arrives on the stream; the lease is completed before the next Submit.
// Includes the Submit's commit (synchronous=FULL, so an fsync) and the
// claim's commit. Prints figures; asserts nothing.
//
//   npm run build --silent && node bench/submit-to-lease.mjs [jobs] [grpc|connect] [--build=DIR]
//   (LEASEQUEUE_SQLITE_SYNCHRONOUS=normal measures without the fsync;
//   LEASEQUEUE_DATABASE_URL=postgres://... runs on PostgreSQL, in a fresh
//   schema dropped after; --build=DIR runs another build's dist/, e.g. a
//   bench/compare-builds.mjs worktree, so two builds can be run in turn)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dropPgSchema } from "./lib/pg-history.mjs";

const positional = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const build = process.argv.find((a) => a.startsWith("--build="))?.slice("--build=".length) ?? fileURLToPath(new URL("..", import.meta.url));
const dist = (path) => import(pathToFileURL(join(build, "dist", path)).href);
const { startServer } = await dist("src/app.js");
const { resolveConfig } = await dist("src/config.js");
const { silentLogger } = await dist("src/testing/index.js");
const { createLeaseQueueClient } = await dist("src/worker/index.js");

const jobs = Number(positional[0] ?? 500);
const transport = positional[1] ?? "grpc";
const queue = "latency";

const dir = mkdtempSync(join(tmpdir(), "lq-bench-latency-"));
const databaseUrl = process.env.LEASEQUEUE_DATABASE_URL;
const schema = `bench_latency_${process.pid}`;
const config = resolveConfig(
  databaseUrl === undefined
    ? { db: join(dir, "bench.db"), port: "0", "metrics-port": "0" }
    : { "database-schema": schema, port: "0", "metrics-port": "0" },
  process.env,
);
const server = await startServer(config, { log: silentLogger });
const client = createLeaseQueueClient({ url: server.apiUrl, transport });

const abort = new AbortController();
const claims = client.streamClaims({ queue, workerId: "bench", maxInFlight: 1, leaseDuration: { seconds: 60n } }, { signal: abort.signal });
const stream = claims[Symbol.asyncIterator]();

async function nextLease() {
  for (;;) {
    const { value, done } = await stream.next();
    if (done) throw new Error("stream ended");
    if (value.lease !== undefined) return value.lease;
  }
}

await stream.next(); // the first message: the stream is registered and idle

const submitMs = [];
const leaseMs = [];
for (let i = 0; i < jobs + 20; i++) {
  const t0 = performance.now();
  const leased = nextLease().then((lease) => ({ lease, at: performance.now() }));
  const { job } = await client.submit({ queue, task: "t" });
  const t1 = performance.now();
  const { lease, at: t2 } = await leased;
  if (lease.job.id !== job.id) throw new Error("leased a different job");
  if (i >= 20) {
    // the first 20 warm up connections and the JIT
    submitMs.push(t1 - t0);
    leaseMs.push(t2 - t0);
  }
  await client.complete({ jobId: lease.job.id, leaseToken: lease.leaseToken });
}

abort.abort();
await stream.return?.();
await server.close();
rmSync(dir, { recursive: true, force: true });
if (databaseUrl !== undefined) await dropPgSchema(databaseUrl, schema);

function summary(label, xs) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  const f = (x) => x.toFixed(2).padStart(7);
  console.log(`${label.padEnd(30)} p50 ${f(at(50))}  p90 ${f(at(90))}  p99 ${f(at(99))}  max ${f(s.at(-1))}  ms`);
}
console.log(
  `${jobs} jobs, one at a time, ${transport} transport, idle stream, ${databaseUrl === undefined ? `SQLite, synchronous=${config.sqliteSynchronous}` : "PostgreSQL"}`,
);
summary("submit response", submitMs);
summary("submit -> lease on the stream", leaseMs);
