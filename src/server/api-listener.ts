import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { Code } from "@connectrpc/connect";
import { http2ServerLimits } from "./http2-limits.js";
import { limitHttp2RequestTime } from "./http2-request-timeout.js";
import { refuseRequest } from "./protocol-refusal.js";

/**
 * A Node request handler that serves HTTP/1.1 and HTTP/2 requests alike, such
 * as the one `connectNodeAdapter()` returns.
 */
export type NodeRequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

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
  readonly address: { host: string; port: number; url: string };
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

/** RFC 9113 §3.4: every HTTP/2 connection starts with these 24 octets. */
const HTTP2_CLIENT_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

const DEFAULT_FIRST_BYTE_TIMEOUT_MS = 10_000;
const DEFAULT_HTTP2_PING_INTERVAL_MS = 30_000;
const DEFAULT_CLOSE_GRACE_MS = 10_000;

/**
 * HTTP/1.1 timeouts. They bound how long a client may take to *send* a
 * request; Node stops measuring once the request is complete, so a response
 * (a server stream) may then last hours. `server.timeout` (socket idleness)
 * stays 0 for the same reason.
 */
export const DEFAULT_HTTP1_TIMEOUTS = {
  /** Headers of one request must arrive within this (slowloris guard). */
  headersTimeout: 30_000,
  /** A whole request, body included, must arrive within this; bodies are small (maxRequestBytes). */
  requestTimeout: 60_000,
  /** An idle keep-alive connection is closed after this; longer than the 60 s idle timeout of common load balancers. */
  keepAliveTimeout: 65_000,
} as const;

