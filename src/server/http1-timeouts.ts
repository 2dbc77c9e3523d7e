/**
 * HTTP/1.1 timeouts. They bound how long a client may take to *send* a
 * request; Node stops measuring once the request is complete, so a response
 * (a server stream) may then last hours. `server.timeout` (socket idleness)
 * stays 0 for the same reason.
 */
import { SERVER_DEFAULTS } from "../config/defaults.js";

/** The defaults (config/defaults.ts), as an http.Server names them. */
export const DEFAULT_HTTP1_TIMEOUTS = {
  headersTimeout: SERVER_DEFAULTS.requestHeadersTimeoutMs,
  requestTimeout: SERVER_DEFAULTS.requestTimeoutMs,
  keepAliveTimeout: SERVER_DEFAULTS.keepAliveTimeoutMs,
} as const;

export interface Http1TimeoutOptions {
  requestHeadersTimeoutMs?: number;
  requestTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
}

/** The fields of an http.Server (or an Http2SecureServer with allowHTTP1) that apply the timeouts. */
export interface Http1TimeoutSettings {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
}

export function http1Timeouts(opts: Http1TimeoutOptions): Http1TimeoutSettings {
  const headersTimeout = opts.requestHeadersTimeoutMs ?? DEFAULT_HTTP1_TIMEOUTS.headersTimeout;
  const requestTimeout = opts.requestTimeoutMs ?? DEFAULT_HTTP1_TIMEOUTS.requestTimeout;
  return {
    headersTimeout,
    requestTimeout,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? DEFAULT_HTTP1_TIMEOUTS.keepAliveTimeout,
    // How often Node checks the two timeouts above: 5 s, or finer for short timeouts.
    connectionsCheckingInterval: Math.min(5_000, Math.max(50, Math.floor(Math.min(headersTimeout, requestTimeout) / 4))),
  };
}
