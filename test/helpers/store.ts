/**
 * Store calls the tests make often, through the same path the server takes.
 */
import type { ManualClock } from "../../src/testing/index.js";
import type { ClaimedLease, ClaimOutcome, ClaimRequestSpec, Store } from "../../src/store/store.js";

/** A claim's leases (Store.claimOutcome, as Claim and StreamClaims call it), for tests that do not look at what a queue limit held back. */
export function claimLeases(store: Pick<Store, "claimOutcome">, spec: ClaimRequestSpec): Promise<ClaimedLease[]> {
  return store.claimOutcome(spec).then((outcome) => outcome.leases);
}

/**
 * The store with claims whose commit takes `commitMs` on the manual clock:
 * each claim reads the time it was called at and answers `commitMs` later,
 * as a real commit takes time. `idle()` resolves once no claim has been in
 * flight for a few turns of the event loop (a pump or long-poll has settled).
 */
export function slowClaims<S extends Store>(store: S, clock: ManualClock, commitMs: number): { store: S; idle: () => Promise<void> } {
  let inFlight = 0;
  const slow = new Proxy(store, {
    get(target, prop) {
      if (prop === "claimOutcome") {
        return async (spec: ClaimRequestSpec): Promise<ClaimOutcome> => {
          inFlight++;
          try {
            return await target.claimOutcome(spec);
          } finally {
            clock.advance(commitMs);
            inFlight--;
          }
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  const idle = async () => {
    for (let quiet = 0; quiet < 3; quiet = inFlight === 0 ? quiet + 1 : 0) await new Promise((resolve) => setImmediate(resolve));
  };
  return { store: slow, idle };
}

/** The QueueConfig fields of the group rules (docs/api.md "Groups"), all off: a config literal of the queue limits spreads it. */
export const NO_GROUP_RULES = Object.freeze({ groupMaxRunning: 0, groupRateLimit: 0, fair: false, ordered: false });
