/**
 * Queue controls (docs/api.md "Queue controls") and queue limits (docs/api.md
 * "Queue limits"): pausing, resuming and changing a queue's limits are
 * queue-level changes, not job events; a real change is announced with its
 * commit so claimers wake (resume, new limits) or give back what they hold
 * unsent (pause).
 */
import { applyConfigUpdate, NO_QUEUE_LIMITS, sameConfig, type QueueConfig, type QueueConfigUpdate } from "../../domain/queue-limits.js";
import { andThen } from "./steps.js";
import type { WriteOperation } from "./scope.js";

export function pauseQueue(queue: string): WriteOperation<boolean> {
  return ({ now, port, changes }) =>
    andThen(port.pauseQueue(queue, now), (changed) => {
      if (changed) changes.queueControls.push({ queue, paused: true });
      return changed;
    });
}

export function resumeQueue(queue: string): WriteOperation<boolean> {
  return ({ port, changes }) =>
    andThen(port.resumeQueue(queue), (changed) => {
      if (changed) changes.queueControls.push({ queue, paused: false });
      return changed;
    });
}

/**
 * Applies an UpdateQueue to the queue's limits in the transaction (read,
 * merge, write: two concurrent updates of different fields both stay) and
 * answers the limits after it. A queue whose config is back to
 * NO_QUEUE_LIMITS keeps no row; one whose rate limit (or group rate limit)
 * goes away forgets its grants; one that turns fair gets a row per group
 * with pending jobs (TransactionPort.rebuildGroups), and one that stops
 * being fair drops them.
 */
export function updateQueueConfig(queue: string, update: QueueConfigUpdate): WriteOperation<QueueConfig> {
  return ({ now, port, changes }) =>
    andThen(port.queueConfig(queue), (stored) => {
      const current = stored ?? NO_QUEUE_LIMITS;
      const next = applyConfigUpdate(current, update);
      if (sameConfig(current, next)) return next;
      // A queue turning fair gets its groups' rows first (on PostgreSQL that
      // waits for the writers of jobs in flight, whose triggers saw it not fair).
      return andThen(!current.fair && next.fair ? port.rebuildGroups(queue) : undefined, () =>
        andThen(port.setQueueConfig(queue, sameConfig(next, NO_QUEUE_LIMITS) ? undefined : next, now), () =>
          andThen(current.rateLimit > 0 && next.rateLimit === 0 ? port.forgetLeaseGrants(queue) : undefined, () =>
            andThen(current.groupRateLimit > 0 && next.groupRateLimit === 0 ? port.forgetGroupLeaseGrants(queue) : undefined, () =>
              andThen(current.fair && !next.fair ? port.dropGroups(queue) : undefined, () =>
                andThen(port.isQueuePaused(queue), (paused) => {
                  changes.queueControls.push({ queue, paused, config: next });
                  return next;
                }),
              ),
            ),
          ),
        ),
      );
    });
}
