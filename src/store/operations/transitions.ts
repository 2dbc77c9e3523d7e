/**
 * Transitions of existing jobs: load -> decide (domain/state-machine.ts) ->
 * persist -> events and counts. By id (the worker's acknowledgements and
 * the operator's Redrive and Cancel), for expired leases, and for the
 * batches of a bulk transition (store/writing/bulk-transitions.ts).
 */
import { jobNotFound } from "../../domain/errors.js";
import { publicJob, type Job, type StoredJob } from "../../domain/job.js";
import * as machine from "../../domain/state-machine.js";
import { andThen } from "./steps.js";
import type { BulkAction, BulkBatchOutcome, BulkBatchSpec } from "../store.js";
import type { Awaitable } from "../transaction-port.js";
import { dependentTransitions, type DecidedTransition } from "./dependencies.js";
import { loadingJobs, type OperationScope, type WriteOperation } from "./scope.js";

export type { DecidedTransition };

/**
 * Records decided transitions' events and counts and persists them (one
 * port call for all), then those they cause in the jobs that depend on them
 * (store/operations/dependencies.ts), in the same transaction.
 */
export function applyTransitions(scope: OperationScope, decided: readonly DecidedTransition[]): Awaitable<void> {
  if (decided.length === 0) return;
  const jobs: StoredJob[] = [];
  for (const d of decided) {
    scope.changes.transitioned(d.fromState, d.transition);
    jobs.push(d.transition.job);
  }
  return andThen(scope.port.updateJobs(jobs), () => andThen(dependentTransitions(scope, decided), (next) => applyTransitions(scope, next)));
}

/** Loads one job, lets the state machine decide, persists the outcome. Unknown ids are JOB_NOT_FOUND. */
export function transitionJob(jobId: string, decide: (job: StoredJob, now: number) => machine.Transition): WriteOperation<Job> {
  return loadingJobs([jobId], (scope) =>
    andThen(scope.port.findJobs([jobId]), ([job]) => {
      if (job === undefined) throw jobNotFound(jobId);
      const transition = decide(job, scope.now);
      return andThen(applyTransitions(scope, [{ fromState: job.state, transition }]), () => publicJob(transition.job));
    }),
  );
}

export const heartbeatJob = (jobId: string, leaseToken: string, leaseDurationMs?: number, progressJson?: string) =>
  transitionJob(jobId, (job, now) => machine.heartbeat(job, leaseToken, now, leaseDurationMs, progressJson));

export const completeJob = (jobId: string, leaseToken: string, resultJson: string | null) =>
  transitionJob(jobId, (job, now) => machine.complete(job, leaseToken, now, resultJson));

export const failJob = (jobId: string, leaseToken: string, failure: { error: string; permanent: boolean; retryDelayMs?: number }) =>
  transitionJob(jobId, (job, now) => machine.fail(job, leaseToken, now, failure));

export const releaseJob = (jobId: string, leaseToken: string) => transitionJob(jobId, (job, now) => machine.release(job, leaseToken, now));

export const snoozeJob = (jobId: string, leaseToken: string, delayMs: number) =>
  transitionJob(jobId, (job, now) => machine.snooze(job, leaseToken, now, delayMs));

export const redriveJob = (jobId: string) => transitionJob(jobId, (job, now) => machine.redrive(job, now));

export const cancelJob = (jobId: string, reason: string, includeRunning = false) =>
  transitionJob(jobId, (job, now) => machine.cancel(job, now, reason, includeRunning));

/** Moves RUNNING jobs whose lease expired (of one queue, when given) to RETRY or DEAD; answers how many. */
export function recoverExpired(scope: OperationScope, limit: number, queue?: string): Awaitable<number> {
  return andThen(scope.port.selectExpiredLeases(scope.now, limit, queue), (expired) => expireLeases(scope, expired));
}

/** Ends the leases of `expired` (as selectExpiredLeases found them); how many. */
export function expireLeases(scope: OperationScope, expired: readonly StoredJob[]): Awaitable<number> {
  if (expired.length === 0) return 0;
  const decided = expired.map((job) => ({ fromState: job.state, transition: machine.expireLease(job, scope.now) }));
  return andThen(applyTransitions(scope, decided), () => expired.length);
}

/** The lease sweep: recovers up to `limit` expired leases of every queue. */
export function recoverExpiredLeases(limit: number): WriteOperation<number> {
  return (scope) => recoverExpired(scope, limit);
}

/** One batch of a bulk transition (RedriveAll, PurgeQueue). */
export function bulkTransitionBatch(spec: BulkBatchSpec): WriteOperation<BulkBatchOutcome> {
  return (scope) =>
    andThen(scope.port.selectJobsInStateBetween(spec.queue, spec.state, spec.afterId, spec.upToId, spec.scan), (jobs) => {
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
      const outcome = { moved: decided.length, lastExaminedId, exhausted: jobs.length < spec.scan && examined === jobs.length };
      return andThen(applyTransitions(scope, decided), () => outcome);
    });
}

/** What a bulk action does to one job: the state machine's own Redrive or Cancel. */
export function bulkTransitionOf(job: StoredJob, now: number, action: BulkAction): machine.Transition {
  return action.kind === "redrive" ? machine.redrive(job, now) : machine.cancel(job, now, action.reason);
}
