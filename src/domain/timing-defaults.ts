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
