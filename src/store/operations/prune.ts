/**
 * Retention (api.md section B): one bounded pruning transaction. The
 * cutoffs come from domain/retention.ts; this decides which of the jobs the
 * port finds go now (never one changed earlier in the same transaction,
 * whose events are not written yet), deletes them with their events and
 * takes them out of the counts.
 */
import type { PrunableState } from "../../domain/retention.js";
import type { PrunedJobs, PruneOutcome, PruneSpec } from "../store.js";
import type { PrunableJob } from "../transaction-port.js";
import type { WriteOperation } from "./scope.js";

export function pruneFinishedJobs(spec: PruneSpec): WriteOperation<PruneOutcome> {
  return async ({ port, changes, earlier }) => {
    const changedNow = earlier.changedJobs();
    const due: PrunableJob[] = [];
    for (const [state, before] of Object.entries(spec.finishedBefore) as Array<[PrunableState, number]>) {
      if (due.length >= spec.limit) break;
      for (const job of await port.selectPrunable(state, before, spec.limit - due.length)) {
        if (!changedNow.has(job.id)) due.push(job);
      }
    }
    let events = 0;
    if (due.length > 0) {
      events = (await port.deleteJobs(due.map((j) => j.id))).events;
      for (const job of due) changes.count(job.queue, job.state, -1);
    }
    return { pruned: tally(due), events, exhausted: due.length < spec.limit };
  };
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
