/**
 * Answers a request with a coded error in the shape of its own protocol,
 * without reading its body, for refusals the listener makes before any RPC
 * handler runs (a body over the size limit, a body that does not arrive in
 * time).
 */
import type * as http from "node:http";
import * as http2 from "node:http2";
import { Code } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";

export interface Refusal {
  code: Code;
  message: string;
  /** HTTP status for a request that is not gRPC or Connect (e.g. 413, 408). */
  plainStatus: number;
  /** Sent with the response whatever its protocol (e.g. `www-authenticate`). Default: none. */
  headers?: Record<string, string>;
}

/**
 * The shape, by the request's content type:
 * - gRPC and gRPC-Web (`application/grpc*`): HTTP 200, trailers-only,
 *   `grpc-status` and `grpc-message`.
 * - Connect streaming (`application/connect+*`): HTTP 200 and an end-stream
 *   message carrying the error.
 * - Connect unary (`application/json`, `application/proto`): the Connect
 *   protocol's HTTP status for the code, with a JSON error body.
 *   https://connectrpc.com/docs/protocol#error-codes
 * - Anything else: `plainStatus` with the message as text.
 *
 * The body is then not drained: an HTTP/1.1 connection is closed after the
 * response (`Connection: close`), and an HTTP/2 stream is reset with NO_ERROR,
 * which asks the client to stop sending (RFC 9113 §8.1).
 */
export function refuseRequest(
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
  { code, message, plainStatus, headers: extra = {} }: Refusal,
): void {
  const contentType = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  if (contentType.startsWith("application/grpc")) {
    // Trailers-only: the status travels in the only HEADERS frame.
    sendAndStopReading(res, 200, {
      ...extra,
      "content-type": contentType,
      "grpc-status": String(code),
      "grpc-message": encodeGrpcMessage(message),
    });
  } else if (contentType.startsWith("application/connect+")) {
    const endStream = Buffer.from(JSON.stringify({ error: { code: codeToString(code), message } }));
    const envelope = Buffer.alloc(5 + endStream.length);
    envelope.writeUInt8(0b10, 0); // end-stream flag
    envelope.writeUInt32BE(endStream.length, 1);
    endStream.copy(envelope, 5);
    sendAndStopReading(res, 200, { ...extra, "content-type": contentType }, envelope);
  } else if (contentType === "application/json" || contentType === "application/proto") {
    const body = Buffer.from(JSON.stringify({ code: codeToString(code), message }));
    sendAndStopReading(res, codeToHttpStatus(code), { ...extra, "content-type": "application/json" }, body);
  } else {
    sendAndStopReading(res, plainStatus, { ...extra, "content-type": "text/plain; charset=utf-8" }, Buffer.from(message + "\n"));
  }
}

function sendAndStopReading(
  res: http.ServerResponse | http2.Http2ServerResponse,
  status: number,
  headers: Record<string, string>,
  body?: Buffer,
): void {
  if (res instanceof http2.Http2ServerResponse) {
    const stream = res.stream;
    if (stream.destroyed || stream.headersSent) return;
    if (body === undefined) {
      stream.respond({ ":status": status, ...headers }, { endStream: true });
    } else {
      stream.respond({ ":status": status, ...headers, "content-length": String(body.length) });
      stream.end(body);
    }
    // Node sends the RST_STREAM only after our frames (it waits for 'finish').
    stream.close(http2.constants.NGHTTP2_NO_ERROR);
    return;
  }
  if (res.headersSent) return;
  // Node ends the connection once this response is flushed; until then it
  // discards whatever body bytes arrive.
  res.writeHead(status, { ...headers, "content-length": String(body?.length ?? 0), connection: "close" });
  res.end(body);
}

/** gRPC's Percent-Encoded: everything outside printable ASCII, and '%' itself. */
function encodeGrpcMessage(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    const plain = byte >= 0x20 && byte <= 0x7e && byte !== 0x25;
    out += plain ? String.fromCharCode(byte) : "%" + byte.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}
