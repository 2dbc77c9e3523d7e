/**
 * Claim (api.md "Semantics"): expired leases of the queue are recovered
 * first, a paused queue hands out nothing (api.md section B), and the
 * eligible jobs in claim order each get a new lease from the state machine.
 */
import { newLeaseToken } from "../../domain/lease-token.js";
import { publicJob } from "../../domain/job.js";
import * as machine from "../../domain/state-machine.js";
import type { ClaimedLease, ClaimRequestSpec } from "../store.js";
import type { WriteOperation } from "./scope.js";
import { applyTransitions, recoverExpired, type DecidedTransition } from "./transitions.js";

export interface ClaimLimits {
  /** Most expired leases of the queue recovered by one claim. */
  maxRecovered: number;
}

export function claimJobs(spec: ClaimRequestSpec, limits: ClaimLimits): WriteOperation<ClaimedLease[]> {
  return async (scope) => {
    const { port, now } = scope;
    await recoverExpired(scope, await port.selectExpiredLeases(now, limits.maxRecovered, spec.queue));
    if (await port.isQueuePaused(spec.queue)) return [];
    const jobs = await port.selectClaimable(spec.queue, now, spec.maxJobs);
    if (jobs.length === 0) return [];
    const decided: DecidedTransition[] = [];
    const leases: ClaimedLease[] = [];
    for (const job of jobs) {
      const { token, hash } = newLeaseToken();
      const transition = machine.claim(job, now, { workerId: spec.workerId, leaseDurationMs: spec.leaseDurationMs, tokenHash: hash });
      decided.push({ fromState: job.state, transition });
      leases.push({ job: publicJob(transition.job), leaseToken: token });
    }
    await applyTransitions(scope, decided);
    return leases;
  };
}
