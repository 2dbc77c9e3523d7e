/**
 * Dependencies in the transaction of the change that moves them (docs/api.md
 * "Workflows"): a dependency's transition counts for each job that waits on
 * it (one UPDATE of those jobs, whatever their number), then releases the
 * WAITING ones whose dependencies are met and cancels those its failure
 * cancels, whose own dependents follow in turn. Fenced like every
 * transition: only a change the state machine accepted (a Complete with the
 * current token) is counted, so a late or repeated one releases nothing.
 */
import {
  cancelsDependent,
  countsChange,
  dependenciesMet,
  dependencyCancelReason,
  type DependentCounts,
} from "../../domain/dependencies.js";
import type { JobState, StoredJob } from "../../domain/job.js";
import * as machine from "../../domain/state-machine.js";
import { andThen, forEachInTurn } from "./steps.js";
import type { Awaitable } from "../transaction-port.js";
import type { OperationScope } from "./scope.js";

/** A decided transition and the state the job was in before it. */
export interface DecidedTransition {
  fromState: JobState;
  transition: machine.Transition;
}

/** What a dependency's change decided for one WAITING dependent. */
type Verdict = { release: true; counts: DependentCounts } | { release: false; cancelledBy: StoredJob; counts: DependentCounts };

/**
 * The transitions that the dependencies among `decided` cause in their
 * dependents (answered for applyTransitions to apply, which follows theirs
 * in turn); none when no changed job has dependents (the common case costs a
 * loop over `decided`).
 */
export function dependentTransitions(scope: OperationScope, decided: readonly DecidedTransition[]): Awaitable<DecidedTransition[]> {
  const changed = decided.filter((d) => d.transition.job.hasDependents && countsChange(d.fromState, d.transition.job.state) !== null);
  if (changed.length === 0) return [];
  const verdicts = new Map<string, Verdict>();
  return andThen(
    forEachInTurn(changed, (d) => {
      const dependency = d.transition.job;
      return andThen(scope.port.countDependencyChange(dependency.id, countsChange(d.fromState, dependency.state)!), (dependents) => {
        for (const dependent of dependents) {
          const earlier = verdicts.get(dependent.id);
          if (dependent.state !== "waiting" || (earlier !== undefined && !earlier.release)) {
            if (earlier !== undefined) earlier.counts = dependent;
            continue;
          }
          if (cancelsDependent(dependent.policy, dependency.state)) {
            verdicts.set(dependent.id, { release: false, cancelledBy: dependency, counts: dependent });
          } else if (dependenciesMet(dependent.counts, dependent.policy)) {
            verdicts.set(dependent.id, { release: true, counts: dependent });
          } else if (earlier !== undefined) {
            // Met by an earlier change of this transaction, not any more (a redrive moved one back).
            verdicts.delete(dependent.id);
          }
        }
      });
    }),
    () => {
      if (verdicts.size === 0) return [];
      const ids = [...verdicts.keys()].sort();
      return andThen(scope.port.findJobs(ids), (jobs) => {
        const next: DecidedTransition[] = [];
        jobs.forEach((job, i) => {
          if (job === undefined || job.state !== "waiting") return;
          const verdict = verdicts.get(ids[i])!;
          const current: StoredJob = { ...job, dependencyCounts: verdict.counts.counts };
          const transition = verdict.release
            ? machine.dependenciesMet(current, scope.now)
            : machine.cancel(current, scope.now, dependencyCancelReason(verdict.cancelledBy.id, verdict.cancelledBy.state));
          next.push({ fromState: job.state, transition });
        });
        return next;
      });
    },
  );
}
