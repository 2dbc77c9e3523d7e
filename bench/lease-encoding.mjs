#!/usr/bin/env node
// CPU per lease of the server's hand Lease encoder (src/server/fast-wire/lease-encoding.ts)
// for the bench's two payloads, {"i": n} and --payload=order's (about 700
// bytes of JSON): 200,000 encodes of each after a warm-up, in this process.
// Prints µs per lease. `--build=DIR` encodes with another build's dist/ (a
// checkout or a compare-builds.mjs worktree), so two builds can be run in
// turn, e.g. with farm-bench --vs. Asserts nothing.
//
//   npm run build && node bench/lease-encoding.mjs [--build=DIR] [--payload=small|order|both]
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { ORDER } from "./lib/leasequeue-drivers.mjs";

const { values: args } = parseArgs({
  options: {
    build: { type: "string", default: fileURLToPath(new URL("..", import.meta.url)) },
    payload: { type: "string", default: "both" },
  },
});
// Where the encoder is, and where builds before src/server/fast-wire/ had it.
const encoderFile = ["dist/src/server/fast-wire/lease-encoding.js", "dist/src/service/lease-encoding.js"]
  .map((f) => join(args.build, f))
  .find((f) => existsSync(f));
const { encodeLease } = await import(pathToFileURL(encoderFile ?? "no lease-encoding.js in the build").href);

const now = Date.now();
const job = (payloadJson) => ({
  id: "0193a4b2-1c2d-7e3f-8a9b-0c1d2e3f4a5b",
  queue: "bench",
  task: "bench",
  groupKey: "",
  payloadJson,
  priority: 0,
  state: "running",
  attempts: 1,
  maxAttempts: 3,
  retryBaseDelayMs: 1000,
  scheduleTime: now,
  createTime: now,
  updateTime: now,
  finishTime: null,
  workerId: "bench-worker-0",
  leaseExpireTime: now + 30_000,
  deliveries: 1,
  lastError: null,
  resultJson: null,
  progressJson: null,
  traceContext: null,
});
const PAYLOADS = { small: (i) => JSON.stringify({ i }), order: (i) => JSON.stringify({ i, ...ORDER }) };
const N = 200_000;
for (const name of args.payload === "both" ? ["small", "order"] : [args.payload]) {
  const leases = Array.from({ length: 1000 }, (_, i) => ({
    job: job(PAYLOADS[name](i)),
    leaseToken: "KJcpHvCkv1cwOCux5jbS6YS3goYN8Rc-mnKtalMnjis",
  }));
  let bytes = 0;
  for (let i = 0; i < N / 10; i++) bytes += encodeLease(leases[i % 1000]).length;
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) bytes += encodeLease(leases[i % 1000]).length;
  const us = Number(process.hrtime.bigint() - start) / 1000 / N;
  console.log(`${name}: ${us.toFixed(2)} µs per lease (${Math.round(bytes / (N * 1.1))} bytes)`);
}
