/**
 * Resource figures of a process read from Linux /proc: CPU time and peak
 * resident memory of the server under test, and the summed CPU of the
 * database's processes (PostgreSQL backends, redis-server; bench/lib/db-cpu.mjs). Same parsing as
 * test/helpers/proc-stats.ts, in plain JavaScript for the .mjs bench.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat, from `getconf CLK_TCK` (100 on Linux, the fallback). */
const CLOCK_TICKS_PER_SECOND = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

/** CPU time (user + system) used so far by process `pid`, in milliseconds; null once it is gone. */
export function processCpuMs(pid) {
  let stat;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** Memory of process `pid`: { rssBytes, peakRssBytes (VmHWM) }; null once it is gone. */
export function processMemory(pid) {
  let status;
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return null;
  }
  const kib = (field) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    if (match === null) throw new Error(`/proc/${pid}/status has no ${field}`);
    return Number(match[1]) * 1024;
  };
  return { rssBytes: kib("VmRSS"), peakRssBytes: kib("VmHWM") };
}

/** Pids of every process whose command name (/proc/<pid>/comm) is `comm`, e.g. "postgres". */
export function pidsByCommand(comm) {
  const pids = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === comm) pids.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return pids;
}

/**
 * CPU used by every process named `comm` (including ones that start and
 * exit in between, e.g. PostgreSQL backends of the clients' connections,
 * as far as /proc still shows them): call `start()` then `stop()`; returns
 * milliseconds. A backend that exits before stop() takes its CPU with it,
 * so for PostgreSQL stop before the clients disconnect.
 */
export function commandCpuMeter(comm) {
  let before = new Map();
  const sample = () => {
    const m = new Map();
    for (const pid of pidsByCommand(comm)) {
      const cpu = processCpuMs(pid);
      if (cpu !== null) m.set(pid, cpu);
    }
    return m;
  };
  return {
    start() {
      before = sample();
    },
    stop() {
      let total = 0;
      for (const [pid, cpu] of sample()) total += cpu - (before.get(pid) ?? 0);
      return total;
    },
  };
}

/** Bytes to MiB. */
export function mib(bytes) {
  return bytes / (1024 * 1024);
}
