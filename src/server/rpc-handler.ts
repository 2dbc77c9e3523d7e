/**
 * The Node request handler of the API port: connect's router served by our
 * own thin adapter instead of connect-node's `connectNodeAdapter`, so that
 * what connect decides before any interceptor runs is still answered in
 * the terms of docs/api.md "Errors" and counted (createRpcHandler).
 */
import type * as http from "node:http";
import * as http2 from "node:http2";
import { TextDecoder } from "node:util";
import {
  Code,
  ConnectError,
  createConnectRouter,
  createContextValues,
  createMethodImplSpec,
  createServiceImplSpec,
  type ContextValues,
  type ConnectRouter,
  type ConnectRouterOptions,
} from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { codeToHttpStatus, codeToString as codeName } from "@connectrpc/connect/protocol-connect";
import type { DescMethod } from "@bufbuild/protobuf";
import { createMethodUrl, validateUniversalHandlerOptions, type UniversalHandler } from "@connectrpc/connect/protocol";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { callTraceKey } from "../service/call-trace.js";
import type { NodeRequestHandler } from "./node-request-handler.js";
import { watchOutcome } from "./call-outcome.js";
import type { CallSpans } from "./call-spans.js";
import { callRecordKey, type CallRecord } from "./call-record.js";
import { createGrpcUnaryMethod, servesAsGrpcUnary, type GrpcUnaryCall, type UnaryImplSpec } from "./fast-wire/index.js";
import { requestTimedOut } from "./http2-request-timeout.js";
import { refuseRequest } from "./protocol-refusal.js";

export interface RpcHandlerOptions extends ConnectRouterOptions {
  /** Registers the services. */
  routes: (router: ConnectRouter) => void;
  /**
   * Registers methods that serve a path of `routes` instead, for requests
   * with binary messages only (gRPC, gRPC-web and Connect with protobuf
   * binary): their input type has no fields, and the implementation reads
   * the fields by hand (routes.ts).
   */
  binaryRoutes?: (router: ConnectRouter) => void;
  /** Unary gRPC through the server's own path (grpc-unary.ts); false: connect's. Default true. */
  handWire?: boolean;
  /** Serves every path that is not an RPC (default: 404). */
  fallback?: NodeRequestHandler;
  log: Logger;
  /** Calls the boundary interceptor never saw are recorded here. */
  metrics: Pick<Metrics, "observeRpc">;
  /** A SERVER span per call (docs/operations.md "Tracing"); undefined when the server does not trace. */
  callSpans?: CallSpans;
  /**
   * Adds per-call values for the handlers (ctx.values), from the Node request
   * and response, before connect reads the request body. A ConnectError it
   * throws refuses the call in the request's protocol (authentication: its
   * code, message and metadata as headers), without reading the body.
   */
  contextValues?: (
    values: ContextValues,
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
    method: DescMethod,
  ) => void;
}

export interface RpcHandler {
  handler: NodeRequestHandler;
  /**
   * True for the paths of client-streaming and bidi methods, whose request
   * body legitimately stays open as long as the call (see
   * http2-request-timeout.ts).
   */
  isStreamingRequest: (path: string) => boolean;
}

/**
 * Whether the client went away before the response was complete: an HTTP/2
 * stream it reset (any code but NO_ERROR), or a closed connection.
 */
function clientGone(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): boolean {
  if (req instanceof http2.Http2ServerRequest) {
    const stream = req.stream;
    const rst = stream.rstCode;
    // Before writableFinished: Node marks a reset stream's response finished.
    if (rst !== undefined && rst !== http2.constants.NGHTTP2_NO_ERROR) return true;
    if (res.writableFinished) return false;
    return stream.destroyed || stream.session === undefined || stream.session.destroyed;
  }
  if (res.writableFinished) return false;
  // Not the request's state: Node destroys a request (and detaches its
  // socket) as soon as its body is read. The response lives until it is sent.
  return res.destroyed || res.socket?.destroyed === true;
}

/**
 * The request body, failing with `canceled` if the client reset the stream.
 *
 * Node ends the body of an HTTP/2 stream reset by its client as if END_STREAM
 * had arrived, and sets the stream's rstCode only later in the same I/O turn.
 * Without this check a reset unary call would be served with an empty
 * request message, and a reset server stream would fail as "missing input".
 */
async function* bodyUnlessReset(req: http2.Http2ServerRequest, body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  yield* body;
  await new Promise<void>((resolve) => setImmediate(resolve));
  const rst = req.stream.rstCode;
  if (rst !== undefined && rst !== http2.constants.NGHTTP2_NO_ERROR) {
    throw new ConnectError(`the client reset the stream (HTTP/2 error code ${rst})`, Code.Canceled);
  }
}

