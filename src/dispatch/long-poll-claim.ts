/**
 * Claim's long-poll (ClaimRequest `wait`, see its proto comment): claim at
 * once, and while nothing is eligible park until a commit makes work pending
 * on the queue, the next delayed job is due (QueueWakeups), the wait ends or
 * the caller goes away. While a queue limit holds the claim back (docs/api.md
 * "Queue limits"), park until a lease of the queue finishes (max_running) or
 * the rate window frees a place (rate_limit) instead. StreamClaims
 * (claim-streams.ts) is the same idea for callers that stay.
 */
import type { Clock } from "../domain/clock.js";
import type { Logger } from "../logger.js";
import type { ClaimedLease, ClaimRequestSpec, Store } from "../store/store.js";
import type { QueueWakeups } from "./queue-wakeups.js";
import { releaseUnsent } from "./unsent-leases.js";

export interface LongPollClaimSpec extends ClaimRequestSpec {
  /** How long to wait for work when none is eligible; 0 answers at once. */
  waitMs: number;
}

export interface LongPollClaimDeps {
  store: Store;
  wakeups: QueueWakeups;
  clock: Clock;
  /** Where leases that could not be released are reported. Default: nowhere. */
  log?: Logger;
}

/**
 * Claims up to `spec.maxJobs` leases, long-polling up to `spec.waitMs`.
 *
 * `deliver` turns claimed leases into what the caller can send and leaves out
 * those it cannot (it dead-letters them itself). When every claimed lease
 * was left out, the next eligible job may be fine, so it claims again.
 * Resolves to `[]` when the wait ends with nothing, or when `signal` aborts:
 * a caller that has gone (or a server shutting down) is never handed a lease
 * nobody will work on; what was claimed for it is released.
 */
export async function claimWithin<T>(
  deps: LongPollClaimDeps,
  spec: LongPollClaimSpec,
  signal: AbortSignal,
  deliver: (claimed: ClaimedLease[]) => Promise<T[]>,
): Promise<T[]> {
  const { store, wakeups, clock } = deps;
  const { waitMs, ...claim } = spec;
  const deadline = clock.now() + waitMs;
  for (;;) {
    const generation = wakeups.generation(claim.queue);
    const finishedSince = wakeups.finishedLeases(claim.queue);
    const { leases: claimed, heldBack, nextScheduleTime } = await store.claimOutcome(claim);
    if (heldBack !== null) wakeups.heldBack(claim.queue, heldBack);
    if (signal.aborted) {
      // The caller went while the claim committed: nobody can receive these.
      await releaseUnsent(store, deps.log, claimed);
      return [];
    }
    const delivered = await deliver(claimed);
    if (delivered.length > 0) return delivered;
    // Only undeliverable jobs (now dead): claim again.
    if (claimed.length > 0) continue;
    if (clock.now() >= deadline) return [];
    const woken = await wakeups.waitForWork(
      claim.queue,
      generation,
      deadline,
      signal,
      heldBack === null ? { nextScheduleTime } : { held: { hold: heldBack, finishedSince } },
    );
    if (signal.aborted) {
      if (woken) wakeups.handOn(claim.queue);
      return [];
    }
  }
}
