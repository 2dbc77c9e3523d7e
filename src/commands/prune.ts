/**
 * `leasequeue prune`: one retention pass now, over the whole backlog, with
 * the policy of LEASEQUEUE_RETENTION / LEASEQUEUE_DEAD_RETENTION (or their
 * flags) and the batches of the server's background pruner (queue activity
 * samples older than a day go too, whatever the policy). It may run
 * beside a live server on the same database: each batch is its own short
 * write transaction, so the server's writers wait for one batch at most,
 * and it only deletes finished jobs, which the server's streams need not be
 * told about. Exit 0 when the pass ran, 1 when it could not.
 */
import { existsSync } from "node:fs";
import type { Config } from "../config/config.js";
import { systemClock, type Clock } from "../domain/clock.js";
import { formatDurationText } from "../domain/duration-text.js";
import { prunesAnything, type RetentionPolicy } from "../domain/retention.js";
import { prunePass, type PassSummary } from "../maintenance/pruner.js";
import { databaseLocation, openStore } from "../store/engine.js";

export interface PruneCommandIo {
  print(line: string): void;
  complain(line: string): void;
  clock?: Clock;
}

export async function pruneCommand(config: Config, io: PruneCommandIo): Promise<number> {
  if (config.postgres === undefined && !existsSync(config.databasePath)) {
    io.complain(`leasequeue prune: no database at ${config.databasePath} (set --db or LEASEQUEUE_DATABASE_PATH)`);
    return 1;
  }
  let summary: PassSummary;
  try {
    summary = await pruneNow(config, io.clock ?? systemClock);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    io.complain(`leasequeue prune: ${typeof code === "string" ? `${code}: ` : ""}${(err as Error).message}`);
    return 1;
  }
  for (const line of formatPruneSummary(summary, config.retention)) io.print(line);
  return 0;
}

async function pruneNow(config: Config, clock: Clock): Promise<PassSummary> {
  // Beside a server that holds the database: a store of its own, no hold (store/engine.ts holdDatabase).
  const store = await openStore(databaseLocation(config), clock);
  try {
    return await prunePass({ store, clock: store.clock, policy: config.retention });
  } finally {
    await store.close();
  }
}

/** What the policy deletes, in the settings' own terms. */
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

/** The command's report: the policy, a summary line, then one line per queue and state. */
export function formatPruneSummary(summary: PassSummary, policy: RetentionPolicy): string[] {
  const lines = [`retention ${describePolicy(policy)}`];
  // Queue activity samples go after a day whatever the policy (docs/api.md "Queue activity").
  const samples = summary.activitySamples > 0 ? [`pruned ${summary.activitySamples} queue activity samples older than a day`] : [];
  if (!prunesAnything(policy)) {
    lines.push("nothing to prune: this policy keeps every job", ...samples);
    return lines;
  }
  const batches = summary.batches === 1 ? "1 batch" : `${summary.batches} batches`;
  lines.push(`pruned ${summary.jobs} jobs and ${summary.events} events in ${batches}`, ...samples);
  if (summary.pruned.length > 0) {
    const width = Math.max(5, ...summary.pruned.map((p) => p.queue.length));
    lines.push(`${"queue".padEnd(width)}  ${"state".padEnd(9)}  jobs`);
    for (const p of summary.pruned) lines.push(`${p.queue.padEnd(width)}  ${p.state.padEnd(9)}  ${p.jobs}`);
  }
  return lines;
}
