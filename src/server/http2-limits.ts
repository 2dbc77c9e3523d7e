/**
 * Per-connection limits of the HTTP/2 servers (h2c and TLS alike).
 *
 * Node's defaults let one connection open 2^32-1 concurrent streams: one
 * client once held 10,000 streams (742 MB) and slowed everyone else's calls
 * to seconds. These settings are advertised in the server's SETTINGS frame,
 * and nghttp2 refuses streams beyond them with RST_STREAM REFUSED_STREAM
 * (RFC 9113 §5.1.2), which clients retry once a stream ends.
 */
import type * as http2 from "node:http2";
import { SERVER_DEFAULTS } from "../config/defaults.js";

export interface Http2Limits {
  /** SETTINGS_MAX_CONCURRENT_STREAMS. Default {@link DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS}. */
  maxConcurrentStreams?: number;
}

export const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS = SERVER_DEFAULTS.http2MaxConcurrentStreams;

/**
 * Largest header block accepted (SETTINGS_MAX_HEADER_LIST_SIZE), 16 KiB as
 * Node's HTTP/1.1 `maxHeaderSize`: gRPC metadata and Connect headers are far
 * smaller.
 */
export const HTTP2_MAX_HEADER_LIST_BYTES = 16 * 1024;

/**
 * Memory one session may buffer (Node's `maxSessionMemory`, in MB) before new
 * streams are refused with ENHANCE_YOUR_CALM: Node's default of 10, written
 * here so that it is a decision, not an accident.
 */
export const HTTP2_MAX_SESSION_MEMORY_MB = 10;

/** Options for http2.createServer / createSecureServer. */
export function http2ServerLimits(limits: Http2Limits = {}): http2.ServerOptions {
  return {
    maxSessionMemory: HTTP2_MAX_SESSION_MEMORY_MB,
    maxHeaderListPairs: 128,
    settings: {
      maxConcurrentStreams: limits.maxConcurrentStreams ?? DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
      maxHeaderListSize: HTTP2_MAX_HEADER_LIST_BYTES,
    },
  };
}
