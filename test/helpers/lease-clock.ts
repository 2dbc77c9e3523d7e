/**
 * A test server's manual clock that moves with the heartbeats its store
 * applies, so a test can hold leases past their duration on the server's
 * clock without sleeping (docs/development.md "How a test waits").
 *
 * A round ends when every followed job has had a heartbeat committed since
 * the last one; the clock then moves `stepMs` (shorter than the lease). Each
 * lease was extended at the clock's time before it moves, so none expires
 * while its heartbeats are applied; after rounds adding up to more than a
 * lease duration, a lease whose extensions were not applied would have
 * expired on the server's clock (its sweeper records LEASE_EXPIRED). When a
 * job's heartbeats stop, the rounds stop and a test waiting for them fails
 * at its deadline.
 */
import type { ManualClock } from "../../src/testing/index.js";
import type { Store } from "../../src/store/store.js";

export interface HeartbeatRounds {
  /** Rounds completed so far. */
  readonly rounds: number;
  /** The clock's time moved so far, in ms (rounds * stepMs). */
  readonly movedMs: number;
  /** Resolves once `n` rounds were completed in all; rejects naming the wait after `timeoutMs` (default 30 s). */
  reached(n: number, timeoutMs?: number): Promise<void>;
  /** Follows the heartbeats of another store too (a server restarted on the same database). */
  follow(store: Store): void;
  /** Stops moving the clock. */
  stop(): void;
}

/** Moves `clock` by `stepMs` each time every job in `jobIds` has had a heartbeat committed through `store` since the last move. */
export function moveClockWithHeartbeats(clock: ManualClock, store: Store, jobIds: readonly string[], stepMs: number): HeartbeatRounds {
  const followed = new Set(jobIds);
  const beaten = new Set<string>();
  const waiters = new Set<() => void>();
  const unsubscribes: Array<() => void> = [];
  let rounds = 0;
  let stopped = false;
  const follow = (s: Store) => {
    unsubscribes.push(
      s.onCommitted(({ events, unrecorded }) => {
        if (stopped) return;
        for (const e of [...events, ...unrecorded]) if (e.kind === "heartbeat" && followed.has(e.jobId)) beaten.add(e.jobId);
        if (beaten.size < followed.size) return;
        beaten.clear();
        clock.advance(stepMs);
        rounds++;
        for (const w of [...waiters]) w();
      }),
    );
  };
  follow(store);
  return {
    get rounds() {
      return rounds;
    },
    get movedMs() {
      return rounds * stepMs;
    },
    reached(n, timeoutMs = 30_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`waited ${timeoutMs} ms for ${n} rounds of heartbeats of ${[...followed].join(", ")}; saw ${rounds}`));
        }, timeoutMs);
        const check = () => {
          if (rounds < n) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      });
    },
    follow,
    stop() {
      stopped = true;
      for (const off of unsubscribes.splice(0)) off();
    },
  };
}
