/**
 * Unary calls over gRPC with binary messages (what every gRPC client and
 * SDK sends), served without connect's per-call stream machinery
 * (docs/performance.md "The cost of one unary call"): connect-es passes
 * the one request and the one response through a pipeline of async
 * generators (split envelopes, decompress, parse, invoke, serialize,
 * compress, join, catch), which costs more than a small call's own work.
 * Everything else stays with connect's router (rpc-handler.ts).
 */
import * as http2 from "node:http2";
import { create, type DescMessage, type DescMethod, type DescMethodUnary, type DescService, type Message } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { compressionNegotiate, createMethodSerializationLookup, type Compression } from "@connectrpc/connect/protocol";
import {
  contentTypeProto,
  grpcStatusOk,
  headerAcceptEncoding,
  parseContentType,
  parseTimeout,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import { HAND_DECODERS } from "./hand-decoders.js";
import { requestParseError } from "../call-record.js";
import { COMPRESSED_FLAG, envelope, readSingleMessage } from "./grpc-envelope.js";
import { headerValue, nodeHeadersOf, replaceHeaders, RequestHeaders } from "./node-headers.js";

/** A unary method's implementation, as connect's router holds it. */
export type UnaryImplSpec = Extract<MethodImplSpec, { kind: "unary" }>;

/** What the router was given (connect's validated handler options). */
export interface GrpcUnaryOptions {
  interceptors: Interceptor[];
  acceptCompression: Compression[];
  readMaxBytes: number;
  writeMaxBytes: number;
  compressMinBytes: number;
  maxTimeoutMs: number;
  shutdownSignal?: AbortSignal;
  binaryOptions?: Parameters<typeof createMethodSerializationLookup>[1];
  jsonOptions?: Parameters<typeof createMethodSerializationLookup>[2];
}

/** One call, as the adapter hands it over. */
export interface GrpcUnaryCall {
  req: http2.Http2ServerRequest;
  res: http2.Http2ServerResponse;
  contextValues: ContextValues;
  /** Called once the call's status is known: "ok" or the code in its trailers. */
  settled(code: Code | "ok"): void;
  /** Writing the response failed (the client went away, mostly). */
  writeFailed(error: unknown): void;
}

/**
 * Whether this path serves `req`: a POST over HTTP/2 with an authority, a
 * binary gRPC content type and no request compression. Everything else
 * goes to connect, which answers it: the other protocols, streaming
 * methods, and (rpc-handler.ts) services registered with options of their
 * own.
 */
export function servesAsGrpcUnary(req: http2.Http2ServerRequest): boolean {
  if (req.method !== "POST" || req.authority === undefined) return false;
  const contentType = req.headers["content-type"];
  if (contentType !== "application/grpc" && contentType !== contentTypeProto && parseContentType(contentType ?? null)?.binary !== true) {
    return false;
  }
  const encoding = req.headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity";
}

/** Response headers by negotiated response encoding (none: ""), written as they are when no handler touched them. */
const RESPONSE_HEADERS = new Map<string, http2.OutgoingHttpHeaders>();
function responseHeadersOf(encoding: string): http2.OutgoingHttpHeaders {
  let headers = RESPONSE_HEADERS.get(encoding);
  if (headers === undefined) {
    headers = Object.freeze(
      encoding === "" ? { "content-type": contentTypeProto } : { "content-type": contentTypeProto, "grpc-encoding": encoding },
    );
    RESPONSE_HEADERS.set(encoding, headers);
  }
  return headers;
}
const OK_TRAILERS: http2.OutgoingHttpHeaders = Object.freeze({ "grpc-status": grpcStatusOk });

/**
 * Builds the server of one unary method; call it for each request that
 * {@link servesAsGrpcUnary}. It reads the request message, calls the same
 * interceptors and the same implementation as connect's router, and writes
 * the response with connect's own serialization and limits, compression
 * negotiation, timeout parsing and error trailers, in connect's order, so
 * that what a client sees is what connect would have answered.
 */
export function createGrpcUnaryMethod(spec: UnaryImplSpec, opts: GrpcUnaryOptions): (call: GrpcUnaryCall) => void {
  const method = spec.method;
  const serialization = createMethodSerializationLookup(method, opts.binaryOptions, opts.jsonOptions, opts);
  const input = serialization.getI(true);
  const output = serialization.getO(true);
  const inputTypeName = method.input.typeName;
  // A hand decoder for the hot requests (hand-decoders.ts) answers what it is sure of; protobuf-es the rest.
  const handDecode = HAND_DECODERS.get(inputTypeName);
  const parse =
    handDecode === undefined
      ? (bytes: Uint8Array) => input.parse(bytes)
      : (bytes: Uint8Array) => (handDecode(bytes) as Message | undefined) ?? input.parse(bytes);

  // The interceptor chain, composed once: the call travels in the request.
  const innermost = async (req: UnaryRequest): Promise<UnaryResponse> => {
    const call = callOf(req);
    const message = create(method.output, await spec.impl(req.message, new CallContext(call, req)));
    const response = new CallResponse(call, message);
    call.innermostResponse = response;
    return response;
  };
  let chain: (req: UnaryRequest) => Promise<UnaryResponse> = innermost;
  for (const interceptor of [...opts.interceptors].reverse()) chain = interceptor(chain as never) as typeof chain;

  // This path takes only uncompressed requests, so the negotiation depends
  // on grpc-accept-encoding alone, and clients send one or two spellings of it.
  const negotiated = new Map<string, ReturnType<typeof compressionNegotiate>>();
  const negotiate = (accepted: string | null) => {
    let result = negotiated.get(accepted ?? "");
    if (result === undefined) {
      result = compressionNegotiate(opts.acceptCompression, null, accepted, headerAcceptEncoding);
      if (negotiated.size < 16) negotiated.set(accepted ?? "", result);
    }
    return result;
  };

  return (call) => {
    const headers = call.req.headers;
    const timeout = parseTimeout(headerValue(headers["grpc-timeout"]), opts.maxTimeoutMs);
    const compression = negotiate(headerValue(headers["grpc-accept-encoding"]));
    const state = new CallState(call, method, timeout.timeoutMs, compression.response?.name ?? "", opts.shutdownSignal);

    const fail = (err: unknown): void => {
      const error = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
      state.finish(requestParseError(error.code, error.rawMessage, inputTypeName) ?? error);
    };
    // connect raises these before it reads the body.
    if (compression.error) return fail(compression.error);
    if (timeout.error) return fail(timeout.error);

    readSingleMessage(call.req, opts.readMaxBytes, parse)
      .then(async (message) => {
        const request = new CallRequest(state, method, message, call.contextValues);
        const response = await chain(request);
        // An interceptor's own response: its headers replace the call's, as connect copies them.
        if (response !== state.innermostResponse) {
          if (response.header !== state.responseHeader) replaceHeaders(state.responseHeader, response.header);
          if (response.trailer !== state.responseTrailer) replaceHeaders(state.responseTrailer, response.trailer);
        }
        let data = output.serialize(response.message);
        let flags = 0;
        if (compression.response && data.byteLength >= opts.compressMinBytes) {
          data = await compression.response.compress(data);
          flags = COMPRESSED_FLAG;
        }
        state.finish(undefined, envelope(flags, data));
      })
      .catch(fail);
  };
}

/** The call, carried in the interceptors' request (spread copies it along). */
const CALL = Symbol("leasequeue grpc unary call");

function callOf(req: UnaryRequest): CallState {
  const call = (req as Partial<CallRequest>)[CALL];
  if (call === undefined) throw new ConnectError("an interceptor replaced the request without its call", Code.Internal);
  return call;
}

/*
 * The interceptors' request, the handler's context and the innermost
 * response, as classes: their getters (the call's URL, signal and headers,
 * each made on first read) live on the prototype, instead of a closure per
 * getter per call. An interceptor that spreads the request into a new one
 * copies its own fields only; the context then takes what is missing from
 * the call.
 */

class CallRequest implements UnaryRequest<DescMessage, DescMessage> {
  readonly stream = false;
  readonly requestMethod = "POST";
  readonly service: DescService;
  readonly [CALL]: CallState;

  constructor(
    call: CallState,
    readonly method: DescMethodUnary<DescMessage, DescMessage>,
    readonly message: Message,
    readonly contextValues: ContextValues,
  ) {
    this.service = method.parent;
    this[CALL] = call;
  }

  get url(): string {
    return this[CALL].url;
  }

  get signal(): AbortSignal {
    return this[CALL].signal;
  }

  get header(): Headers {
    return this[CALL].requestHeader;
  }
}

/** connect's merge of the call's context with the (possibly intercepted) request, reading nothing yet. */
class CallContext implements HandlerContext {
  readonly requestMethod = "POST";
  readonly protocolName = "grpc";
  readonly method: DescMethod;
  readonly service: DescService;
  readonly timeoutMs: () => number | undefined;
  readonly values: ContextValues;
  readonly #call: CallState;
  readonly #req: Partial<UnaryRequest>;

  constructor(call: CallState, req: UnaryRequest) {
    this.#call = call;
    this.#req = req;
    this.method = req.method;
    this.service = req.service;
    this.timeoutMs = call.timeoutMs;
    this.values = req.contextValues;
  }

  get url(): string {
    return this.#call.url;
  }

  get signal(): AbortSignal {
    return this.#req.signal ?? this.#call.signal;
  }

  get requestHeader(): Headers {
    return this.#req.header ?? this.#call.requestHeader;
  }

  get responseHeader(): Headers {
    return this.#call.responseHeader;
  }

  get responseTrailer(): Headers {
    return this.#call.responseTrailer;
  }
}

class CallResponse implements UnaryResponse<DescMessage, DescMessage> {
  readonly stream = false;
  readonly method: DescMethodUnary<DescMessage, DescMessage>;
  readonly service: DescService;
  readonly #call: CallState;

  constructor(
    call: CallState,
    readonly message: Message,
  ) {
    this.#call = call;
    this.method = call.method;
    this.service = call.method.parent;
  }

  get header(): Headers {
    return this.#call.responseHeader;
  }

  get trailer(): Headers {
    return this.#call.responseTrailer;
  }
}

/**
 * What connect's handler context holds for the call, each part made only
 * when something asks for it: the signal, the request headers as `Headers`,
 * the response headers and trailers, the URL. connect builds all of them
 * for every call; a handler that reads none of them costs none of them.
 *
 * The signal: connect makes three AbortControllers per call (the
 * request's, the deadline's, and one that links them with the shutdown
 * signal) and aborts two of them at the end of every call, each abort
 * building a DOMException with its stack: a large part of what a call that
 * does nothing costs (docs/performance.md "The cost of one unary call"),
 * for a signal that most handlers never read. Made late,
 * it is what connect's would be at that moment: already aborted if the call
 * is over, the client gone, the deadline passed or the server shutting
 * down, else aborted when one of those comes.
 */
class CallState {
  /** The response the innermost step made (its headers are the call's own). */
  innermostResponse: UnaryResponse | undefined;
  readonly timeoutMs: () => number | undefined;
  readonly #call: GrpcUnaryCall;
  readonly #deadlineAt: number | undefined;
  readonly #responseEncoding: string;
  readonly #shutdownSignal: AbortSignal | undefined;
  #controller: AbortController | undefined;
  #cleanup: (() => void) | undefined;
  #url: string | undefined;
  #requestHeader: RequestHeaders | undefined;
  #responseHeader: Headers | undefined;
  #responseTrailer: Headers | undefined;
  #finished = false;

  constructor(
    call: GrpcUnaryCall,
    readonly method: DescMethodUnary<DescMessage, DescMessage>,
    timeoutMs: number | undefined,
    responseEncoding: string,
    shutdownSignal: AbortSignal | undefined,
  ) {
    this.#call = call;
    const deadlineAt = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    this.#deadlineAt = deadlineAt;
    this.timeoutMs = () => (deadlineAt === undefined ? undefined : deadlineAt - Date.now());
    this.#responseEncoding = responseEncoding;
    this.#shutdownSignal = shutdownSignal;
  }

  /** The call's signal. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      if (this.#finished) controller.abort();
      else this.#cleanup = linkAbort(controller, this.#call.req, this.#deadlineAt, this.#shutdownSignal);
    }
    return this.#controller.signal;
  }

  /** The URL the request was sent to, as connect-node spells it. */
  get url(): string {
    if (this.#url === undefined) {
      const { req } = this.#call;
      const encrypted = "encrypted" in req.socket && req.socket.encrypted === true;
      this.#url = new URL(req.url, `${encrypted ? "https" : "http"}://${req.authority}`).toString();
    }
    return this.#url;
  }

  get requestHeader(): Headers {
    return (this.#requestHeader ??= new RequestHeaders(this.#call.req.headers));
  }

  get responseHeader(): Headers {
    return (this.#responseHeader ??= new Headers(responseHeadersOf(this.#responseEncoding) as Record<string, string>));
  }

  get responseTrailer(): Headers {
    return (this.#responseTrailer ??= new Headers({ "grpc-status": grpcStatusOk }));
  }

  /** Writes the response (its message frame, or none for an error) and ends the call's signal. */
  finish(error: ConnectError | undefined, frame?: Uint8Array): void {
    if (this.#finished) return;
    this.#finished = true;
    const { res } = this.#call;
    this.#call.settled(error === undefined ? "ok" : error.code);
    try {
      res.once("error", (err) => this.#call.writeFailed(err));
      const header = this.#responseHeader;
      res.writeHead(200, header === undefined ? responseHeadersOf(this.#responseEncoding) : nodeHeadersOf(header));
      if (error !== undefined) res.addTrailers(nodeHeadersOf(setTrailerStatus(this.responseTrailer, error)));
      else res.addTrailers(this.#responseTrailer === undefined ? OK_TRAILERS : nodeHeadersOf(this.#responseTrailer));
      if (frame === undefined) res.end();
      else res.end(frame);
    } catch (err) {
      this.#call.writeFailed(err);
    }
    this.#cleanup?.();
    this.#controller?.abort(error);
  }
}

/**
 * Aborts `controller` as connect's handler context does: at the deadline,
 * when the request's stream closes (with the reason its reset code says),
 * and at shutdown; at once if one of those has already come. Returns what
 * removes the timer and listeners.
 */
function linkAbort(
  controller: AbortController,
  req: http2.Http2ServerRequest,
  deadlineAt: number | undefined,
  shutdownSignal: AbortSignal | undefined,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  function cleanup(): void {
    clearTimeout(timer);
    req.off("close", onClose);
    shutdownSignal?.removeEventListener("abort", onShutdown);
  }
  // Whichever comes first aborts the signal, and the others are let go.
  function abort(reason: unknown): void {
    cleanup();
    if (!controller.signal.aborted) controller.abort(reason);
  }
  function onClose(): void {
    abort(errorOfResetCode(req.stream.rstCode));
  }
  function onShutdown(): void {
    abort(shutdownSignal?.reason);
  }
  function onDeadline(): void {
    abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  }
  // A signal made after the client left: the request's 'close' has passed.
  if (req.stream.closed) onClose();
  else req.once("close", onClose);
  if (shutdownSignal?.aborted) onShutdown();
  else shutdownSignal?.addEventListener("abort", onShutdown);
  if (deadlineAt !== undefined && !controller.signal.aborted) {
    const remaining = deadlineAt - Date.now();
    if (remaining <= 0) onDeadline();
    else timer = setTimeout(onDeadline, remaining);
  }
  return cleanup;
}

/** The error connect-node gives a stream its client reset with `code` (none for NO_ERROR and STREAM_CLOSED). */
export function errorOfResetCode(code: number | undefined): ConnectError | undefined {
  const c = http2.constants;
  const codes: Record<number, [string, Code]> = {
    [c.NGHTTP2_PROTOCOL_ERROR]: ["PROTOCOL_ERROR", Code.Internal],
    [c.NGHTTP2_INTERNAL_ERROR]: ["INTERNAL_ERROR", Code.Internal],
    [c.NGHTTP2_FLOW_CONTROL_ERROR]: ["FLOW_CONTROL_ERROR", Code.Internal],
    [c.NGHTTP2_SETTINGS_TIMEOUT]: ["SETTINGS_TIMEOUT", Code.Internal],
    [c.NGHTTP2_FRAME_SIZE_ERROR]: ["FRAME_SIZE_ERROR", Code.Internal],
    [c.NGHTTP2_COMPRESSION_ERROR]: ["COMPRESSION_ERROR", Code.Internal],
    [c.NGHTTP2_CONNECT_ERROR]: ["CONNECT_ERROR", Code.Internal],
    [c.NGHTTP2_REFUSED_STREAM]: ["REFUSED_STREAM", Code.Unavailable],
    [c.NGHTTP2_CANCEL]: ["CANCEL", Code.Canceled],
    [c.NGHTTP2_ENHANCE_YOUR_CALM]: ["ENHANCE_YOUR_CALM", Code.ResourceExhausted],
    [c.NGHTTP2_INADEQUATE_SECURITY]: ["INADEQUATE_SECURITY", Code.PermissionDenied],
    [c.NGHTTP2_HTTP_1_1_REQUIRED]: ["HTTP_1_1_REQUIRED", Code.PermissionDenied],
  };
  const known = code === undefined ? undefined : codes[code];
  if (known === undefined || code === undefined) return undefined;
  return new ConnectError(`http/2 stream closed with error code ${known[0]} (0x${code.toString(16)})`, known[1]);
}
