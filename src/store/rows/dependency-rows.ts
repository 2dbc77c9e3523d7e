/** A row of countDependencyChange (both engines name its columns alike) as DependentCounts. */
import type { DependentCounts } from "../../domain/dependencies.js";
import type { DependencyPolicy, JobState } from "../../domain/job.js";

export interface DependentRow {
  id: string;
  state: JobState;
  policy: DependencyPolicy;
  total: number;
  completed: number;
  failed: number;
}

export function dependentCounts(r: DependentRow): DependentCounts {
  return { id: r.id, state: r.state, policy: r.policy, counts: { total: r.total, completed: r.completed, failed: r.failed } };
}