function http1Timeouts(opts: ApiListenerOptions) {
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

/**
 * Looks at the first bytes of a cleartext connection: "h2" once they are the
 * whole HTTP/2 client preface, "http/1.1" as soon as they stop matching it,
 * undefined while they are a proper prefix of it (wait for more).
 */
export function sniffProtocol(firstBytes: Uint8Array): "h2" | "http/1.1" | undefined {
  const n = Math.min(firstBytes.length, HTTP2_CLIENT_PREFACE.length);
  for (let i = 0; i < n; i++) {
    if (firstBytes[i] !== HTTP2_CLIENT_PREFACE[i]) return "http/1.1";
  }
  return n === HTTP2_CLIENT_PREFACE.length ? "h2" : undefined;
}

/**
 * Wraps a handler so that a request whose Content-Length exceeds `maxBytes` is
 * answered at once, `resource_exhausted` without reading its body, in the
 * error shape of the request's own protocol (see protocol-refusal.ts: HTTP 429
 * for Connect unary, `grpc-status: 8` for gRPC, 413 for anything else). An
 * HTTP/1.1 connection is closed after the response; an HTTP/2 stream is reset
 * with NO_ERROR,
 * which asks the client to stop sending (RFC 9113 §8.1). Bodies without a
 * Content-Length (chunked, or HTTP/2 without the header) pass through; the
 * adapter's `readMaxBytes` refuses those while reading.
 */
export function refuseOversizedBodies(maxBytes: number, handler: NodeRequestHandler): NodeRequestHandler {
  return (req, res) => {
    const declared = declaredBodyBytes(req);
    if (declared !== undefined && declared > maxBytes) {
      refuseRequest(req, res, {
        code: Code.ResourceExhausted,
        message: `request body of ${declared} bytes exceeds the limit of ${maxBytes} bytes (LEASEQUEUE_MAX_REQUEST_BYTES)`,
        plainStatus: 413,
      });
      return;
    }
    handler(req, res);
  };
}

function declaredBodyBytes(req: http.IncomingMessage | http2.Http2ServerRequest): number | undefined {
  const value = req.headers["content-length"];
  if (typeof value !== "string" || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

/**
 * Starts the API port: gRPC, gRPC-Web and Connect on one port.
 *
 * Cleartext: each connection's first bytes are compared with the HTTP/2 client
 * preface, and the socket is handed to an HTTP/2 server (h2c with prior
 * knowledge, as gRPC clients do) or to an HTTP/1.1 server. `http2.createServer`
 * alone cannot do this: its `allowHTTP1` works only with TLS.
 * With TLS, ALPN picks h2 or http/1.1 (clients that offer no ALPN get HTTP/1.1).
 *
 * HTTP/2 sessions are pinged every `http2PingIntervalMs` (30 s) so idle
 * streams survive proxies; see {@link ApiListenerOptions.http2PingIntervalMs}.
 *
 * Hostile clients are bounded here, below any RPC: declared bodies over
 * `maxRequestBytes` (refuseOversizedBodies), HTTP/1.1 header, request and
 * keep-alive timeouts (Node's own), the HTTP/2 stream and header limits
 * (http2-limits.ts) and the HTTP/2 request timeout (http2-request-timeout.ts).
 */
export async function startApiListener(opts: ApiListenerOptions): Promise<ApiListener> {
  const firstByteTimeoutMs = opts.firstByteTimeoutMs ?? DEFAULT_FIRST_BYTE_TIMEOUT_MS;
  const pingIntervalMs = opts.http2PingIntervalMs ?? DEFAULT_HTTP2_PING_INTERVAL_MS;
  const onError = opts.onError ?? ((error: Error) => console.error("api listener:", error));
  const guarded = limitHttp2RequestTime(refuseOversizedBodies(opts.maxRequestBytes, opts.handler), {
    requestTimeoutMs: opts.requestTimeoutMs ?? DEFAULT_HTTP1_TIMEOUTS.requestTimeout,
    isStreamingRequest: opts.isStreamingRequest,
  });
  const http1TimeoutSettings = http1Timeouts(opts);
  const h2Limits = http2ServerLimits({ maxConcurrentStreams: opts.http2MaxConcurrentStreams });

  let closing = false;
  /** Every TCP connection the port accepted and that is not closed yet. */
  const sockets = new Set<net.Socket>();
  /** Cleartext connections whose protocol is not known yet. */
  const sniffing = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();

  /** The server whose `closeIdleConnections()` reaches our HTTP/1.1 connections. */
  let http1Owner: { closeIdleConnections(): void };
  let listening: net.Server;

  /** HTTP/1.1 responses not finished yet. */
  const http1Responses = new Set<http.ServerResponse>();
  const endKeepAlive = (res: http.ServerResponse): void => {
    if (!res.headersSent) res.setHeader("connection", "close");
  };

  const serve: NodeRequestHandler = (req, res) => {
    if (res instanceof http.ServerResponse) {
      if (closing) endKeepAlive(res);
      http1Responses.add(res);
      res.once("close", () => {
        http1Responses.delete(res);
        // A response whose headers went out before close() promised keep-alive;
        // close its connection as soon as it is idle.
        if (closing) http1Owner.closeIdleConnections();
      });
    } else {
      // A bidi stream whose response is complete while the client still
      // sends (an error, or shutdown) is reset with NO_ERROR once the
      // trailers are out, as grpc-go does: otherwise the stream, and a
      // graceful close of its session, waits for a client that may never
      // half-close.
      // Node's compatibility layer sends the trailers from its own
      // 'wantTrailers' listener, registered before this one; the reset waits
      // one more turn so that it follows the trailers on the wire.
      const stream = res.stream;
      stream.once("wantTrailers", () => {
        setImmediate(() => {
          if (!stream.destroyed && !stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
        });
      });
    }
    guarded(req, res);
  };
  /** `Expect: 100-continue`: say "continue" only to a body we would accept. */
  const serveExpectingContinue: NodeRequestHandler = (req, res) => {
    const declared = declaredBodyBytes(req);
    if (declared === undefined || declared <= opts.maxRequestBytes) res.writeContinue();
    serve(req, res);
  };

  const trackSession = (session: http2.ServerHttp2Session): void => {
    sessions.add(session);
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
    }, pingIntervalMs);
    pinger.unref();
    session.once("close", () => {
      clearInterval(pinger);
      sessions.delete(session);
    });
    if (closing) session.close();
  };

  const trackSocket = (socket: net.Socket): void => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    // Errors end in 'close'; without a listener an ECONNRESET would crash the process.
    socket.on("error", () => {});
  };

  if (opts.tls) {
    const secure = http2.createSecureServer({
      ...h2Limits,
      cert: opts.tls.cert,
      key: opts.tls.key,
      allowHTTP1: true,
      ALPNProtocols: ["h2", "http/1.1"],
      handshakeTimeout: firstByteTimeoutMs,
      noDelay: true,
      keepAlive: true,
      keepAliveInitialDelay: 60_000,
    });
    // With allowHTTP1 the secure server runs Node's HTTP/1.1 connection code
    // itself and reads these fields from itself.
    Object.assign(secure, http1TimeoutSettings);
    secure.on("connection", trackSocket);
    secure.on("session", trackSession);
    secure.on("request", serve);
    secure.on("checkContinue", serveExpectingContinue);
    // Node's Http2SecureServer has closeIdleConnections() for its HTTP/1.1
    // connections (allowHTTP1); @types/node does not declare it.
    const secureHttp1 = secure as unknown as { closeIdleConnections?: () => void };
    http1Owner = { closeIdleConnections: () => secureHttp1.closeIdleConnections?.() };
    listening = secure;
  } else {
    const h1 = http.createServer({ ...http1TimeoutSettings, noDelay: true }, serve);
    h1.on("checkContinue", serveExpectingContinue);
    // h1 never listens itself, but Node starts its connection tracking (the
    // headers/request timeouts and closeIdleConnections) on 'listening'.
    h1.emit("listening");
    const h2 = http2.createServer(h2Limits);
    h2.on("session", trackSession);
    h2.on("request", serve);
    h2.on("checkContinue", serveExpectingContinue);

    const handOver = (socket: net.Socket, firstBytes: Buffer, protocol: "h2" | "http/1.1"): void => {
      sniffing.delete(socket);
      socket.setTimeout(0);
      // We are inside a 'data' emission: while the socket flows, the stream's
      // flow loop would re-emit the bytes we put back to nobody. Pause first.
      socket.pause();
      socket.unshift(firstBytes);
      if (protocol === "h2") {
        // The session drains the socket's buffer itself on its next tick
        // (nodejs/node#35475) and then reads the handle natively: it must stay
        // paused, or a flowing socket could emit those bytes elsewhere first.
        h2.emit("connection", socket);
      } else {
        // Node's HTTP/1.1 server reads buffered bytes through 'data' events
        // and starts reading the handle on 'resume'.
        h1.emit("connection", socket);
        process.nextTick(() => socket.resume());
      }
    };

    const sniffer = net.createServer({ noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 }, (socket) => {
      trackSocket(socket);
      if (closing) {
        socket.destroy();
        return;
      }
      sniffing.add(socket);
      socket.once("close", () => sniffing.delete(socket));
      const dropSilent = (): void => {
        socket.destroy();
      };
      socket.setTimeout(firstByteTimeoutMs);
      socket.once("timeout", dropSilent);
      let seen: Buffer = Buffer.alloc(0);
      const onData = (chunk: Buffer): void => {
        seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
        const protocol = sniffProtocol(seen);
        if (protocol === undefined) return;
        socket.off("data", onData);
        socket.off("timeout", dropSilent);
        handOver(socket, seen, protocol);
      };
      socket.on("data", onData);
    });
    http1Owner = h1;
    listening = sniffer;
    sniffer.once("close", () => h1.close());
  }

  listening.on("error", (error) => {
    if (listening.listening) onError(error);
  });
  await new Promise<void>((resolve, reject) => {
    const fail = (error: Error): void => {
      listening.close(); // also stops the HTTP/1.1 server's timeout checks
      reject(error);
    };
    listening.once("error", fail);
    listening.listen({ host: opts.host, port: opts.port }, () => {
      listening.off("error", fail);
      resolve();
    });
  });

  const bound = listening.address() as net.AddressInfo;
  const hostInUrl = bound.address.includes(":") ? `[${bound.address}]` : bound.address;
  const address = Object.freeze({
    host: bound.address,
    port: bound.port,
    url: `${opts.tls ? "https" : "http"}://${hostInUrl}:${bound.port}`,
  });

  let closed: Promise<void> | undefined;
  const close = (graceMs = DEFAULT_CLOSE_GRACE_MS): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      closing = true;
      const deadline = setTimeout(() => {
        for (const session of sessions) session.destroy();
        for (const socket of sockets) socket.destroy();
      }, graceMs);
      // The callback runs once the port is closed and every accepted
      // connection has closed.
      listening.close(() => {
        clearTimeout(deadline);
        resolve();
      });
      for (const socket of sniffing) socket.destroy();
      for (const session of sessions) session.close(); // GOAWAY; closes when its streams are done
      for (const res of http1Responses) endKeepAlive(res);
      http1Owner.closeIdleConnections();
    });
    return closed;
  };

  return { address, close };
}
