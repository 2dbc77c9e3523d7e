/**
 * GetStats' model (Store.queueCounts), assembled the same way by every engine
 * from what its SQL reads: the non-zero counts per queue and state, the
 * paused queues and the configured ones (both listed even without jobs,
 * docs/api.md "Queue controls" and "Queue limits") and the oldest pending job
 * of each queue that has one; and the autoscaler's model of one queue
 * (Store.queueBacklog), from the same counts.
 */
import { JOB_STATES, type JobState } from "../../domain/job.js";
import { NO_QUEUE_LIMITS, pickConfig, type QueueConfig } from "../../domain/queue-limits.js";
import type { QueueBacklog, QueueCounts } from "../store.js";
import type { Awaitable } from "../transaction-port.js";

export interface QueueCountsSource {
  /** Non-zero counts, ordered by queue. */
  counts: ReadonlyArray<{ queue: string; state: JobState; count: number }>;
  /** Paused queues, in any order. */
  paused: readonly string[];
  /** Queues with a config (limits), in any order. */
  configs: ReadonlyArray<{ queue: string } & QueueConfig>;
  /** Schedule time of the queue's longest-waiting eligible job, or null. */
  oldestPendingSince(queue: string): Awaitable<number | null>;
}

export function zeroCounts(): Record<JobState, number> {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
}

export async function assembleQueueCounts(source: QueueCountsSource): Promise<QueueCounts[]> {
  const byQueue = new Map<string, QueueCounts>();
  const entryOf = (queue: string): QueueCounts => {
    let entry = byQueue.get(queue);
    if (entry === undefined) {
      entry = { queue, counts: zeroCounts(), oldestPendingSince: null, paused: false, config: { ...NO_QUEUE_LIMITS } };
      byQueue.set(queue, entry);
    }
    return entry;
  };
  for (const row of source.counts) entryOf(row.queue).counts[row.state] = row.count;
  const counted = byQueue.size;
  for (const queue of source.paused) entryOf(queue).paused = true;
  for (const row of source.configs) entryOf(row.queue).config = pickConfig(row);
  for (const entry of byQueue.values()) {
    if (entry.counts.queued + entry.counts.retry === 0) continue;
    entry.oldestPendingSince = await source.oldestPendingSince(entry.queue);
  }
  const queues = [...byQueue.values()];
  // Queues listed only for a pause or a config came after the counted ones.
  return byQueue.size > counted ? queues.sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0)) : queues;
}

/** What an engine reads in one statement for Store.queueBacklog. */
export interface QueueBacklogRow {
  /** QUEUED and RETRY jobs of the queue, from the maintained counts. */
  pending: number;
  running: number;
  /** Of the pending jobs, those whose schedule_time is after now. */
  waiting: number;
  /** The earliest schedule_time of those, or null. */
  nextEligibleTime: number | null;
  paused: boolean;
}

export function queueBacklogOf(row: QueueBacklogRow): QueueBacklog {
  return { eligible: row.pending - row.waiting, running: row.running, nextEligibleTime: row.nextEligibleTime, paused: row.paused };
}
