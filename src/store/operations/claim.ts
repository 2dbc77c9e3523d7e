/**
 * Claim (docs/api.md "Semantics"): expired leases of the queue are recovered
 * first, a paused queue hands out nothing (docs/api.md "Queue controls"), the
 * queue's limits (docs/api.md "Queue limits", domain/queue-limits.ts) bound
 * how many leases it may hand out now, and the eligible jobs in claim order
 * each get a new lease from the state machine.
 */
import { newLeaseToken } from "../../domain/lease-token.js";
import { publicJob, type StoredJob } from "../../domain/job.js";
import {
  grantsForgottenThrough,
  hasGroupRules,
  hasLimits,
  holdOf,
  leaseRoom,
  rateWindowStart,
  type ClaimHold,
  type QueueConfig,
  type WindowGrants,
} from "../../domain/queue-limits.js";
import * as machine from "../../domain/state-machine.js";
import { andThen, valuesAtOnce } from "./steps.js";
import type { ClaimedLease, ClaimOutcome, ClaimRequestSpec } from "../store.js";
import type { Awaitable } from "../transaction-port.js";
import { claimingFrom, type OperationScope, type WriteOperation } from "./scope.js";
import { selectWithGroups, servedGroups, type GroupSelection } from "./group-claim.js";
import { LEASE_DEPENDENCIES_LIMIT } from "../../domain/dependencies.js";
import { applyTransitions, expireLeases, type DecidedTransition } from "./transitions.js";

export interface ClaimLimits {
  /** Most expired leases of the queue recovered by one claim. */
  maxRecovered: number;
}

const NO_GRANTS: WindowGrants = Object.freeze({ leases: 0, oldest: null });

/**
 * Every lease path (Claim, its long-poll, StreamClaims, Work) claims through
 * here, so the limits hold on all of them. A claim of a limited queue reads
 * the limits, the queue's running count and its grants in the rate window
 * in its own transaction, which the engine serializes with every other
 * claim of that queue (store/transaction-port.ts), and records its own
 * grant before it commits. It looks at one eligible job more than the
 * limits allow, to tell the caller whether a limit held a job back
 * (ClaimOutcome.heldBack): a waiting claimer then waits for what frees a
 * place, not for new work. A claim that found fewer eligible jobs than it
 * asked for reads, in the same transaction and at the same time, when the
 * queue's next job becomes eligible (ClaimOutcome.nextScheduleTime): the
 * time a waiting claimer sets its timer by.
 */
export function claimJobs(spec: ClaimRequestSpec, limits: ClaimLimits): WriteOperation<ClaimOutcome> {
  // Three reads at once (on PostgreSQL one round trip, run in this order):
  // the queue's config first, which on PostgreSQL locks its row when the
  // queue has limits, before the claim locks or writes anything (expired
  // leases included), so claims of the queue take turns holding nothing
  // else; then the expired leases to recover, and whether it is paused.
  return claimingFrom(spec.queue, (scope) =>
    andThen(
      valuesAtOnce(
        scope.port.queueConfig(spec.queue),
        scope.port.selectExpiredLeases(scope.now, limits.maxRecovered, spec.queue),
        scope.port.isQueuePaused(spec.queue),
      ),
      ([stored, expired, paused]) =>
        andThen(expireLeases(scope, expired), () => {
          if (paused) return { leases: [], heldBack: null, nextScheduleTime: null };
          const config = stored !== undefined && hasLimits(stored) ? stored : undefined;
          const claimed =
            config === undefined
              ? andThen(scope.port.selectClaimable(spec.queue, scope.now, spec.maxJobs), (jobs) =>
                  andThen(lease(scope, spec, jobs), (leases) => ({ leases, heldBack: null })),
                )
              : claimWithinLimits(scope, spec, config);
          return andThen(claimed, (c) => withNextScheduleTime(scope, spec, c, config));
        }),
    ),
  );
}

/**
 * Adds ClaimOutcome.nextScheduleTime: read in the claim's transaction at
 * the claim's time, so that a job that becomes due between the claim and
 * a later reading of the time is not left out of both.
 */
