/**
 * Claim (api.md "Semantics"): expired leases of the queue are recovered
 * first, a paused queue hands out nothing (api.md section B), and the
 * eligible jobs in claim order each get a new lease from the state machine.
 */
import { newLeaseToken } from "../../domain/lease-token.js";
import { publicJob, type StoredJob } from "../../domain/job.js";
import * as machine from "../../domain/state-machine.js";
import { andThen } from "../steps.js";
import type { ClaimedLease, ClaimRequestSpec } from "../store.js";
import type { Awaitable } from "../transaction-port.js";
import type { OperationScope, WriteOperation } from "./scope.js";
import { applyTransitions, recoverExpired, type DecidedTransition } from "./transitions.js";

export interface ClaimLimits {
  /** Most expired leases of the queue recovered by one claim. */
  maxRecovered: number;
}

export function claimJobs(spec: ClaimRequestSpec, limits: ClaimLimits): WriteOperation<ClaimedLease[]> {
  return (scope) =>
    andThen(recoverExpired(scope, limits.maxRecovered, spec.queue), () =>
      andThen(scope.port.isQueuePaused(spec.queue), (paused) =>
        paused ? [] : andThen(scope.port.selectClaimable(spec.queue, scope.now, spec.maxJobs), (jobs) => lease(scope, spec, jobs)),
      ),
    );
}

/** A new lease on each job, through the state machine. */
function lease(scope: OperationScope, spec: ClaimRequestSpec, jobs: readonly StoredJob[]): Awaitable<ClaimedLease[]> {
  if (jobs.length === 0) return [];
  const decided: DecidedTransition[] = [];
  const leases: ClaimedLease[] = [];
  for (const job of jobs) {
    const { token, hash } = newLeaseToken();
    const transition = machine.claim(job, scope.now, { workerId: spec.workerId, leaseDurationMs: spec.leaseDurationMs, tokenHash: hash });
    decided.push({ fromState: job.state, transition });
    leases.push({ job: publicJob(transition.job), leaseToken: token });
  }
  return andThen(applyTransitions(scope, decided), () => leases);
}
