#!/usr/bin/env node
// Submit-to-lease across two servers on one PostgreSQL schema
// (docs/postgresql.md "Running several servers": a stream on one server
// reacts at once to what is committed through another, by LISTEN/NOTIFY,
// with a catch-up every second behind it): both servers in this process, one
// worker stream waiting on server B's empty queue, then one job at a time:
// Submit through server A, and the time until its lease arrives on B's
// stream; the lease is completed before the next Submit. Prints figures;
// asserts nothing (test/e2e/postgres-multi-server.test.ts checks that the
// handoff happens).
//
//   npm run build --silent && node bench/pg-handoff.mjs [jobs] [--url=postgres://...]
import { parseArgs } from "node:util";
import pg from "pg";
import { startServer } from "../dist/src/app.js";
import { resolveConfig } from "../dist/src/config/config.js";
import { silentLogger } from "../dist/src/testing/index.js";
import { createLeaseQueueClient } from "../dist/src/worker/index.js";
import { POSTGRES_URL } from "./lib/peers.mjs";

const { values: args, positionals } = parseArgs({
  options: { url: { type: "string", default: POSTGRES_URL }, schema: { type: "string", default: "bench_pg_handoff" } },
  allowPositionals: true,
});
const jobs = Number(positionals[0] ?? 200);
const SCHEMA = args.schema;
if (!/^[a-z_][a-z0-9_]*$/.test(SCHEMA)) throw new Error(`--schema: a plain lower-case identifier, not ${SCHEMA}`);
const queue = "handoff";

const db = new pg.Client({ connectionString: args.url });
await db.connect();
await db.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
const config = resolveConfig(
  { "database-url": args.url, "database-schema": SCHEMA, "database-pool-size": "6", port: "0", "metrics-port": "0" },
  process.env,
);
// The first migrates the empty schema; the second finds it ready.
const a = await startServer(config, { log: silentLogger });
const b = await startServer(config, { log: silentLogger });
const submitter = createLeaseQueueClient({ url: a.apiUrl });
const worker = createLeaseQueueClient({ url: b.apiUrl });

const abort = new AbortController();
const stream = worker
  .streamClaims({ queue, workerId: "bench", maxInFlight: 1, leaseDuration: { seconds: 60n } }, { signal: abort.signal })
  [Symbol.asyncIterator]();
async function nextLease() {
  for (;;) {
    const { value, done } = await stream.next();
    if (done) throw new Error("stream ended");
    if (value.lease !== undefined) return value.lease;
  }
}
await stream.next(); // the first message: the stream is registered and idle

const leaseMs = [];
for (let i = 0; i < jobs + 20; i++) {
  const t0 = performance.now();
  const leased = nextLease().then((lease) => ({ lease, at: performance.now() }));
  const { job } = await submitter.submit({ queue, task: "t" });
  const { lease, at } = await leased;
  if (lease.job.id !== job.id) throw new Error("leased a different job");
  if (i >= 20) leaseMs.push(at - t0); // the first 20 warm up connections and the JIT
  await worker.complete({ jobId: lease.job.id, leaseToken: lease.leaseToken });
}

abort.abort();
await stream.return?.();
await b.close();
await a.close();
await db.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await db.end();

const s = [...leaseMs].sort((x, y) => x - y);
const at = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
const f = (x) => x.toFixed(2).padStart(7);
console.log(`${jobs} jobs, one at a time: Submit through server A, the lease on server B's idle stream (PostgreSQL, one schema)`);
console.log(`submit on A -> lease on B's stream  p50 ${f(at(50))}  p90 ${f(at(90))}  p99 ${f(at(99))}  max ${f(s.at(-1))}  ms`);
