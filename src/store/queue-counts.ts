/**
 * GetStats' model (Store.queueCounts), assembled the same way by every
 * engine from what its SQL reads: the non-zero counts per queue and state,
 * the paused queues (listed even without jobs, api.md section B) and the
 * oldest pending job of each queue that has one.
 */
import { JOB_STATES, type JobState } from "../domain/job.js";
import type { QueueCounts } from "./store.js";
import type { Awaitable } from "./transaction-port.js";

export interface QueueCountsSource {
  /** Non-zero counts, ordered by queue. */
  counts: ReadonlyArray<{ queue: string; state: JobState; count: number }>;
  /** Paused queues, in any order. */
  paused: readonly string[];
  /** Schedule time of the queue's longest-waiting eligible job, or null. */
  oldestPendingSince(queue: string): Awaitable<number | null>;
}

export function zeroCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

export async function assembleQueueCounts(source: QueueCountsSource): Promise<QueueCounts[]> {
  const byQueue = new Map<string, QueueCounts>();
  for (const row of source.counts) {
    let entry = byQueue.get(row.queue);
    if (entry === undefined) {
      entry = { queue: row.queue, counts: zeroCounts(), oldestPendingSince: null, paused: false };
      byQueue.set(row.queue, entry);
    }
    entry.counts[row.state] = row.count;
  }
  let unlisted = false;
  for (const queue of source.paused) {
    const entry = byQueue.get(queue);
    if (entry !== undefined) entry.paused = true;
    else {
      byQueue.set(queue, { queue, counts: zeroCounts(), oldestPendingSince: null, paused: true });
      unlisted = true;
    }
  }
  for (const entry of byQueue.values()) {
    if (entry.counts.queued + entry.counts.retry === 0) continue;
    entry.oldestPendingSince = await source.oldestPendingSince(entry.queue);
  }
  const queues = [...byQueue.values()];
  return unlisted ? queues.sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0)) : queues;
}
