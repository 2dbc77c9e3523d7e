/**
 * Retention (docs/operations.md "Retention"): completed and cancelled jobs
 * are deleted, with their events, once their finish_time is older than the
 * retention; dead jobs only when a dead retention is set. A retention of 0
 * keeps those jobs forever. The rule lives here so that every engine, the
 * background pruner and `leasequeue prune` apply the same cutoffs.
 */
import type { JobState } from "./job.js";

/** The states a job can be pruned from: the ones with a finish_time. */
export type PrunableState = Extract<JobState, "completed" | "cancelled" | "dead">;

export interface RetentionPolicy {
  /** Completed and cancelled jobs are kept this long after they finished; 0 keeps them forever. */
  retentionMs: number;
  /** Dead jobs are kept this long after they died; null (the default) or 0 keeps them forever. */
  deadRetentionMs: number | null;
}

/** docs/configuration.md: `LEASEQUEUE_RETENTION` defaults to 168h; dead jobs are kept unless `LEASEQUEUE_DEAD_RETENTION` is set. */
export const DEFAULT_RETENTION: RetentionPolicy = { retentionMs: 168 * 3_600_000, deadRetentionMs: null };

/** Jobs of a state finished before its cutoff (epoch ms) may be deleted; a state left out is kept. */
export type PruneCutoffs = Partial<Record<PrunableState, number>>;

/** The cutoffs of a pruning pass that starts at `now`. */
export function pruneCutoffs(policy: RetentionPolicy, now: number): PruneCutoffs {
  const cutoffs: PruneCutoffs = {};
  if (policy.retentionMs > 0) {
    cutoffs.completed = now - policy.retentionMs;
    cutoffs.cancelled = now - policy.retentionMs;
  }
  if (policy.deadRetentionMs !== null && policy.deadRetentionMs > 0) cutoffs.dead = now - policy.deadRetentionMs;
  return cutoffs;
}

/** True when the policy can delete anything at all. */
export function prunesAnything(policy: RetentionPolicy): boolean {
  return Object.keys(pruneCutoffs(policy, 0)).length > 0;
}
