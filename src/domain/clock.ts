/**
 * Time is injected everywhere a decision depends on it (lease expiry,
 * backoff, schedules), so tests move a fake clock instead of sleeping.
 *
 * Two readings of the host's time matter: its wall clock (`now`), which
 * NTP may step and an operator may set, and its monotonic clock
 * (`monotonic`), which only moves forward at a steady rate. A store whose
 * database keeps its own clock (PostgreSQL) follows the database's time on
 * the host's monotonic clock (store/database/database-clock.ts), so a host whose wall
 * clock is off or jumps never decides ownership on its own time.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** A host's clocks: its wall time and a monotonic reading (milliseconds from an arbitrary origin). */
export interface HostClock extends Clock {
  monotonic(): number;
}

export const systemClock: HostClock = { now: () => Date.now(), monotonic: () => performance.now() };

/** A clock's host readings: a plain Clock's monotonic reading is its wall time (a manual clock, a test's offset clock). */
export function hostClock(clock: Clock): HostClock {
  if ("monotonic" in clock && typeof clock.monotonic === "function") return clock as HostClock;
  return { now: () => clock.now(), monotonic: () => clock.now() };
}
