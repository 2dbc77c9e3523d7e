/**
 * The server under test as its users run it: `node bin/leasequeue.js serve`
 * in its own process, on a fresh database file, ports chosen by the kernel.
 * The API URL comes from its "api listening" log line; CPU and peak RSS
 * from /proc while it runs.
 */
import { spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { spawnTracked } from "./children.mjs";
import { processCpuMs, processMemory } from "./proc.mjs";

const BIN = process.env.LEASEQUEUE_BENCH_SERVER || fileURLToPath(new URL("../../bin/leasequeue.js", import.meta.url));

/** Why `taskset` cannot pin the server here, or null when it can (util-linux; present on Debian). */
export function tasksetUnavailable() {
  const r = spawnSync("taskset", ["-c", "0", "true"], { encoding: "utf8" });
  if (r.error !== undefined) return `taskset not found (${r.error.message}); install util-linux`;
  if (r.status !== 0) return `taskset -c 0 failed: ${r.stderr.trim()}`;
  return null;
}

/**
 * Starts the server; resolves once it listens.
 * options: db (a SQLite file) or postgres ({url, schema}: the PostgreSQL store),
 * env (extra environment, e.g. LEASEQUEUE_SQLITE_SYNCHRONOUS), cpuProfDir
 * (write a V8 CPU profile there on exit), cpus (a `taskset -c` CPU list such
 * as "0" or "0,1": the server runs on those cores only; taskset execs node,
 * so the pid is the server's), traceGc (node --trace-gc-nvp: every thread's
 * collections print the bytes allocated since the one before, summed by
 * `allocatedBytes()`), startTimeoutMs.
 *
 * LEASEQUEUE_BENCH_SERVER=<path to bin/leasequeue.js> runs another build (an
 * older commit's checkout, built) under the same bench: how a bisect compares
 * commits with one driver.
 */
export async function startLeaseQueueServer({ db, postgres, env = {}, cpuProfDir, traceGc = false, cpus, startTimeoutMs = 30_000 }) {
  const nodeArgs = [
    ...(cpuProfDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${cpuProfDir}`]),
    ...(traceGc ? ["--trace-gc-nvp"] : []),
  ];
  const database = postgres === undefined ? ["--db", db] : ["--database-url", postgres.url, "--database-schema", postgres.schema];
  const command = [process.execPath, ...nodeArgs, BIN, "serve", ...database, "--port", "0", "--metrics-port", "0"];
  if (cpus !== undefined) command.unshift("taskset", "-c", cpus);
  const { proc, exited, stderrTail } = spawnTracked(command[0], command.slice(1), { env: { ...process.env, ...env } }, "leasequeue server");
  const lines = createInterface({ input: proc.stdout });
  const logTail = [];
  let allocated = 0;
  const listening = new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server did not log "api listening" within ${startTimeoutMs} ms\n${logTail.join("\n")}\n${stderrTail()}`)),
      startTimeoutMs,
    );
    lines.on("line", (line) => {
      if (traceGc && / ms: pause=/.test(line)) {
        const bytes = /\ballocated=(\d+)/.exec(line);
        if (bytes !== null) allocated += Number(bytes[1]);
        return;
      }
      logTail.push(line);
      if (logTail.length > 50) logTail.shift();
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.msg === "api listening" && typeof entry.url === "string") {
        clearTimeout(timer);
        resolve(entry.url);
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (code ${code}, signal ${signal}) before listening\n${logTail.join("\n")}\n${stderrTail()}`));
    });
  });
  const url = await listening;
  const pid = proc.pid;
  let last = { cpuMs: 0, peakRssBytes: 0 };
  return {
    url,
    pid,
    /** CPU ms used so far. */
    cpuMs: () => processCpuMs(pid) ?? last.cpuMs,
    /** Highest RSS since start (VmHWM), bytes. */
    peakRssBytes: () => processMemory(pid)?.peakRssBytes ?? last.peakRssBytes,
    /** Bytes allocated so far, by every thread, as of the last collection (traceGc only; 0 otherwise). */
    allocatedBytes: () => allocated,
    /** Log lines at warn level or above seen so far (a healthy run has none). */
    warnings: () => logTail.filter((l) => /"level":"(warn|error)"/.test(l)),
    /** SIGTERM (graceful: a CPU profile is written), SIGKILL after `graceMs`. Returns the final figures. */
    async stop(graceMs = 20_000) {
      last = { cpuMs: processCpuMs(pid) ?? last.cpuMs, peakRssBytes: processMemory(pid)?.peakRssBytes ?? last.peakRssBytes };
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
        await exited;
        clearTimeout(timer);
      }
      return last;
    },
  };
}
