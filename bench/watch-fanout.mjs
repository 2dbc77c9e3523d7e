#!/usr/bin/env node
// WatchEvents fan-out, measured: how much do subscribers that never read
// cost the writers? Spawns the real server, opens N WatchEvents streams that
// read their headers and then nothing more (raw HTTP/2 gRPC streams whose
// flow-control window is never reopened, or HTTP/1.1 Connect streams whose
// TCP socket is never read), submits jobs with SubmitBatch and prints the
// throughput with and without them, plus how long the server took to drop
// them. Prints figures; asserts nothing.
//
//   npm run build && node bench/watch-fanout.mjs [jobs] [subscribers] [h2|h1|both] [extra server flags...]
//   LEASEQUEUE_BENCH_CPU_PROF=dir  also writes a server CPU profile per run into dir
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

function rssMiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m === null ? NaN : Number(m[1]) / 1024;
}

const jobs = Number(process.argv[2] ?? 20000);
const subscribers = Number(process.argv[3] ?? 200);
const mode = process.argv[4] ?? "both";
const extraFlags = process.argv.slice(5);
const BATCH = 100;
const PRODUCERS = 4;
const WATCH = "/leasequeue.v1.LeaseQueueService/WatchEvents";

function startServer(label) {
  const dir = mkdtempSync(join(tmpdir(), "lq-fanout-"));
  const nodeArgs = [];
  if (process.env.LEASEQUEUE_BENCH_CPU_PROF)
    nodeArgs.push(
      "--cpu-prof",
      `--cpu-prof-dir=${process.env.LEASEQUEUE_BENCH_CPU_PROF}`,
      `--cpu-prof-name=${label.replace(/[^A-Za-z0-9]+/g, "-")}.cpuprofile`,
    );
  const child = spawn(
    process.execPath,
    [...nodeArgs, "bin/leasequeue.js", "--db", join(dir, "jobs.db"), "--port", "0", "--metrics-port", "0", ...extraFlags],
    {
      cwd: new URL("..", import.meta.url).pathname,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const urls = {};
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`server exited ${code}`)));
    createInterface({ input: child.stdout }).on("line", (line) => {
      let j;
      try {
        j = JSON.parse(line);
      } catch {
        return;
      }
      if (j.msg === "api listening") urls.api = j.url;
      if (j.msg === "metrics listening") urls.metrics = j.url;
      if (urls.api && urls.metrics && !urls.done) {
        urls.done = true;
        resolve({
          ...urls,
          pid: child.pid,
          async stop() {
            const exited = new Promise((r) => child.once("exit", r));
            child.kill("SIGTERM");
            await exited;
            rmSync(dir, { recursive: true, force: true });
          },
        });
      }
    });
  });
}

/** A raw gRPC WatchEvents stream over its own HTTP/2 session that reads the headers, then never reads again. */
async function h2NonReader(apiUrl) {
  const session = http2.connect(apiUrl);
  session.on("error", () => {});
  const stream = session.request({ ":method": "POST", ":path": WATCH, "content-type": "application/grpc+proto", te: "trailers" });
  stream.on("error", () => {});
  stream.end(Buffer.alloc(5)); // one empty WatchEventsRequest
  await new Promise((resolve, reject) => {
    stream.once("response", resolve);
    stream.once("error", reject);
  });
  stream.pause();
  return () => session.destroy();
}

/** A Connect (JSON, HTTP/1.1) WatchEvents stream whose TCP socket is never read after the response headers. */
async function h1NonReader(apiUrl) {
  const { hostname, port } = new URL(apiUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  socket.on("error", () => {});
  await new Promise((r) => socket.once("connect", r));
  const body = Buffer.concat([Buffer.from([0, 0, 0, 0, 2]), Buffer.from("{}")]);
  socket.write(
    `POST ${WATCH} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/connect+json\r\n` +
      `Connect-Protocol-Version: 1\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  socket.write(body);
  await new Promise((r) => socket.once("data", r));
  socket.pause();
  return () => socket.destroy();
}

async function metric(metricsUrl, name) {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m === null ? NaN : Number(m[1]);
}

async function submitAll(apiUrl) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < jobs) {
        const n = Math.min(BATCH, jobs - next);
        next += n;
        const res = await fetch(`${apiUrl}/leasequeue.v1.LeaseQueueService/SubmitBatch`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ jobs: Array.from({ length: n }, (_, i) => ({ queue: "fanout", task: "t", payload: { i } })) }),
        });
        if (res.status !== 200) throw new Error(`SubmitBatch: ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
      }
    }),
  );
  return (performance.now() - started) / 1000;
}

async function run(label, open) {
  const server = await startServer(label);
  const closers = [];
  for (let i = 0; i < (open ? subscribers : 0); i++) closers.push(await open(server.api));
  const subscribed = await metric(server.metrics, "leasequeue_watch_subscribers");
  const cpuBefore = cpuMs(server.pid);
  const clientBefore = process.cpuUsage();
  const seconds = await submitAll(server.api);
  const cpu = cpuMs(server.pid) - cpuBefore;
  const clientUsage = process.cpuUsage(clientBefore);
  const clientCpu = (clientUsage.user + clientUsage.system) / 1000;
  const sent = await metric(server.metrics, "leasequeue_watch_events_sent_total");
  const left = await metric(server.metrics, "leasequeue_watch_subscribers");
  // Keep writing (bounded) until the non-readers are gone, to see how long dropping takes.
  let dropSeconds = 0;
  if (open && left > 0) {
    const t0 = performance.now();
    while ((await metric(server.metrics, "leasequeue_watch_subscribers")) > 0 && performance.now() - t0 < 30_000) {
      await fetch(`${server.api}/leasequeue.v1.LeaseQueueService/SubmitBatch`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jobs: Array.from({ length: BATCH }, () => ({ queue: "fanout", task: "t" })) }),
      }).then((r) => r.arrayBuffer());
    }
    dropSeconds = (performance.now() - t0) / 1000;
  }
  const remaining = await metric(server.metrics, "leasequeue_watch_subscribers");
  const rssDropped = rssMiB(server.pid);
  // Dropped non-readers get a grace period to read the error, then their connections are cut.
  await new Promise((r) => setTimeout(r, 6000));
  const rssAfterGrace = rssMiB(server.pid);
  for (const close of closers) close();
  await server.stop();
  const rate = jobs / seconds;
  console.log(
    `${label.padEnd(34)} ${String(jobs).padStart(6)} jobs ${seconds.toFixed(2).padStart(6)} s ${rate.toFixed(0).padStart(6)} jobs/s` +
      `  server CPU ${(cpu / 1000).toFixed(2)} s (this client ${(clientCpu / 1000).toFixed(2)} s), ${sent} events sent to watchers` +
      `  subscribers ${subscribed} -> ${left} after the jobs` +
      (open ? `, ${remaining} after ${dropSeconds.toFixed(1)} s more writing` : "") +
      `; server RSS ${rssDropped.toFixed(0)} MiB, ${rssAfterGrace.toFixed(0)} MiB 6 s later`,
  );
  return rate;
}

const base = await run("no subscribers", null);
if (mode === "h2" || mode === "both") {
  const r = await run(`${subscribers} HTTP/2 gRPC non-readers`, h2NonReader);
  console.log(`  -> ${((100 * r) / base).toFixed(0)}% of the throughput without subscribers`);
}
if (mode === "h1" || mode === "both") {
  const r = await run(`${subscribers} HTTP/1.1 Connect non-readers`, h1NonReader);
  console.log(`  -> ${((100 * r) / base).toFixed(0)}% of the throughput without subscribers`);
}
