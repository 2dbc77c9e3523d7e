/**
 * What a maintenance command (backup, check, restore, import-litequeue) is
 * given by src/cli.ts, and the few ways they format what they report.
 */
import { JOB_STATES, type JobState } from "../domain/job.js";

export interface CommandContext {
  /** The database the command works on (--db, LEASEQUEUE_DATABASE_PATH). */
  databasePath: string;
  /** Positional arguments after the command's name. */
  args: string[];
  /** The command's own options by name (--force -> force). */
  options: Record<string, string | boolean | undefined>;
  /** One line of the report, to stdout. */
  print(line: string): void;
  /** One line about something wrong, to stderr. */
  complain(line: string): void;
}

/**
 * Runs a command; returns its exit code (0 done, 1 refused or failed, 2 a
 * usage error). A refusal may also be thrown as DatabaseRefusal, and a
 * failure of the disk or the database as an error with a `code` (SQLite's
 * or the system's): src/cli.ts prints either as one line and exits 1.
 */
export type Command = (ctx: CommandContext) => number;

/** "12 (queued 3, completed 9)": the total, then each state that has jobs. */
export function formatJobs(jobs: Record<JobState, number>): string {
  const total = JOB_STATES.reduce((sum, s) => sum + jobs[s], 0);
  const parts = JOB_STATES.filter((s) => jobs[s] > 0).map((s) => `${s} ${jobs[s]}`);
  return parts.length === 0 ? `${total}` : `${total} (${parts.join(", ")})`;
}

/** "53981184 bytes (51.5 MiB)". */
export function formatBytes(bytes: number): string {
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = "";
  for (const u of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = u;
  }
  return unit === "" ? `${bytes} bytes` : `${bytes} bytes (${value.toFixed(1)} ${unit})`;
}
