/**
 * Connection tracking for a bounded shutdown of the API port. Node's
 * `server.close()` only stops accepting: it waits for every connection, and
 * ends neither HTTP/2 sessions nor keep-alive HTTP/1.1 connections by
 * itself. So every connection, session and unfinished HTTP/1.1 response is
 * tracked here, and draining closes each the gentle way (GOAWAY,
 * `Connection: close`), then destroys what is left at the end of the grace
 * period.
 */
import * as http from "node:http";
import type * as http2 from "node:http2";
import type * as net from "node:net";

export const DEFAULT_CLOSE_GRACE_MS = 10_000;

export class ConnectionDrain {
  #closing = false;
  #drained: Promise<void> | undefined;
  /** Every TCP connection the port accepted and that is not closed yet. */
  readonly #sockets = new Set<net.Socket>();
  /** Cleartext connections whose protocol is not known yet. */
  readonly #undecided = new Set<net.Socket>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  /** HTTP/1.1 responses not finished yet. */
  readonly #http1Responses = new Set<http.ServerResponse>();

  readonly #closeIdleHttp1: () => void;

  /** @param closeIdleHttp1 closes the port's idle HTTP/1.1 connections (the server that owns them). */
  constructor(closeIdleHttp1: () => void) {
    this.#closeIdleHttp1 = closeIdleHttp1;
  }

  get closing(): boolean {
    return this.#closing;
  }

  /** A TCP connection the port accepted. */
  socket(socket: net.Socket): void {
    this.#sockets.add(socket);
    socket.once("close", () => this.#sockets.delete(socket));
    // Errors end in 'close'; without a listener an ECONNRESET would crash the process.
    socket.on("error", () => {});
  }

  /** A cleartext connection whose protocol is still being sniffed; draining destroys it. Returns the call that marks it decided. */
  undecided(socket: net.Socket): () => void {
    this.#undecided.add(socket);
    socket.once("close", () => this.#undecided.delete(socket));
    return () => this.#undecided.delete(socket);
  }

  /** An HTTP/2 session; one that opens while draining is closed at once. */
  session(session: http2.ServerHttp2Session): void {
    this.#sessions.add(session);
    session.once("close", () => this.#sessions.delete(session));
    if (this.#closing) session.close();
  }

  /** A request's response, before it is served: an HTTP/1.1 one is tracked until it is finished. */
  response(res: http.ServerResponse | http2.Http2ServerResponse): void {
    if (!(res instanceof http.ServerResponse)) return;
    if (this.#closing) endKeepAlive(res);
    this.#http1Responses.add(res);
    res.once("close", () => {
      this.#http1Responses.delete(res);
      // A response whose headers went out before draining promised keep-alive;
      // close its connection as soon as it is idle.
      if (this.#closing) this.#closeIdleHttp1();
    });
  }

  /**
   * Stops `server` accepting, lets in-flight requests finish up to `graceMs`,
   * then destroys what is left (HTTP/2 sessions included). Resolves when
   * every connection is closed. Calling it again returns the same promise.
   */
  drain(server: net.Server, graceMs = DEFAULT_CLOSE_GRACE_MS): Promise<void> {
    this.#drained ??= new Promise<void>((resolve) => {
      this.#closing = true;
      const deadline = setTimeout(() => {
        for (const session of this.#sessions) session.destroy();
        for (const socket of this.#sockets) socket.destroy();
      }, graceMs);
      // The callback runs once the port is closed and every accepted
      // connection has closed.
      server.close(() => {
        clearTimeout(deadline);
        resolve();
      });
      for (const socket of this.#undecided) socket.destroy();
      for (const session of this.#sessions) session.close(); // GOAWAY; closes when its streams are done
      for (const res of this.#http1Responses) endKeepAlive(res);
      this.#closeIdleHttp1();
    });
    return this.#drained;
  }
}

function endKeepAlive(res: http.ServerResponse): void {
  if (!res.headersSent) res.setHeader("connection", "close");
}
