/**
 * Connection tracking for a bounded shutdown of the API port. Node's
 * `server.close()` only stops accepting: it waits for every connection, and
 * ends neither HTTP/2 sessions nor keep-alive HTTP/1.1 connections by
 * itself. So every connection, session and unfinished HTTP/1.1 response is
 * tracked here, and draining closes each the gentle way (GOAWAY once the
 * session is quiet, `Connection: close`), then destroys what is left at the
 * end of the grace period.
 */
import * as http from "node:http";
import type * as http2 from "node:http2";
import type * as net from "node:net";
import type { NodeRequestHandler } from "./node-request-handler.js";

export const DEFAULT_CLOSE_GRACE_MS = 10_000;

/**
 * How long an HTTP/2 session must have been quiet (no call arriving or
 * finishing) before its GOAWAY: longer than a client takes to make its next
 * call after an answer.
 */
export const QUIET_MS = 250;

/** The longest a draining HTTP/2 session waits to be quiet before its GOAWAY goes out anyway. */
export const MAX_QUIET_WAIT_MS = 2_000;

/**
 * Why an HTTP/2 session is not sent its GOAWAY at once: a GOAWAY carries the
 * last stream the server has read, and a call the client sent before it read
 * the GOAWAY but that the server had not read is refused (REFUSED_STREAM).
 * connect-node reports such a call as `internal`, where docs/api.md's error
 * table promises `unavailable` for a server shutting down. The remedy of
 * RFC 9113 §6.8 (a first GOAWAY that refuses nothing, the final one a round
 * trip later) is out of reach in Node: its nghttp2 ignores every stream that
 * arrives after any GOAWAY it has sent, whatever its last stream id, and
 * Node exposes no other way to send one. So the client must have stopped
 * sending on the connection before the GOAWAY goes out:
 *
 * - a call that arrives on a draining session is held, not served: a
 *   client that waits for a call's answer before its next call (a worker's
 *   loop) sends nothing more;
 * - the GOAWAY goes out once nothing is being served on the session, a PING
 *   sent after its last activity (a call arriving or finishing) has come
 *   back, and QUIET_MS have passed since that activity: the client had time
 *   to send what follows an answer it got, and sent nothing;
 * - then the held calls are served: the server read them before the GOAWAY
 *   went out, so they are answered normally, and their answers reach the
 *   client after the GOAWAY, so it makes its next call elsewhere.
 *
 * A session that does not go quiet within MAX_QUIET_WAIT_MS (a client that
 * keeps starting calls without waiting for answers) is sent its GOAWAY
 * anyway; a call such a client starts within a round trip of it may still
 * be refused.
 */
export class ConnectionDrain {
  #closing = false;
  #drained: Promise<void> | undefined;
  /** Every TCP connection the port accepted and that is not closed yet. */
  readonly #sockets = new Set<net.Socket>();
  /** Cleartext connections whose protocol is not known yet. */
  readonly #undecided = new Set<net.Socket>();
  readonly #sessions = new Map<http2.Http2Session, SessionDrain>();
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

