/**
 * Transitions of existing jobs: load -> decide (domain/state-machine.ts) ->
 * persist -> events and counts. By id (the worker's acknowledgements and
 * the operator's Redrive and Cancel), for expired leases, and for the
 * batches of a bulk transition (store/bulk-transitions.ts).
 */
import { jobNotFound } from "../../domain/errors.js";
import { publicJob, type Job, type JobState, type StoredJob } from "../../domain/job.js";
import * as machine from "../../domain/state-machine.js";
import { bulkTransitionOf } from "../bulk-transitions.js";
import type { BulkBatchOutcome, BulkBatchSpec } from "../store.js";
import { loadingJobs, type OperationScope, type WriteOperation } from "./scope.js";

/** A decided transition and the state the job was in before it. */
export interface DecidedTransition {
  fromState: JobState;
  transition: machine.Transition;
}

/** Persists decided transitions (one port call for all of them) and records their events and counts. */
export async function applyTransitions(scope: OperationScope, decided: readonly DecidedTransition[]): Promise<void> {
  if (decided.length === 0) return;
  await scope.port.updateJobs(decided.map((d) => d.transition.job));
  for (const d of decided) scope.changes.transitioned(d.fromState, d.transition);
}

/** Loads one job, lets the state machine decide, persists the outcome. Unknown ids are JOB_NOT_FOUND. */
export function transitionJob(jobId: string, decide: (job: StoredJob, now: number) => machine.Transition): WriteOperation<Job> {
  return loadingJobs([jobId], async (scope) => {
    const [job] = await scope.port.findJobs([jobId]);
    if (job === undefined) throw jobNotFound(jobId);
    const transition = decide(job, scope.now);
    await applyTransitions(scope, [{ fromState: job.state, transition }]);
    return publicJob(transition.job);
  });
}

export const heartbeatJob = (jobId: string, leaseToken: string, leaseDurationMs?: number) =>
  transitionJob(jobId, (job, now) => machine.heartbeat(job, leaseToken, now, leaseDurationMs));

export const completeJob = (jobId: string, leaseToken: string, resultJson: string | null) =>
  transitionJob(jobId, (job, now) => machine.complete(job, leaseToken, now, resultJson));

export const failJob = (jobId: string, leaseToken: string, failure: { error: string; permanent: boolean; retryDelayMs?: number }) =>
  transitionJob(jobId, (job, now) => machine.fail(job, leaseToken, now, failure));

export const releaseJob = (jobId: string, leaseToken: string) =>
  transitionJob(jobId, (job, now) => machine.release(job, leaseToken, now));

export const redriveJob = (jobId: string) => transitionJob(jobId, (job, now) => machine.redrive(job, now));

export const cancelJob = (jobId: string, reason: string) => transitionJob(jobId, (job, now) => machine.cancel(job, now, reason));

/** Moves RUNNING jobs whose lease expired to RETRY or DEAD; returns how many. */
export async function recoverExpired(scope: OperationScope, expired: readonly StoredJob[]): Promise<number> {
  await applyTransitions(
    scope,
    expired.map((job) => ({ fromState: job.state, transition: machine.expireLease(job, scope.now) })),
  );
  return expired.length;
}

/** The lease sweep: recovers up to `limit` expired leases of every queue. */
export function recoverExpiredLeases(limit: number): WriteOperation<number> {
  return async (scope) => recoverExpired(scope, await scope.port.selectExpiredLeases(scope.now, limit));
}

/** One batch of a bulk transition (RedriveAll, PurgeQueue). */
export function bulkTransitionBatch(spec: BulkBatchSpec): WriteOperation<BulkBatchOutcome> {
  return async (scope) => {
    const jobs = await scope.port.selectJobsInStateBetween(spec.queue, spec.state, spec.afterId, spec.upToId, spec.scan);
    const decided: DecidedTransition[] = [];
    let lastExaminedId: string | null = null;
    let examined = 0;
    for (const job of jobs) {
      if (decided.length >= spec.take) break;
      examined++;
      lastExaminedId = job.id;
      if (spec.task !== undefined && job.task !== spec.task) continue;
      decided.push({ fromState: job.state, transition: bulkTransitionOf(job, scope.now, spec.action) });
    }
    await applyTransitions(scope, decided);
    return { moved: decided.length, lastExaminedId, exhausted: jobs.length < spec.scan && examined === jobs.length };
  };
}
