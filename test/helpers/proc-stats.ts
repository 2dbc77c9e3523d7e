/**
 * Resource figures of a running process read from /proc, for the hostile
 * tests: they print what an attack cost the server and assert only generous
 * bounds (the benchmarks give exact figures).
 */
import { readFileSync } from "node:fs";

export interface ProcessMemory {
  /** Resident set size now. */
  rssBytes: number;
  /** Highest resident set size since the process started (VmHWM). */
  peakRssBytes: number;
}

/** Memory of process `pid` (Linux /proc/<pid>/status). */
export function processMemory(pid: number): ProcessMemory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string): number => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    if (match === null) throw new Error(`/proc/${pid}/status has no ${field}`);
    return Number(match[1]) * 1024;
  };
  return { rssBytes: kib("VmRSS"), peakRssBytes: kib("VmHWM") };
}

/** CPU time (user + system) used so far by process `pid`, in milliseconds. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/** "123.4 MiB" */
export function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
