#!/usr/bin/env node
// Jobs per second through the worker SDK: a server in a child process, a
// backlog of N jobs submitted up front, then one createWorker() in this
// process with the given concurrency, timed from its creation until every
// job is completed. Prints jobs/s and the RPCs the server saw, by method
// (from /metrics), so a run shows which path the SDK took. Asserts nothing.
//
//   npm run build --silent && node bench/worker-throughput.mjs [jobs] [concurrency] [grpc|connect|connect-h1]
//   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/worker-throughput.mjs   (profiles the worker only)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

if (process.argv[2] === "--serve") {
  const { startServer } = await import("../dist/src/app.js");
  const { resolveConfig } = await import("../dist/src/config/config.js");
  const { silentLogger } = await import("../dist/src/testing/index.js");
  const config = resolveConfig({ db: process.argv[3], port: "0", "metrics-port": "0" }, process.env);
  const server = await startServer(config, { log: silentLogger });
  process.stdout.write(JSON.stringify({ apiUrl: server.apiUrl, metricsUrl: server.metricsUrl }) + "\n");
  process.stdin.on("end", () => void server.close().then(() => process.exit(0)));
  process.stdin.resume();
} else {
  const { createLeaseQueueClient, createWorker, jsonToValue } = await import("../dist/src/worker/index.js");
  const jobs = Number(process.argv[2] ?? 5000);
  const concurrency = Number(process.argv[3] ?? 64);
  const transport = process.argv[4] ?? "grpc";
  const dir = mkdtempSync(join(tmpdir(), "lq-bench-worker-"));
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--serve", join(dir, "bench.db")], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const { apiUrl, metricsUrl } = await new Promise((resolve, reject) => {
    let text = "";
    child.stdout.on("data", (d) => {
      text += d;
      if (text.includes("\n")) resolve(JSON.parse(text));
    });
    child.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
  const clientOptions = transport === "connect-h1" ? { transport: "connect", httpVersion: "1.1" } : { transport };
  const producer = createLeaseQueueClient({ url: apiUrl });
  for (let i = 0; i < jobs; i += 500) {
    const n = Math.min(500, jobs - i);
    await producer.submitBatch({
      jobs: Array.from({ length: n }, (_, k) => ({ queue: "bench", task: "t", payload: jsonToValue({ i: i + k }) })),
      view: 2,
    });
  }

  let completed = 0;
  let finish;
  const allDone = new Promise((resolve) => (finish = resolve));
  const started = performance.now();
  const worker = createWorker({
    client: createLeaseQueueClient({ url: apiUrl, ...clientOptions }),
    queue: "bench",
    workerId: "bench-worker",
    concurrency,
    handler: (_job, { payload }) => Promise.resolve({ doubled: payload.i * 2 }),
    onEvent(e) {
      if (e.type === "completed" && ++completed === jobs) finish();
      if (e.type === "error") console.error(e.error.message);
    },
  });
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  await worker.close();

  const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
  const calls = {};
  for (const m of metrics.matchAll(/^leasequeue_rpc_duration_seconds_count\{method="(\w+)",code="(\w+)"\} (\d+)/gm)) {
    calls[m[1]] = (calls[m[1]] ?? 0) + Number(m[3]);
  }
  delete calls.SubmitBatch;
  console.log(`${jobs} jobs, concurrency ${concurrency}, ${transport}: ${(jobs / seconds).toFixed(0)} jobs/s (${seconds.toFixed(2)} s)`);
  console.log(`RPCs by method: ${JSON.stringify(calls)}`);
  child.stdin.end();
  await new Promise((resolve) => child.on("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
}
