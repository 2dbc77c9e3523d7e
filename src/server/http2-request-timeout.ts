/**
 * The HTTP/2 counterpart of Node's HTTP/1.1 `requestTimeout`: a request must
 * arrive whole within a bound, or it is refused.
 */
import * as http2 from "node:http2";
import { Code } from "@connectrpc/connect";
import type { NodeRequestHandler } from "./node-request-handler.js";
import { refuseRequest } from "./protocol-refusal.js";

export interface Http2RequestTimeoutOptions {
  /** A request must be complete within this many ms of its HEADERS. */
  requestTimeoutMs: number;
  /** Paths whose request stays open by design (client-streaming and bidi methods): never timed. */
  isStreamingRequest?: (path: string) => boolean;
}

/** Requests this module refused for arriving too slowly, so that the RPC layer counts them as deadline_exceeded. */
const timedOut = new WeakSet<object>();

/** True if `req` was refused by {@link limitHttp2RequestTime} for not arriving in time. */
export function requestTimedOut(req: object): boolean {
  return timedOut.has(req);
}

/**
 * Wraps `handler` so that HTTP/2 requests follow the rule below; HTTP/1.1 requests pass untouched (Node times those).
 *
 * Node's http2 module has no such timeout, so one stream could trickle a
 * unary body one byte a second for ever, holding its handler and buffers.
 * The rule, per method kind:
 *
 * - unary and server-streaming methods (and every non-RPC path): the request
 *   body must be complete (END_STREAM received) within `requestTimeoutMs`
 *   of the stream's HEADERS. A late one is answered `deadline_exceeded` in
 *   its protocol's shape and the stream is reset. Once the request is
 *   complete the timer is gone: a response may last hours (StreamClaims,
 *   WatchEvents).
 * - client-streaming and bidi methods (of this server, only gRPC reflection):
 *   exempt, since their request legitimately stays open while the client
 *   still has messages to send; they are bounded by the per-connection stream
 *   limit and by the session PINGs that detect dead peers.
 *
 * Headers have no timer of their own on HTTP/2: Node hands a stream over only
 * once its whole header block has arrived, so a slow block is invisible here.
 * It is bounded anyway: in size by the header limits (http2-limits.ts), in
 * frames by nghttp2 (it ends a connection after a handful of CONTINUATION
 * frames), and in time by the session PINGs, which a client cannot answer in
 * the middle of a header block (a PING there is a protocol error), so it is
 * closed within two PING intervals.
 */
export function limitHttp2RequestTime(handler: NodeRequestHandler, opts: Http2RequestTimeoutOptions): NodeRequestHandler {
  return (req, res) => {
    if (!(req instanceof http2.Http2ServerRequest) || !(res instanceof http2.Http2ServerResponse)) {
      handler(req, res);
      return;
    }
    const stream = req.stream;
    if (stream.readableEnded || opts.isStreamingRequest?.(req.url ?? "")) {
      handler(req, res);
      return;
    }
    const timer = setTimeout(() => {
      if (stream.destroyed) return;
      timedOut.add(req);
      refuseRequest(req, res, {
        code: Code.DeadlineExceeded,
        message: `request not received in full within ${opts.requestTimeoutMs} ms (LEASEQUEUE_REQUEST_TIMEOUT_MS)`,
        plainStatus: 408,
      });
      // If a response had already begun, the stream is cut; if it was complete
      // (answered without reading the body), the client is only asked to stop sending.
      if (!stream.destroyed) {
        stream.close(res.writableFinished ? http2.constants.NGHTTP2_NO_ERROR : http2.constants.NGHTTP2_CANCEL);
      }
    }, opts.requestTimeoutMs);
    timer.unref();
    const done = (): void => clearTimeout(timer);
    // The request's 'end': END_STREAM arrived and the body was read. connect
    // reads unary and server-stream bodies at once, so this is when the
    // client finished sending.
    req.once("end", done);
    stream.once("close", done);
    handler(req, res);
  };
}