  /** An HTTP/2 session; one that opens while draining starts draining at once. */
  session(session: http2.ServerHttp2Session): void {
    const drain = new SessionDrain(session);
    this.#sessions.set(session, drain);
    session.once("close", () => {
      drain.closed();
      this.#sessions.delete(session);
    });
    if (this.#closing) drain.start();
  }

  /**
   * A request, handed to `serve` now, or later for a call that arrives on a
   * draining HTTP/2 session (see the file comment). An HTTP/1.1 response is
   * tracked until it is finished.
   */
  request(
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
    serve: NodeRequestHandler,
  ): void {
    if (res instanceof http.ServerResponse) {
      this.#http1Response(res);
      serve(req, res);
      return;
    }
    const session = (req as http2.Http2ServerRequest).stream.session;
    const drain = session === undefined ? undefined : this.#sessions.get(session);
    if (drain === undefined) serve(req, res);
    else drain.request(req as http2.Http2ServerRequest, res, serve);
  }

  #http1Response(res: http.ServerResponse): void {
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
        for (const session of this.#sessions.keys()) session.destroy();
        for (const socket of this.#sockets) socket.destroy();
      }, graceMs);
      // The callback runs once the port is closed and every accepted
      // connection has closed.
      server.close(() => {
        clearTimeout(deadline);
        resolve();
      });
      for (const socket of this.#undecided) socket.destroy();
      for (const drain of this.#sessions.values()) drain.start(); // GOAWAY when quiet; closes when its streams are done
      for (const res of this.#http1Responses) endKeepAlive(res);
      this.#closeIdleHttp1();
    });
    return this.#drained;
  }
}

/** One HTTP/2 session's part in draining: the calls it serves and holds, and when its GOAWAY goes out (see the file comment). */
class SessionDrain {
  readonly #session: http2.ServerHttp2Session;
  #draining = false;
  #goneAway = false;
  /** Calls being served (not held) whose stream is still open. */
  #serving = 0;
  /** Calls that arrived while draining, waiting for the GOAWAY. */
  #held: { req: http2.Http2ServerRequest; res: http2.Http2ServerResponse; serve: NodeRequestHandler }[] = [];
  /** When a call last arrived or finished (performance.now()). */
  #lastActivity = performance.now();
  /** When the last acknowledged PING was sent; -Infinity: none yet. */
  #pingAckedSentAt = -Infinity;
  #pingInFlight = false;
  #quietTimer: NodeJS.Timeout | undefined;
  #maxWaitTimer: NodeJS.Timeout | undefined;

  constructor(session: http2.ServerHttp2Session) {
    this.#session = session;
  }

  request(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, serve: NodeRequestHandler): void {
    this.#activity();
    if (this.#draining && !this.#goneAway) {
      this.#held.push({ req, res, serve });
      return;
    }
    this.#serving++;
    req.stream.once("close", this.#servedClosed);
    serve(req, res);
  }

  readonly #servedClosed = (): void => {
    this.#serving--;
    this.#activity();
    this.#check();
  };

  start(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#maxWaitTimer = setTimeout(() => this.#goAway(), MAX_QUIET_WAIT_MS);
    this.#check();
  }

  closed(): void {
    this.#goneAway = true;
    this.#held = [];
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxWaitTimer);
  }

  #activity(): void {
    this.#lastActivity = performance.now();
  }

  /** Sends the GOAWAY if the session is quiet, else arranges to look again when it may be. */
  #check(): void {
    if (!this.#draining || this.#goneAway || this.#serving > 0) return;
    if (this.#pingAckedSentAt < this.#lastActivity) {
      this.#ping();
      return;
    }
    const quietFor = performance.now() - this.#lastActivity;
    if (quietFor < QUIET_MS) {
      clearTimeout(this.#quietTimer);
      this.#quietTimer = setTimeout(() => this.#check(), QUIET_MS - quietFor);
      return;
    }
    this.#goAway();
  }

  #ping(): void {
    if (this.#pingInFlight) return; // its acknowledgement looks again
    const sentAt = performance.now();
    let sent = false;
    try {
      sent = this.#session.ping((err) => {
        this.#pingInFlight = false;
        if (err) return; // the session is going away
        this.#pingAckedSentAt = sentAt;
        this.#check();
      });
    } catch {
      // destroyed meanwhile
    }
    // False: too many PINGs unanswered already (a peer that does not answer
    // them); the longest wait sends the GOAWAY.
    this.#pingInFlight = sent;
  }

  /** The GOAWAY (`close()` also closes the session once its streams are done), then the held calls are served. */
  #goAway(): void {
    if (this.#goneAway) return;
    this.#goneAway = true;
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxWaitTimer);
    if (this.#session.destroyed) return;
    this.#session.close();
    const held = this.#held;
    this.#held = [];
    // On the next turn: Node writes the GOAWAY on an immediate queued by
    // close(), which then goes out before the work of serving the held calls.
    setImmediate(() => {
      // A call its client reset while it was held is not served.
      for (const { req, res, serve } of held) if (!req.stream.destroyed) serve(req, res);
    });
  }
}

function endKeepAlive(res: http.ServerResponse): void {
  if (!res.headersSent) res.setHeader("connection", "close");
}
