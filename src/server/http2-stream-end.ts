/**
 * A bidi stream whose response is complete while the client still sends
 * (an error, or shutdown) is reset with NO_ERROR once the trailers are out,
 * as grpc-go does: otherwise the stream, and a graceful close of its
 * session, waits for a client that may never half-close.
 */
import * as http2 from "node:http2";

/** Arranges the reset for one HTTP/2 request's stream; call before the request is served. */
export function resetAfterTrailers(res: http2.Http2ServerResponse): void {
  // Node's compatibility layer sends the trailers from its own
  // 'wantTrailers' listener, registered before this one; the reset waits
  // one more turn so that it follows the trailers on the wire.
  const stream = res.stream;
  stream.once("wantTrailers", () => {
    // The request is complete (every unary call): nothing to reset, no turn to wait.
    if (stream.readableEnded) return;
    setImmediate(() => {
      if (!stream.destroyed && !stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
  });
}
