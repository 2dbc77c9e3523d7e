/**
 * Leases claimed for a caller who can no longer receive them (its call or
 * stream ended while the claim committed) go back at once: the jobs are
 * eligible again and their attempts are refunded (a RELEASED event), rather
 * than sitting RUNNING for nobody until the lease expires.
 */
import type { Logger } from "../logger.js";
import type { ClaimedLease, Store } from "../store/store.js";

/** Releases every lease; one that cannot be released (database failing) expires instead, as any lease whose holder vanished. */
export async function releaseUnsent(store: Store, log: Logger | undefined, leases: ClaimedLease[]): Promise<void> {
  await Promise.all(
    leases.map(({ job, leaseToken }) =>
      store.release(job.id, leaseToken).catch((err: unknown) => {
        log?.warn("could not release an unsent lease", { jobId: job.id, queue: job.queue, error: err });
      }),
    ),
  );
}
