#!/usr/bin/env node
// Throughput of each worker SDK: TypeScript (src/worker), Python
// (clients/python) and Go (clients/go), each through its conformance driver
// (test/conformance/drivers, quiet: no line per job). For every SDK: a
// fresh server in its own process (bin/leasequeue.js serve), a backlog of N
// no-op jobs submitted up front, then one driver with the given
// concurrency, timed from its start until GetStats counts every job
// completed. Prints jobs/s and the CPU per job of the server and of the
// worker process (from /proc). An SDK whose toolchain is missing is
// skipped with a note. Asserts nothing.
//
//   npm run bench:sdks [-- jobs concurrency]        (defaults 5000 64)
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startLeaseQueueServer } from "./lib/leasequeue-server.mjs";
import { processCpuMs } from "./lib/proc.mjs";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const DRIVERS = join(ROOT, "test/conformance/drivers");
const jobs = Number(process.argv[2] ?? 5000);
const concurrency = Number(process.argv[3] ?? 64);
const work = mkdtempSync(join(tmpdir(), "lq-bench-sdks-"));

/** Runs a command to completion; throws with its output when it fails. */
function must(file, args, options = {}) {
  const res = spawnSync(file, args, { encoding: "utf8", ...options });
  if (res.status !== 0) throw new Error(`${file} ${args.join(" ")} failed:\n${res.stdout}${res.stderr}`);
  return res;
}

/** Each SDK: how to build its driver (null when its toolchain is missing, with why). */
const SDKS = [
  {
    name: "typescript",
    build() {
      if (!existsSync(join(ROOT, "dist/src/worker/index.js"))) return { missing: "dist/ (npm run build)" };
      return { file: process.execPath, args: [join(DRIVERS, "ts-driver.mjs")] };
    },
  },
  {
    name: "python",
    build() {
      const python = "/usr/bin/python3";
      if (spawnSync(python, ["-c", "import grpc, google.protobuf, venv"]).status !== 0)
        return { missing: "python3-grpcio, python3-protobuf, python3-venv" };
      // As clients/python/README.md installs it, from a copy so the checkout stays clean.
      const src = join(work, "py-src");
      cpSync(join(ROOT, "clients/python"), join(src, "clients/python"), {
        recursive: true,
        filter: (p) => !/\/(build|[^/]*\.egg-info)$/.test(p),
      });
      cpSync(join(ROOT, "gen/python"), join(src, "gen/python"), { recursive: true });
      const venv = join(work, "venv");
      must(python, ["-m", "venv", "--system-site-packages", venv]);
      must(
        join(venv, "bin/python"),
        ["-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", join(src, "clients/python")],
        {
          cwd: work,
        },
      );
      return { file: join(venv, "bin/python"), args: [join(DRIVERS, "python_driver.py")] };
    },
  },
  {
    name: "go",
    build() {
      if (spawnSync("go", ["version"]).status !== 0 || !existsSync("/usr/share/gocode/src/google.golang.org/grpc"))
        return { missing: "golang-go and Debian's grpc-go packages" };
      const gopath = join(work, "gopath");
      mkdirSync(join(gopath, "src"), { recursive: true });
      symlinkSync(ROOT.replace(/\/$/, ""), join(gopath, "src/leasequeue"));
      const bin = join(work, "go-driver");
      const env = { ...process.env, GO111MODULE: "off", GOPATH: `${gopath}:/usr/share/gocode`, GOPROXY: "off", GOFLAGS: "" };
      must("go", ["build", "-o", bin, "leasequeue/test/conformance/drivers/go-driver"], { cwd: gopath, env });
      return { file: bin, args: [] };
    },
  },
];

async function call(url, method, body) {
  const res = await fetch(`${url}/leasequeue.v1.LeaseQueueService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function completed(url, queue) {
  const stats = await call(url, "GetStats", {});
  return Number((stats.queues ?? []).find((q) => q.queue === queue)?.completed ?? 0);
}

async function benchOne(sdk, driver) {
  const server = await startLeaseQueueServer({ db: join(work, `${sdk.name}.db`) });
  const queue = "bench";
  try {
    for (let i = 0; i < jobs; i += 500) {
      const n = Math.min(500, jobs - i);
      const batch = Array.from({ length: n }, (_, k) => ({ queue, task: "noop", payload: { i: i + k } }));
      await call(server.url, "SubmitBatch", { jobs: batch, view: "JOB_VIEW_BASIC" });
    }
    const serverBefore = server.cpuMs();
    const started = performance.now();
    const child = spawn(driver.file, driver.args, {
      env: {
        ...process.env,
        LEASEQUEUE_URL: server.url,
        LEASEQUEUE_QUEUE: queue,
        LEASEQUEUE_WORKER_ID: `bench-${sdk.name}`,
        LEASEQUEUE_CONCURRENCY: String(concurrency),
        LEASEQUEUE_LEASE_SECONDS: "60",
        LEASEQUEUE_DRIVER_QUIET: "1",
        PYTHONDONTWRITEBYTECODE: "1",
      },
      stdio: ["ignore", "ignore", "inherit"],
    });
    const exited = new Promise((resolve) => child.once("close", resolve));
    const deadline = Date.now() + 300_000;
    let workerCpuMs = 0;
    while ((await completed(server.url, queue)) < jobs) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${sdk.name}: not all ${jobs} jobs completed`);
      workerCpuMs = processCpuMs(child.pid) ?? workerCpuMs;
      await new Promise((r) => setTimeout(r, 20));
    }
    const seconds = (performance.now() - started) / 1000;
    workerCpuMs = processCpuMs(child.pid) ?? workerCpuMs;
    const serverCpuMs = server.cpuMs() - serverBefore;
    child.kill("SIGTERM");
    await exited;
    return { sdk: sdk.name, seconds, serverCpuMs, workerCpuMs };
  } finally {
    await server.stop();
  }
}

console.log(`${jobs} no-op jobs per SDK, concurrency ${concurrency}, one worker process, server and worker on this machine`);
console.log("sdk         jobs/s   server CPU/job   worker CPU/job   (time includes the worker's start)");
try {
  for (const sdk of SDKS) {
    const driver = sdk.build();
    if (driver.missing !== undefined) {
      console.log(`${sdk.name.padEnd(10)}  skipped: needs ${driver.missing}`);
      continue;
    }
    const r = await benchOne(sdk, driver);
    const perJob = (ms) => `${((ms * 1000) / jobs).toFixed(0)} µs`.padStart(14);
    console.log(`${r.sdk.padEnd(10)} ${(jobs / r.seconds).toFixed(0).padStart(7)}   ${perJob(r.serverCpuMs)}   ${perJob(r.workerCpuMs)}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
