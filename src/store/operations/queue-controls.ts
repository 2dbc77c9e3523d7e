/**
 * Queue controls (docs/api.md "Queue controls") and queue limits (docs/api.md
 * "Queue limits"): pausing, resuming and changing a queue's limits are
 * queue-level changes, not job events; a real change is announced with its
 * commit so claimers wake (resume, new limits) or give back what they hold
 * unsent (pause).
 */
import { applyConfigUpdate, NO_QUEUE_LIMITS, sameConfig, type QueueConfig, type QueueConfigUpdate } from "../../domain/queue-limits.js";
import { andThen } from "../steps.js";
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
 * NO_QUEUE_LIMITS keeps no row; one whose rate limit goes away forgets its
 * grants.
 */
export function updateQueueConfig(queue: string, update: QueueConfigUpdate): WriteOperation<QueueConfig> {
  return ({ now, port, changes }) =>
    andThen(port.queueConfig(queue), (stored) => {
      const current = stored ?? NO_QUEUE_LIMITS;
      const next = applyConfigUpdate(current, update);
      if (sameConfig(current, next)) return next;
      return andThen(port.setQueueConfig(queue, sameConfig(next, NO_QUEUE_LIMITS) ? undefined : next, now), () =>
        andThen(current.rateLimit > 0 && next.rateLimit === 0 ? port.forgetLeaseGrants(queue) : undefined, () =>
          andThen(port.isQueuePaused(queue), (paused) => {
            changes.queueControls.push({ queue, paused, config: next });
            return next;
          }),
        ),
      );
    });
}
