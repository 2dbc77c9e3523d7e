/**
 * The API port: gRPC, gRPC-Web and Connect on one port (docs/api.md
 * "Protocols and paths"), composed from one file per concern (startApiListener).
 */
import * as http2 from "node:http2";
import { FIRST_BYTE_TIMEOUT_MS } from "../domain/timing-defaults.js";
import { continueIfWithinLimit, refuseOversizedBodies } from "./body-limits.js";
import { ConnectionDrain, DEFAULT_CLOSE_GRACE_MS } from "./connection-drain.js";
import { DEFAULT_HTTP1_TIMEOUTS, http1Timeouts } from "./http1-timeouts.js";
import { DEFAULT_HTTP2_PING_INTERVAL_MS, keepSessionAlive } from "./http2-keepalive.js";
import { http2ServerLimits } from "./http2-limits.js";
import { limitHttp2RequestTime } from "./http2-request-timeout.js";
import { resetAfterTrailers } from "./http2-stream-end.js";
import { listen, type BoundAddress } from "./listen.js";
import type { NodeRequestHandler } from "./node-request-handler.js";
import { createCleartextPortServer, createTlsPortServer, type PortServer } from "./port-servers.js";

export interface ApiListenerOptions {
  /** Interface to bind, e.g. "127.0.0.1". */
  host: string;
  /** Port to bind; 0 picks any free port (read the real one from `address`). */
  port: number;
  /** Node request handler (from connectNodeAdapter) serving every request, HTTP/1.1 and HTTP/2 alike. */
  handler: NodeRequestHandler;
  /** Optional TLS: PEM strings. With TLS, ALPN offers h2 and http/1.1 on the one port. Default: cleartext (h2c and HTTP/1.1). */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /**
   * Max request body bytes. A request whose Content-Length is larger is refused
   * before its body is read; see {@link refuseOversizedBodies}.
   */
  maxRequestBytes: number;
  /**
   * A cleartext connection that sends no byte for this long before its protocol
   * is known is dropped; with TLS, the handshake must finish within it.
   * Default 10_000.
   */
  firstByteTimeoutMs?: number;
  /**
   * Every open HTTP/2 session is sent a PING this often, so that proxies and
   * NAT tables that drop quiet connections keep long idle streams (StreamClaims,
   * WatchEvents) open. A session whose previous PING is still unanswered at the
   * next tick is treated as a dead peer and destroyed. Default 30_000.
   */
  http2PingIntervalMs?: number;
  /** Most concurrent streams per HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). Default 256. */
  http2MaxConcurrentStreams?: number;
  /** A request's headers must arrive within this (HTTP/1.1 `headersTimeout`). Default 30_000. */
  requestHeadersTimeoutMs?: number;
  /**
   * A whole request must arrive within this: HTTP/1.1 `requestTimeout`, and
   * for HTTP/2 the rule of http2-request-timeout.ts. Never cuts a response.
   * Default 60_000.
   */
  requestTimeoutMs?: number;
  /** Idle HTTP/1.1 keep-alive connections are closed after this. Default 65_000. */
  keepAliveTimeoutMs?: number;
  /** Paths of client-streaming and bidi methods, exempt from the HTTP/2 request timeout. */
  isStreamingRequest?: (path: string) => boolean;
  /**
   * Errors that belong to no single request (e.g. a failed accept()). Default:
   * written to stderr, never thrown.
   */
  onError?: (error: Error) => void;
}

export interface ApiListener {
  /** Real bound address, url like http://127.0.0.1:8080 (https with TLS). Log it: a caller that asked for port 0 finds the port here. */
  readonly address: BoundAddress;
  /**
   * Stop accepting, let in-flight requests finish up to `graceMs` (default
   * 10_000), then destroy what is left (HTTP/2 sessions included). Resolves
   * when every connection is closed. Calling it again returns the same promise.
   *
   * Server streams end only when their handler returns: abort the adapter's
   * `shutdownSignal` before (or while) calling this, or they are cut at the
   * end of the grace period.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Starts the API port. What each part does:
 * - port-servers.ts: cleartext (h2c and HTTP/1.1 by preface sniffing,
 *   protocol-sniffing.ts) or TLS (ALPN);
 * - body-limits.ts: declared bodies over `maxRequestBytes`, and
 *   `Expect: 100-continue`;
 * - http1-timeouts.ts, http2-limits.ts, http2-request-timeout.ts: hostile
 *   clients bounded below any RPC;
 * - http2-keepalive.ts: PINGs on every HTTP/2 session;
 * - http2-stream-end.ts: bidi streams reset after their trailers;
 * - connection-drain.ts: connection tracking and bounded shutdown (an
 *   HTTP/2 session's GOAWAY once the client has stopped sending on it);
 * - listen.ts: binding and the real address, shared with the side port.
 */
export async function startApiListener(opts: ApiListenerOptions): Promise<ApiListener> {
  const guarded = limitHttp2RequestTime(refuseOversizedBodies(opts.maxRequestBytes, opts.handler), {
    requestTimeoutMs: opts.requestTimeoutMs ?? DEFAULT_HTTP1_TIMEOUTS.requestTimeout,
    isStreamingRequest: opts.isStreamingRequest,
  });
  // eslint-disable-next-line prefer-const -- the drain callback below may read it before it is assigned
  let port: PortServer | undefined;
  const drain = new ConnectionDrain(() => port?.closeIdleHttp1());
  const serveNow: NodeRequestHandler = (req, res) => {
    if (res instanceof http2.Http2ServerResponse) resetAfterTrailers(res);
    guarded(req, res);
  };
  // Now, or once a draining HTTP/2 session's GOAWAY is out (connection-drain.ts).
  const serve: NodeRequestHandler = (req, res) => drain.request(req, res, serveNow);
  const pingIntervalMs = opts.http2PingIntervalMs ?? DEFAULT_HTTP2_PING_INTERVAL_MS;
  const serverOptions = {
    serve,
    serveExpectingContinue: continueIfWithinLimit(opts.maxRequestBytes, serve),
    onSession: (session: http2.ServerHttp2Session) => {
      keepSessionAlive(session, pingIntervalMs);
      drain.session(session);
    },
    http1Timeouts: http1Timeouts(opts),
    http2Options: http2ServerLimits({ maxConcurrentStreams: opts.http2MaxConcurrentStreams }),
    firstByteTimeoutMs: opts.firstByteTimeoutMs ?? FIRST_BYTE_TIMEOUT_MS,
    drain,
  };
  port = opts.tls ? createTlsPortServer(opts.tls, serverOptions) : createCleartextPortServer(serverOptions);
  const server = port.server;
  const address = await listen(server, {
    host: opts.host,
    port: opts.port,
    scheme: opts.tls ? "https" : "http",
    onError: opts.onError ?? ((error: Error) => console.error("api listener:", error)),
  });
  return { address, close: (graceMs = DEFAULT_CLOSE_GRACE_MS) => drain.drain(server, graceMs) };
}
