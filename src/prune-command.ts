/**
 * `leasequeue prune`: one retention pass now, over the whole backlog, with
 * the same policy and batches as the server's background pruner. It may run
 * beside a live server on the same database: each batch is its own short
 * write transaction, so the server's writers wait for one batch at most.
 */
import type { Config } from "./config.js";
import { systemClock, type Clock } from "./domain/clock.js";
import { formatDurationText } from "./domain/duration-text.js";
import { prunesAnything, type RetentionPolicy } from "./domain/retention.js";
import { prunePass, type PassSummary } from "./dispatch/pruner.js";
import { openSqliteStore } from "./store/sqlite/sqlite-store.js";

export async function pruneNow(config: Config, clock: Clock = systemClock): Promise<PassSummary> {
  const store = openSqliteStore({ path: config.databasePath, clock, synchronous: config.sqliteSynchronous });
  try {
    return await prunePass({ store, clock, policy: config.retention });
  } finally {
    await store.close();
  }
}

/** What the policy keeps, in the settings' own terms. */
export function describePolicy(policy: RetentionPolicy): string {
  const finished =
    policy.retentionMs > 0
      ? `completed and cancelled jobs finished more than ${formatDurationText(policy.retentionMs)} ago`
      : "no completed or cancelled jobs (LEASEQUEUE_RETENTION=0s keeps them)";
  const dead =
    policy.deadRetentionMs !== null && policy.deadRetentionMs > 0
      ? `dead jobs that died more than ${formatDurationText(policy.deadRetentionMs)} ago`
      : "no dead jobs (LEASEQUEUE_DEAD_RETENTION is not set)";
  return `prunes ${finished}; ${dead}`;
}

/** The command's report: a summary line, then one line per queue and state. */
export function formatPruneSummary(summary: PassSummary, policy: RetentionPolicy): string {
  const lines = [`retention ${describePolicy(policy)}`];
  if (!prunesAnything(policy)) {
    lines.push("nothing to prune: this policy keeps every job");
    return `${lines.join("\n")}\n`;
  }
  const batches = summary.batches === 1 ? "1 batch" : `${summary.batches} batches`;
  lines.push(`pruned ${summary.jobs} jobs and ${summary.events} events in ${batches}`);
  if (summary.pruned.length > 0) {
    const width = Math.max(5, ...summary.pruned.map((p) => p.queue.length));
    lines.push(`${"queue".padEnd(width)}  ${"state".padEnd(9)}  jobs`);
    for (const p of summary.pruned) lines.push(`${p.queue.padEnd(width)}  ${p.state.padEnd(9)}  ${p.jobs}`);
  }
  return `${lines.join("\n")}\n`;
}