function withNextScheduleTime(
  scope: OperationScope,
  spec: ClaimRequestSpec,
  claimed: Omit<ClaimOutcome, "nextScheduleTime">,
  config: QueueConfig | undefined,
): Awaitable<ClaimOutcome> {
  const { heldBack } = claimed;
  const groupHold = heldBack !== null && "onFinish" in heldBack;
  if ((heldBack !== null && !groupHold) || claimed.leases.length >= spec.maxJobs) return { ...claimed, nextScheduleTime: null };
  return andThen(nextEligibleTime(scope, spec.queue, config), (next) => {
    // A claim that group rules held back also waits for the next job to come
    // due (another group's, or one the rules will let through).
    if (!groupHold) return { ...claimed, nextScheduleTime: next };
    const until = next === null ? heldBack.until : heldBack.until === null ? next : Math.min(heldBack.until, next);
    return { ...claimed, heldBack: { ...heldBack, until }, nextScheduleTime: null };
  });
}

/** When the queue's next job becomes eligible: its earliest later schedule_time, and under fair its next group due (a group parked by its rate window). */
function nextEligibleTime(scope: OperationScope, queue: string, config: QueueConfig | undefined): Awaitable<number | null> {
  const { port, now } = scope;
  return andThen(port.nextScheduledTime(queue, now), (next) =>
    config?.fair !== true
      ? next
      : andThen(port.nextGroupDueTime(queue, now), (due) => (due === null ? next : next === null ? due : Math.min(next, due))),
  );
}

/** A claim of a queue with limits: at most min(maxJobs, max_running - running, what the rate window has left). */
function claimWithinLimits(
  scope: OperationScope,
  spec: ClaimRequestSpec,
  config: QueueConfig,
): Awaitable<Omit<ClaimOutcome, "nextScheduleTime">> {
  const { port, now } = scope;
  const windowStart = rateWindowStart(config, now);
  return andThen(config.maxRunning > 0 ? port.countRunning(spec.queue, config.maxRunning) : 0, (running) =>
    andThen(config.rateLimit > 0 ? port.leaseGrantsSince(spec.queue, windowStart) : NO_GRANTS, (window) => {
      const room = leaseRoom(config, running, window);
      const allowed = Math.min(spec.maxJobs, room.running, room.rate);
      // One job past what the limits allow tells whether they held one back.
      const look = Math.min(spec.maxJobs, allowed + 1);
      const selected: Awaitable<GroupSelection> = hasGroupRules(config)
        ? selectWithGroups(port, spec.queue, config, now, windowStart, look)
        : andThen(port.selectClaimable(spec.queue, now, look), (jobs) => ({ jobs, hold: null }));
      return andThen(selected, ({ jobs: eligible, hold: groupHold }) => {
        const taken = eligible.slice(0, allowed);
        // The queue's limits held back a job the group rules let through; or
        // the group rules held some back and the claim got fewer than it asked.
        const heldBack: ClaimHold | null =
          eligible.length > allowed ? holdOf(config, room, window, now) : taken.length < spec.maxJobs ? groupHold : null;
        return andThen(lease(scope, spec, taken), (leases) =>
          andThen(
            config.rateLimit > 0 && leases.length > 0
              ? port.recordLeaseGrant(spec.queue, now, leases.length, grantsForgottenThrough(config, now))
              : undefined,
            () => andThen(recordGroupsServed(scope, spec.queue, config, taken), () => ({ leases, heldBack })),
          ),
        );
      });
    }),
  );
}

/** The groups the claim served: their grants (group_rate_limit) and, under fair, their turn taken. */
function recordGroupsServed(scope: OperationScope, queue: string, config: QueueConfig, taken: readonly StoredJob[]): Awaitable<void> {
  if (taken.length === 0 || !hasGroupRules(config)) return;
  const { port, now } = scope;
  const served = servedGroups(taken);
  const bounded = served.filter((g) => g.groupKey !== "");
  return andThen(
    config.groupRateLimit > 0 && bounded.length > 0
      ? port.recordGroupLeaseGrants(queue, now, bounded, grantsForgottenThrough(config, now))
      : undefined,
    () =>
      config.fair
        ? port.markGroupsServed(
            queue,
            served.map((g) => g.groupKey),
          )
        : undefined,
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
  return andThen(applyTransitions(scope, decided), () => withDependencyResults(scope, leases));
}

/** Leases of jobs with dependencies get their results (Lease.dependencies): one read for the claim's. */
function withDependencyResults(scope: OperationScope, leases: ClaimedLease[]): Awaitable<ClaimedLease[]> {
  const waited = leases.filter((l) => l.job.dependsOn.length > 0);
  if (waited.length === 0) return leases;
  return andThen(
    scope.port.dependencyResults(
      waited.map((l) => l.job.id),
      LEASE_DEPENDENCIES_LIMIT,
    ),
    (results) => {
      waited.forEach((l, i) => (l.dependencies = results[i]));
      return leases;
    },
  );
}
