/**
 * Store calls the tests make often, through the same path the server takes.
 */
import type { ClaimedLease, ClaimRequestSpec, Store } from "../../src/store/store.js";

/** A claim's leases (Store.claimOutcome, as Claim and StreamClaims call it), for tests that do not look at what a queue limit held back. */
export function claimLeases(store: Pick<Store, "claimOutcome">, spec: ClaimRequestSpec): Promise<ClaimedLease[]> {
  return store.claimOutcome(spec).then((outcome) => outcome.leases);
}
