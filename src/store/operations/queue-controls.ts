/**
 * Queue controls (api.md section B): pausing and resuming are queue-level
 * changes, not job events; a real change is announced with its commit so
 * claimers wake (resume) or give back what they hold unsent (pause).
 */
import type { WriteOperation } from "./scope.js";

export function pauseQueue(queue: string): WriteOperation<boolean> {
  return async ({ now, port, changes }) => {
    const changed = await port.pauseQueue(queue, now);
    if (changed) changes.queueControls.push({ queue, paused: true });
    return changed;
  };
}

export function resumeQueue(queue: string): WriteOperation<boolean> {
  return async ({ port, changes }) => {
    const changed = await port.resumeQueue(queue);
    if (changed) changes.queueControls.push({ queue, paused: false });
    return changed;
  };
}

