/**
 * PINGs on every HTTP/2 session of the API port. The connect-node server
 * sends none of its own, and proxies and NAT tables drop connections that
 * stay quiet: long idle streams (StreamClaims, WatchEvents, Work) would be
 * cut without a word. A PING still unanswered at the next tick means a dead
 * peer (or one stuck in the middle of a header block, see
 * http2-request-timeout.ts), and the session is destroyed.
 */
import type * as http2 from "node:http2";

export const DEFAULT_HTTP2_PING_INTERVAL_MS = 30_000;

/** Pings `session` every `intervalMs` until it closes. */
export function keepSessionAlive(session: http2.ServerHttp2Session, intervalMs: number): void {
  let awaitingAck = false;
  const pinger = setInterval(() => {
    if (session.destroyed) return;
    if (awaitingAck) {
      session.destroy();
      return;
    }
    awaitingAck = true;
    try {
      session.ping((err) => {
        if (!err) awaitingAck = false;
      });
    } catch {
      // session is going away
    }
  }, intervalMs);
  pinger.unref();
  session.once("close", () => clearInterval(pinger));
}
