/**
 * Every write a Store offers, by name, as data: the name and the arguments
 * of one call, and how that call becomes an engine-neutral write operation
 * (store/operations/): the one table OperationStore's writes go through
 * on both engines.
 */
import type { QueueConfigUpdate } from "../../domain/queue-limits.js";
import type { ScheduleSpec } from "../../domain/schedule.js";
import type { NewJob } from "../../domain/submission.js";
import { claimJobs } from "../operations/claim.js";
import { pruneActivitySamples, pruneFinishedJobs } from "../operations/prune.js";
import { pauseQueue, resumeQueue, updateQueueConfig } from "../operations/queue-controls.js";
import { createSchedule, deleteSchedule, fireDueSchedules } from "../operations/schedules.js";
import type { WriteOperation } from "../operations/scope.js";
import { submitJobs } from "../operations/submit.js";
import {
  bulkTransitionBatch,
  cancelJob,
  completeJob,
  failJob,
  heartbeatJob,
  recoverExpiredLeases,
  redriveJob,
  releaseJob,
  snoozeJob,
} from "../operations/transitions.js";
import { probeWrite } from "../operations/write-probe.js";
import type { ActivityPruneSpec, BulkBatchSpec, ClaimRequestSpec, PruneSpec } from "../store.js";

/** The operation of each write, from its arguments (all plain data). */
export const WRITE_OPERATIONS = {
  submit: (jobs: NewJob[]) => submitJobs(jobs),
  claim: (spec: ClaimRequestSpec, maxRecovered: number) => claimJobs(spec, { maxRecovered }),
  heartbeat: (jobId: string, leaseToken: string, leaseDurationMs?: number, progressJson?: string) =>
    heartbeatJob(jobId, leaseToken, leaseDurationMs, progressJson),
  complete: (jobId: string, leaseToken: string, resultJson: string | null) => completeJob(jobId, leaseToken, resultJson),
  fail: (jobId: string, leaseToken: string, failure: { error: string; permanent: boolean; retryDelayMs?: number }) =>
    failJob(jobId, leaseToken, failure),
  release: (jobId: string, leaseToken: string) => releaseJob(jobId, leaseToken),
  snooze: (jobId: string, leaseToken: string, delayMs: number) => snoozeJob(jobId, leaseToken, delayMs),
  redrive: (jobId: string) => redriveJob(jobId),
  cancel: (jobId: string, reason: string, includeRunning?: boolean) => cancelJob(jobId, reason, includeRunning),
  recoverExpiredLeases: (maxRecovered: number) => recoverExpiredLeases(maxRecovered),
  pruneJobs: (spec: PruneSpec) => pruneFinishedJobs(spec),
  pruneActivity: (spec: ActivityPruneSpec) => pruneActivitySamples(spec),
  pauseQueue: (queue: string) => pauseQueue(queue),
  resumeQueue: (queue: string) => resumeQueue(queue),
  updateQueueConfig: (queue: string, update: QueueConfigUpdate) => updateQueueConfig(queue, update),
  bulkTransition: (spec: BulkBatchSpec) => bulkTransitionBatch(spec),
  createSchedule: (spec: ScheduleSpec) => createSchedule(spec),
  deleteSchedule: (name: string) => deleteSchedule(name),
  fireDueSchedules: (limit: number, newTraces = false) => fireDueSchedules(limit, newTraces),
  probeWrite: () => probeWrite(),
};

export type WriteName = keyof typeof WRITE_OPERATIONS;
export type WriteArgs<N extends WriteName> = Parameters<(typeof WRITE_OPERATIONS)[N]>;
export type WriteResult<N extends WriteName> = ReturnType<(typeof WRITE_OPERATIONS)[N]> extends WriteOperation<infer T> ? T : never;

/** The operation a call names; an unknown name is a fault of the caller. */
export function operationOf<N extends WriteName>(name: N, args: WriteArgs<N>): WriteOperation<WriteResult<N>> {
  const make = WRITE_OPERATIONS[name] as ((...a: unknown[]) => WriteOperation<WriteResult<N>>) | undefined;
  if (typeof make !== "function" || !Object.hasOwn(WRITE_OPERATIONS, name)) throw new TypeError(`no write operation named ${String(name)}`);
  return make(...(args as unknown[]));
}
