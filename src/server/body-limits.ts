/**
 * The request body limit (LEASEQUEUE_MAX_REQUEST_BYTES) as far as the
 * listener can apply it: on the size a request declares, before any byte of
 * its body is read. Bodies that declare no size (chunked HTTP/1.1, HTTP/2
 * without the header) are refused by the RPC adapter's `readMaxBytes` while
 * they are read.
 */
import { Code } from "@connectrpc/connect";
import type { NodeRequest, NodeRequestHandler } from "./node-request-handler.js";
import { refuseRequest } from "./protocol-refusal.js";

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

/**
 * The handler for requests that send `Expect: 100-continue` (Node's
 * 'checkContinue' event): say "continue" only to a body within `maxBytes`,
 * then serve the request as any other (an oversized one is refused there).
 */
export function continueIfWithinLimit(maxBytes: number, serve: NodeRequestHandler): NodeRequestHandler {
  return (req, res) => {
    const declared = declaredBodyBytes(req);
    if (declared === undefined || declared <= maxBytes) res.writeContinue();
    serve(req, res);
  };
}

function declaredBodyBytes(req: NodeRequest): number | undefined {
  const value = req.headers["content-length"];
  if (typeof value !== "string" || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}
