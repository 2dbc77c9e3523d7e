/**
 * Retention (docs/operations.md "Retention"): deletes finished jobs past
 * their retention, with their events, and queue activity samples older
 * than a day (docs/api.md "Queue activity"), in small batches. Each batch
 * is one store transaction of at most `batchSize` jobs (or samples), and
 * the pass yields to the event loop between batches, so writers wait for
 * at most one batch (plus the commit they share with it) however large the
 * backlog. The background pruner runs a pass every `intervalMs`, whatever
 * the jobs' policy (the samples go after a day even when every job is
 * kept); `leasequeue prune` runs one pass now.
 */
import type { Clock } from "../domain/clock.js";
import { ACTIVITY_RETENTION_MS } from "../domain/queue-activity.js";
import { pruneCutoffs, prunesAnything, type RetentionPolicy } from "../domain/retention.js";
import type { Logger } from "../logger.js";
import type { PrunedJobs, Store } from "../store/store.js";

/** Jobs deleted per transaction unless told otherwise (docs/operations.md "Retention" says what one costs). */
export const DEFAULT_PRUNE_BATCH = 100;

export interface PrunePassOptions {
  store: Store;
  clock: Clock;
  policy: RetentionPolicy;
  /** Most jobs deleted by one transaction. Default DEFAULT_PRUNE_BATCH. */
  batchSize?: number;
  /** Ends the pass after the batch in progress. */
  signal?: AbortSignal;
  /** Told what each batch deleted, as soon as it committed. */
  onBatch?: (pruned: PrunedJobs[]) => void;
}

export interface PassSummary {
  /** Jobs deleted, by queue and state. */
  pruned: PrunedJobs[];
  jobs: number;
  events: number;
  /** Transactions that deleted jobs. */
  batches: number;
  /** Queue activity samples deleted (older than ACTIVITY_RETENTION_MS). */
  activitySamples: number;
  /** Cutoffs of the pass: jobs finished before these (epoch ms), by state. */
  cutoffs: ReturnType<typeof pruneCutoffs>;
}

/**
 * One retention pass: batches until nothing more is due (or `signal`
 * aborts). The cutoffs are fixed when the pass starts, so a pass ends even
 * while new jobs keep finishing.
 */
export async function prunePass(options: PrunePassOptions): Promise<PassSummary> {
  const { store, policy, signal, onBatch } = options;
  const batchSize = options.batchSize ?? DEFAULT_PRUNE_BATCH;
  const now = options.clock.now();
  const cutoffs = pruneCutoffs(policy, now);
  const summary: PassSummary = { pruned: [], jobs: 0, events: 0, batches: 0, activitySamples: 0, cutoffs };
  const beforeMinute = now - ACTIVITY_RETENTION_MS;
  while (signal?.aborted !== true) {
    const outcome = await store.pruneActivity({ beforeMinute, limit: batchSize });
    summary.activitySamples += outcome.samples;
    if (outcome.exhausted) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  if (!prunesAnything(policy)) return summary;
  const totals = new Map<string, PrunedJobs>();
  while (signal?.aborted !== true) {
    const outcome = await store.pruneJobs({ finishedBefore: cutoffs, limit: batchSize });
    summary.batches++;
    summary.events += outcome.events;
    for (const p of outcome.pruned) {
      summary.jobs += p.jobs;
      const key = `${p.queue}\0${p.state}`;
      const total = totals.get(key) ?? { queue: p.queue, state: p.state, jobs: 0 };
      total.jobs += p.jobs;
      totals.set(key, total);
    }
    if (outcome.pruned.length > 0) onBatch?.(outcome.pruned);
    if (outcome.exhausted) break;
    // Let the writers queued meanwhile commit before the next batch.
    await new Promise((resolve) => setImmediate(resolve));
  }
  summary.pruned = [...totals.values()].sort((a, b) => a.queue.localeCompare(b.queue) || a.state.localeCompare(b.state));
  return summary;
}

export interface PrunerOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  policy: RetentionPolicy;
  /** Time between the end of one pass and the start of the next (the first starts at once). Default 60 s. */
  intervalMs?: number;
  /** Most jobs deleted by one transaction. Default DEFAULT_PRUNE_BATCH. */
  batchSize?: number;
  /** Told what each batch deleted (metrics). */
  onPruned?: (pruned: PrunedJobs[]) => void;
}

export interface Pruner {
  /** Ends the pass in progress after its current batch and stops. */
  stop(): Promise<void>;
}

/** Starts the background pruner (with a policy that keeps every job, it prunes only activity samples). */
export function startPruner(options: PrunerOptions): Pruner {
  const { log, intervalMs = 60_000 } = options;
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const pass = async () => {
    try {
      const summary = await prunePass({ ...options, signal: stopping.signal, onBatch: options.onPruned });
      if (summary.jobs > 0) log.info("pruned finished jobs", { jobs: summary.jobs, events: summary.events, batches: summary.batches });
    } catch (err) {
      log.warn("pruning failed; will retry", { error: err });
    }
  };
  const schedule = (delayMs: number) => {
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      running = pass().finally(() => {
        running = undefined;
        schedule(intervalMs);
      });
    }, delayMs);
    timer.unref();
  };
  schedule(0);
  return {
    async stop() {
      stopping.abort();
      clearTimeout(timer);
      await running;
    },
  };
}
