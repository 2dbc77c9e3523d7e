/**
 * Timing defaults that more than one floor of the server applies, named
 * once so that the listener, the dispatchers and the service agree.
 */

/**
 * Idle interval between the keepalive messages of StreamClaims, Work and
 * WatchEvents: docs/api.md "WatchEvents: following events" (a keepalive
 * every 15 s while idle), so that proxies and load balancers do not cut a
 * quiet stream.
 */
export const KEEPALIVE_INTERVAL_MS = 15_000;

/**
 * How long a new connection may take to send its first byte (cleartext) or
 * to finish its TLS handshake, and the most the headers timeout lowers it
 * to: SECURITY.md, "Limits at the edge".
 */
export const FIRST_BYTE_TIMEOUT_MS = 10_000;

/**
 * The longest delay a Node.js timer keeps (2^31 - 1 ms, about 24.8 days): a
 * longer one fires at once. A wait for a time further ahead (a job delayed
 * by 30 days, the most a delay may be) arms a timer of this length and
 * looks again when it fires.
 */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;

/** A timer's delay for a wait of `ms`: never negative, never past LONGEST_TIMER_MS. */
export function timerDelay(ms: number): number {
  return Math.min(LONGEST_TIMER_MS, Math.max(0, ms));
}
