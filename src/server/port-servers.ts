/**
 * The two ways the API port is served: cleartext (h2c and HTTP/1.1 told
 * apart by their first bytes, protocol-sniffing.ts) or TLS (ALPN offers h2
 * and http/1.1; a client that offers no ALPN gets HTTP/1.1). Either way the
 * same request handler serves every request, and the connection drain sees
 * every connection and session.
 */
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type { ConnectionDrain } from "./connection-drain.js";
import type { Http1TimeoutSettings } from "./http1-timeouts.js";
import type { NodeRequestHandler } from "./node-request-handler.js";
import { sniffConnection } from "./protocol-sniffing.js";

export interface PortServerOptions {
  /** Serves every request. */
  serve: NodeRequestHandler;
  /** Serves requests that sent `Expect: 100-continue`. */
  serveExpectingContinue: NodeRequestHandler;
  /** Called with every HTTP/2 session. */
  onSession: (session: http2.ServerHttp2Session) => void;
  http1Timeouts: Http1TimeoutSettings;
  http2Options: http2.ServerOptions;
  /** Cleartext: the first byte must arrive within this; TLS: the handshake must finish within it. */
  firstByteTimeoutMs: number;
  drain: ConnectionDrain;
}

export interface PortServer {
  /** The server that listens on the port. */
  server: net.Server;
  /** Closes the idle HTTP/1.1 keep-alive connections of the port. */
  closeIdleHttp1(): void;
}

/** TCP options of every accepted connection. */
const SOCKET_OPTIONS = { noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 } as const;

export function createTlsPortServer(tls: { cert: string | Buffer; key: string | Buffer }, opts: PortServerOptions): PortServer {
  const secure = http2.createSecureServer({
    ...opts.http2Options,
    cert: tls.cert,
    key: tls.key,
    allowHTTP1: true,
    ALPNProtocols: ["h2", "http/1.1"],
    handshakeTimeout: opts.firstByteTimeoutMs,
    ...SOCKET_OPTIONS,
  });
  // With allowHTTP1 the secure server runs Node's HTTP/1.1 connection code
  // itself and reads these fields from itself.
  Object.assign(secure, opts.http1Timeouts);
  secure.on("connection", (socket: net.Socket) => opts.drain.socket(socket));
  secure.on("session", opts.onSession);
  secure.on("request", opts.serve);
  secure.on("checkContinue", opts.serveExpectingContinue);
  // Node's Http2SecureServer has closeIdleConnections() for its HTTP/1.1
  // connections (allowHTTP1); @types/node does not declare it.
  const secureHttp1 = secure as unknown as { closeIdleConnections?: () => void };
  return { server: secure, closeIdleHttp1: () => secureHttp1.closeIdleConnections?.() };
}

export function createCleartextPortServer(opts: PortServerOptions): PortServer {
  const h1 = http.createServer({ ...opts.http1Timeouts, noDelay: true }, opts.serve);
  h1.on("checkContinue", opts.serveExpectingContinue);
  // h1 never listens itself, but Node starts its connection tracking (the
  // headers/request timeouts and closeIdleConnections) on 'listening'.
  h1.emit("listening");
  const h2 = http2.createServer(opts.http2Options);
  h2.on("session", opts.onSession);
  h2.on("request", opts.serve);
  h2.on("checkContinue", opts.serveExpectingContinue);

  const sniffer = net.createServer(SOCKET_OPTIONS, (socket) => {
    opts.drain.socket(socket);
    if (opts.drain.closing) {
      socket.destroy();
      return;
    }
    const decided = opts.drain.undecided(socket);
    sniffConnection(socket, opts.firstByteTimeoutMs, { h1, h2 }, decided);
  });
  sniffer.once("close", () => h1.close());
  return { server: sniffer, closeIdleHttp1: () => h1.closeIdleConnections() };
}
