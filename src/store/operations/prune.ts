/**
 * Retention (docs/operations.md "Retention"): one bounded pruning
 * transaction. The cutoffs come from domain/retention.ts; this decides which
 * of the jobs the port finds go now (never one changed earlier in the same
 * transaction, whose events are not written yet), deletes them with their
 * events and takes them out of the counts. Queue activity samples
 * (docs/api.md "Queue activity") are pruned by age in transactions of their
 * own, whatever the jobs' retention.
 */
import type { PrunableState } from "../../domain/retention.js";
import { andThen } from "./steps.js";
import type { ActivityPruneOutcome, ActivityPruneSpec, PrunedJobs, PruneOutcome, PruneSpec } from "../store.js";
import type { Awaitable, PrunableJob, TransactionPort } from "../transaction-port.js";
import type { WriteOperation } from "./scope.js";

export function pruneFinishedJobs(spec: PruneSpec): WriteOperation<PruneOutcome> {
  return ({ port, changes, earlier }) => {
    const changedNow = earlier.changedJobs();
    const cutoffs = Object.entries(spec.finishedBefore) as Array<[PrunableState, number]>;
    return andThen(dueJobs(port, cutoffs, spec.limit, changedNow, []), (due) => {
      const outcome = (events: number): PruneOutcome => ({ pruned: tally(due), events, exhausted: due.length < spec.limit });
      if (due.length === 0) return outcome(0);
      for (const job of due) changes.count(job.queue, job.state, -1);
      return andThen(port.deleteJobs(due.map((j) => j.id)), ({ events }) => outcome(events));
    });
  };
}

/** Jobs due under each cutoff in turn, oldest finished first, until `limit` (those changed in this transaction left out). */
function dueJobs(
  port: TransactionPort,
  cutoffs: ReadonlyArray<[PrunableState, number]>,
  limit: number,
  changedNow: ReadonlySet<string>,
  due: PrunableJob[],
): Awaitable<PrunableJob[]> {
  const [first, ...rest] = cutoffs;
  if (first === undefined || due.length >= limit) return due;
  return andThen(port.selectPrunable(first[0], first[1], limit - due.length), (found) => {
    for (const job of found) if (!changedNow.has(job.id)) due.push(job);
    return dueJobs(port, rest, limit, changedNow, due);
  });
}

/** Jobs by queue and state, in the order first seen. */
function tally(jobs: readonly PrunableJob[]): PrunedJobs[] {
  const byQueueState = new Map<string, PrunedJobs>();
  for (const job of jobs) {
    const key = `${job.queue}\0${job.state}`;
    const entry = byQueueState.get(key) ?? { queue: job.queue, state: job.state, jobs: 0 };
    entry.jobs++;
    byQueueState.set(key, entry);
  }
  return [...byQueueState.values()];
}

/** Deletes up to `limit` activity samples of minutes before `beforeMinute`, oldest first. */
export function pruneActivitySamples(spec: ActivityPruneSpec): WriteOperation<ActivityPruneOutcome> {
  return ({ port }) =>
    andThen(port.deleteActivityBefore(spec.beforeMinute, spec.limit), (samples) => ({ samples, exhausted: samples < spec.limit }));
}
