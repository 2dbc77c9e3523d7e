/**
 * Queue controls (api.md section B): pausing and resuming are queue-level
 * changes, not job events; a real change is announced with its commit so
 * claimers wake (resume) or give back what they hold unsent (pause).
 */
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
