/**
 * Dependencies between jobs (docs/api.md "Workflows"): how a dependency's
 * state counts for the jobs that wait on it, when a WAITING job is released,
 * and when a failed dependency cancels it. Pure rules; the store applies
 * them in the transaction of the dependency's change.
 */
import type { DependencyCounts, DependencyPolicy, JobState, StoredJob } from "./job.js";

/** How a dependency in `state` counts: COMPLETED, failed (DEAD or CANCELLED), or still pending. */
export type DependencyOutcome = "completed" | "failed" | "pending";

export function dependencyOutcome(state: JobState): DependencyOutcome {
  if (state === "completed") return "completed";
  return state === "dead" || state === "cancelled" ? "failed" : "pending";
}

/** What a dependency's change from `from` to `to` adds to its dependents' counts; null when it adds nothing. */
export function countsChange(from: JobState, to: JobState): { completed: number; failed: number } | null {
  const before = dependencyOutcome(from);
  const after = dependencyOutcome(to);
  if (before === after) return null;
  return {
    completed: (after === "completed" ? 1 : 0) - (before === "completed" ? 1 : 0),
    failed: (after === "failed" ? 1 : 0) - (before === "failed" ? 1 : 0),
  };
}

/**
 * Whether a job with these counts may run: every dependency COMPLETED, or
 * with IGNORE every one finished (a failed one counts as finished).
 */
export function dependenciesMet(counts: DependencyCounts, policy: DependencyPolicy): boolean {
  return policy === "ignore" ? counts.completed + counts.failed >= counts.total : counts.completed >= counts.total;
}

/**
 * Whether a dependency that is now in `state` cancels a WAITING job of this
 * policy: CANCEL on DEAD or CANCELLED, WAIT on CANCELLED only (a DEAD one
 * may be redriven), IGNORE never.
 */
export function cancelsDependent(policy: DependencyPolicy, state: JobState): boolean {
  if (policy === "cancel") return state === "dead" || state === "cancelled";
  return policy === "wait" && state === "cancelled";
}

/** The message of a cancellation caused by a dependency (JobEvent.message names the dependency). */
export function dependencyCancelReason(dependencyId: string, state: JobState): string {
  return `dependency ${dependencyId} is ${state}`;
}

/**
 * A new job with its dependencies, counted from their states at submit
 * (`states`, one per dependency, in depends_on order): WAITING unless they
 * are already met, then QUEUED (eligible by its own schedule_time).
 */
export function withDependencies(
  job: StoredJob,
  dependsOn: readonly string[],
  states: readonly JobState[],
  policy: DependencyPolicy,
): StoredJob {
  const counts: DependencyCounts = { total: dependsOn.length, completed: 0, failed: 0 };
  for (const state of states) {
    const outcome = dependencyOutcome(state);
    if (outcome === "completed") counts.completed++;
    else if (outcome === "failed") counts.failed++;
  }
  return {
    ...job,
    state: dependenciesMet(counts, policy) ? "queued" : "waiting",
    dependsOn,
    dependencyCounts: counts,
    dependencyPolicy: policy,
  };
}

/** A direct dependency's outcome as a lease carries it (Lease.dependencies). */
export interface DependencyResult {
  jobId: string;
  state: JobState;
  /** Compact JSON text of its result; null when it has none. */
  resultJson: string | null;
  lastError: string | null;
}

/** How many of a job's dependencies a lease carries (Lease.dependencies; dependencies_truncated beyond). */
export const LEASE_DEPENDENCIES_LIMIT = 100;

/** A job that depends on a changed dependency, as the change left its counts. */
export interface DependentCounts {
  id: string;
  /** Its state when the change was counted (the dependency's transition has not moved it yet). */
  state: JobState;
  policy: DependencyPolicy;
  counts: DependencyCounts;
}
