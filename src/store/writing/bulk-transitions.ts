/**
 * RedriveAll and PurgeQueue (docs/api.md "Queue controls"): one transition
 * applied to every job of a queue in a state, in bounded batches.
 * Engine-neutral: an engine only selects a batch of rows and persists what
 * the state machine returns for each (Store.bulkTransition); this module
 * decides the batches.
 */
import type { BulkAction, BulkBatchSpec, BulkOptions, Store } from "../store.js";

export type { BulkOptions };

/** What a bulk transition asks of a store: where to stop, and one batch at a time. */
export type BulkStore = Pick<Store, "lastJobId" | "bulkTransition">;

/** Jobs per batch (and per transaction). */
export const BULK_BATCH_JOBS = 500;

/** The cancel reason PurgeQueue records on every job it cancels (docs/api.md "Queue controls"). */
export const PURGE_REASON = "purged";

/** DEAD -> QUEUED for every dead job of the queue (of `task` when given), at most `limit` (0: all). */
export function redriveAll(
  store: BulkStore,
  spec: { queue: string; task?: string; limit: number },
  options: BulkOptions = {},
): Promise<number> {
  return transitionAll(store, { ...spec, states: ["dead"], action: { kind: "redrive" } }, options);
}

/**
 * WAITING/QUEUED/RETRY -> CANCELLED (reason "purged") for every pending job
 * of the queue; the WAITING ones first, so that they are purged rather than
 * cancelled by a purged dependency (their dependents follow by policy).
 */
export function purgeQueue(store: BulkStore, queue: string, options: BulkOptions = {}): Promise<number> {
  const states: Array<BulkBatchSpec["state"]> = ["waiting", "queued", "retry"];
  return transitionAll(store, { queue, limit: 0, states, action: { kind: "cancel", reason: PURGE_REASON } }, options);
}

/**
 * Each batch is its own transaction of at most `batchJobs` jobs, so a
 * backlog of a million jobs never holds the write lock for long, and
 * workers and producers keep going between batches. The jobs are walked in
 * id order between two keyset bounds: after the last id examined, and up to
 * the largest id in the state when the operation began. So every job is
 * visited at most once (a redriven job that dies again is not redriven a
 * second time), and the operation ends while producers keep submitting.
 * What it covers: every job that is in the state when the call begins and
 * still is when its batch runs; jobs that enter the state meanwhile may or
 * may not be included. The count returned is exactly the jobs moved.
 */
async function transitionAll(
  store: BulkStore,
  spec: { queue: string; task?: string; limit: number; states: Array<BulkBatchSpec["state"]>; action: BulkAction },
  { batchJobs = BULK_BATCH_JOBS, signal }: BulkOptions,
): Promise<number> {
  let moved = 0;
  for (const state of spec.states) {
    const upToId = await store.lastJobId(spec.queue, state);
    if (upToId === null) continue;
    let afterId = "";
    for (;;) {
      const take = spec.limit === 0 ? batchJobs : Math.min(batchJobs, spec.limit - moved);
      if (take <= 0) return moved;
      signal?.throwIfAborted();
      const batch = await store.bulkTransition({
        queue: spec.queue,
        state,
        task: spec.task,
        afterId,
        upToId,
        scan: batchJobs,
        take,
        action: spec.action,
      });
      moved += batch.moved;
      if (batch.exhausted || batch.lastExaminedId === null) break;
      afterId = batch.lastExaminedId;
    }
  }
  return moved;
}