/**
 * Answers a call that `contextValues` refused (a ConnectError: its code,
 * message and metadata) in the request's protocol, without reading its
 * body; returns the code. A plain Error there is a bug: `internal`, logged,
 * its message kept from the client.
 */
function refuseBeforeHandler(
  log: Logger,
  name: string,
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
  err: unknown,
): Code {
  const refusal = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal);
  if (err instanceof ConnectError) {
    log.debug("call refused before its handler", { method: name, code: codeName(refusal.code), error: refusal.rawMessage });
  } else {
    log.error("preparing the call failed", { method: name, error: err });
  }
  refuseRequest(req, res, {
    code: refusal.code,
    message: refusal.rawMessage,
    plainStatus: codeToHttpStatus(refusal.code),
    headers: Object.fromEntries(refusal.metadata.entries()),
  });
  return refusal.code;
}

/** Content types whose messages are protobuf binary. */
const BINARY_CONTENT_TYPES = new Set([
  "application/grpc",
  "application/grpc+proto",
  "application/grpc-web",
  "application/grpc-web+proto",
  "application/connect+proto",
  "application/proto",
]);

/** Whether a request's content type says its messages are protobuf binary. */
function binaryMessages(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semicolon = contentType.indexOf(";");
  return BINARY_CONTENT_TYPES.has((semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase());
}

/**
 * Registers the routes on connect's router, and returns the unary methods
 * of the services registered without options of their own (by request
 * path): grpc-unary.ts serves those with the router's options.
 */
function registerRoutes(router: ConnectRouter, routes: (router: ConnectRouter) => void): Map<string, UnaryImplSpec> {
  const unary = new Map<string, UnaryImplSpec>();
  const add = (spec: ReturnType<typeof createMethodImplSpec>) => {
    if (spec.kind === "unary") unary.set(createMethodUrl("/", spec.method), spec);
  };
  const registering: ConnectRouter = {
    get handlers() {
      return router.handlers;
    },
    service(service, implementation, options) {
      router.service(service, implementation, options);
      if (options === undefined) for (const spec of Object.values(createServiceImplSpec(service, implementation).methods)) add(spec);
      return registering;
    },
    rpc(method, impl, options) {
      router.rpc(method, impl, options);
      if (options === undefined) add(createMethodImplSpec(method, impl));
      return registering;
    },
  };
  routes(registering);
  return unary;
}

/**
 * Builds the API port's RPC handler over connect's router:
 *
 * - a request message that is not valid protobuf binary is `invalid_argument`,
 *   not `internal` (see call-outcome.ts for why it is rewritten there);
 * - calls refused before the interceptor (undecodable, unsupported encoding,
 *   too large after decompression, reset by the client) still reach the RPC
 *   metrics, with their code;
 * - a client that resets its stream or drops its connection is `canceled`,
 *   logged at debug, never a server failure (connect-node would write
 *   "handler for rpc ... failed" to stderr for it).
 *
 * Request and response bytes are otherwise those of connect-node: the same
 * universalRequestFromNodeRequest / universalResponseToNodeResponse it uses,
 * except for unary calls over gRPC with binary messages, which
 * fast-wire/grpc-unary.ts serves with connect's serialization and limits but without
 * its per-call stream machinery (docs/performance.md "The cost of one unary
 * call").
 */
export function createRpcHandler(opts: RpcHandlerOptions): RpcHandler {
  const router = createConnectRouter(opts);
  const unaryImpls = registerRoutes(router, opts.routes);
  const grpcUnary = new Map<string, (call: GrpcUnaryCall) => void>();
  if (opts.grpc !== false && opts.handWire !== false) {
    const options = validateUniversalHandlerOptions(opts);
    for (const [path, spec] of unaryImpls) grpcUnary.set(path, createGrpcUnaryMethod(spec, options));
  }
  const paths = new Map<string, UniversalHandler>();
  for (const uHandler of router.handlers) paths.set(uHandler.requestPath, uHandler);
  const binaryPaths = new Map<string, UniversalHandler>();
  if (opts.binaryRoutes !== undefined) {
    const binaryRouter = createConnectRouter(opts);
    opts.binaryRoutes(binaryRouter);
    for (const uHandler of binaryRouter.handlers) binaryPaths.set(uHandler.requestPath, uHandler);
  }
  const fallback: NodeRequestHandler =
    opts.fallback ??
    ((_req, res) => {
      res.writeHead(404);
      res.end();
    });

  const handler: NodeRequestHandler = (req, res) => {
    const path = req.url?.split("?", 2)[0] ?? "";
    const uHandler =
      (binaryPaths.size > 0 && binaryMessages(req.headers["content-type"]) ? binaryPaths.get(path) : undefined) ?? paths.get(path);
    if (uHandler === undefined) {
      fallback(req, res);
      return;
    }
    const started = performance.now();
    const method = uHandler.method.name;
    const record: CallRecord = {
      observed: false,
      cutShort: () => (requestTimedOut(req) ? Code.DeadlineExceeded : clientGone(req, res) ? Code.Canceled : undefined),
    };
    let outcome: { code: Code | "ok" | undefined } = { code: undefined };
    const name = `${uHandler.service.typeName}/${method}`;
    const span = opts.callSpans?.start({ service: uHandler.service.typeName, method, req });
    // Counted when the response closes (sent, or cut by the client):
    // universalResponseToNodeResponse waits for an 'end' event that Node's
    // responses never emit, so its promise only ever settles by failing.
    // Whichever of this and the interceptor comes first records the call.
    res.once("close", () => {
      if (record.observed && span === undefined) return;
      // A call cut short is that, whatever connect answered into the void.
      const cutShort = record.cutShort();
      const known = outcome.code;
      const code = cutShort ?? (known === "ok" ? undefined : (known ?? Code.Unknown));
      span?.end(code);
      if (record.observed) return;
      record.observed = true;
      opts.metrics.observeRpc(method, code, (performance.now() - started) / 1000);
    });
    const logFailure = (failure: unknown): void => {
      const error = ConnectError.from(failure);
      if (record.cutShort() !== undefined || error.code === Code.Canceled || error.code === Code.Aborted) {
        opts.log.debug("client went away during the response", { method: name, error: error.message });
      } else {
        opts.log.error("writing the response failed", { method: name, error: failure });
      }
    };
    const contextValues = createContextValues().set(callRecordKey, record);
    if (span !== undefined) contextValues.set(callTraceKey, span.trace);
    try {
      opts.contextValues?.(contextValues, req, res, uHandler.method);
    } catch (err) {
      outcome.code = refuseBeforeHandler(opts.log, name, req, res, err);
      return;
    }
    const serveGrpcUnary = req instanceof http2.Http2ServerRequest && servesAsGrpcUnary(req) ? grpcUnary.get(path) : undefined;
    if (serveGrpcUnary !== undefined) {
      serveGrpcUnary({
        req: req as http2.Http2ServerRequest,
        res: res as http2.Http2ServerResponse,
        contextValues,
        settled: (code) => (outcome.code = code),
        writeFailed: logFailure,
      });
      return;
    }
    let uReq;
    try {
      uReq = universalRequestFromNodeRequest(req, res, undefined, contextValues);
      if (req instanceof http2.Http2ServerRequest) {
        uReq = { ...uReq, body: bodyUnlessReset(req, uReq.body as AsyncIterable<Uint8Array>) };
      }
    } catch (err) {
      // No authority (an HTTP/1.0 request without Host): the client's mistake.
      opts.log.debug("request without an authority refused", { method: name, error: (err as Error).message });
      outcome.code = Code.InvalidArgument;
      res.writeHead(400);
      res.end();
      return;
    }
    uHandler(uReq)
      .then((uRes) => {
        const watched = watchOutcome(uRes, uHandler.method.input.typeName);
        outcome = watched.outcome;
        return universalResponseToNodeResponse(watched.response, res);
      })
      .catch(logFailure);
  };

  const streamingRequests = new Set(
    router.handlers
      .filter((h) => h.method.methodKind === "client_streaming" || h.method.methodKind === "bidi_streaming")
      .map((h) => h.requestPath),
  );
  return { handler, isStreamingRequest: (path) => streamingRequests.has(path.split("?", 2)[0]) };
}

/**
 * A JSON text decoder that refuses invalid UTF-8 instead of replacing it with
 * U+FFFD (which would store something the client never sent). connect keeps a
 * ConnectError thrown while decoding, so the client gets `invalid_argument`
 * with this message.
 */
export function strictUtf8Decoder(): TextDecoder {
  const fatal = new TextDecoder("utf-8", { fatal: true });
  const strict: Pick<TextDecoder, "decode" | "encoding" | "fatal" | "ignoreBOM"> = {
    encoding: fatal.encoding,
    fatal: true,
    ignoreBOM: fatal.ignoreBOM,
    decode(...args: Parameters<TextDecoder["decode"]>): string {
      try {
        return fatal.decode(...args);
      } catch {
        throw new ConnectError("request body is not valid UTF-8 (JSON text must be UTF-8, RFC 8259 §8.1)", Code.InvalidArgument);
      }
    },
  };
  return strict;
}
