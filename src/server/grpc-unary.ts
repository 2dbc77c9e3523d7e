/**
 * Unary calls over gRPC with binary messages (what every gRPC client and
 * SDK sends), served without connect's per-call stream machinery
 * (docs/performance.md "The cost of one unary call").
 *
 * connect-es serves a unary call as a pipeline of async generators (split
 * envelopes, decompress, parse, invoke, serialize, compress, join, catch),
 * the one request and the one response each passing through every stage.
 * For a call that does little, that pipeline was most of the server's CPU.
 * This path reads the request message, calls the same interceptors and the
 * same implementation, and writes the response, with connect's own
 * serialization and limits, compression negotiation, timeout parsing and
 * error trailers, in connect's order, so that what a client sees is what
 * connect would have answered.
 *
 * Everything else stays with connect's router (rpc-handler.ts): the other
 * protocols, streaming methods, requests that are compressed, that are not
 * POST or carry no authority, and services registered with options of
 * their own.
 */
import * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
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
import { requestParseError } from "./call-record.js";

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
 * goes to connect, which answers it as before.
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

/** Builds the server of one unary method; call it for each request that {@link servesAsGrpcUnary}. */
export function createGrpcUnaryMethod(spec: UnaryImplSpec, opts: GrpcUnaryOptions): (call: GrpcUnaryCall) => void {
  const method = spec.method;
  const service = method.parent;
  const serialization = createMethodSerializationLookup(method, opts.binaryOptions, opts.jsonOptions, opts);
  const input = serialization.getI(true);
  const output = serialization.getO(true);
  const inputTypeName = method.input.typeName;

  // The interceptor chain, composed once: the call travels in the request.
  const innermost = async (req: UnaryRequest): Promise<UnaryResponse> => {
    const call = callOf(req);
    // connect's merge of the call's context with the request, reading
    // nothing yet: the signal, headers and URL are made only if asked for.
    const context: HandlerContext = {
      method,
      service: req.service,
      requestMethod: "POST",
      protocolName: "grpc",
      get url() {
        return call.url;
      },
      timeoutMs: call.timeoutMs,
      get signal() {
        return req.signal;
      },
      get requestHeader() {
        return req.header;
      },
      get responseHeader() {
        return call.responseHeader;
      },
      get responseTrailer() {
        return call.responseTrailer;
      },
      values: req.contextValues,
    };
    const message = create(method.output, await spec.impl(req.message, context));
    const response: UnaryResponse = {
      stream: false,
      message,
      method,
      service,
      get header() {
        return call.responseHeader;
      },
      get trailer() {
        return call.responseTrailer;
      },
    };
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
    const state = new CallState(call, timeout.timeoutMs, compression.response?.name ?? "", opts.shutdownSignal);

    const fail = (err: unknown): void => {
      const error = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
      state.finish(requestParseError(error.code, error.rawMessage, inputTypeName) ?? error);
    };
    // connect raises these before it reads the body.
    if (compression.error) return fail(compression.error);
    if (timeout.error) return fail(timeout.error);

    readSingleMessage(call.req, opts.readMaxBytes, (bytes) => input.parse(bytes))
      .then(async (message) => {
        const request: CallRequest = {
          stream: false,
          message,
          method,
          service,
          requestMethod: "POST",
          get url() {
            return state.url;
          },
          get signal() {
            return state.signal;
          },
          get header() {
            return state.requestHeader;
          },
          contextValues: call.contextValues,
          [CALL]: state,
        };
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

const COMPRESSED_FLAG = 0b01;

/** The call, carried in the interceptors' request (spread copies it along). */
const CALL = Symbol("leasequeue grpc unary call");
type CallRequest = UnaryRequest & { [CALL]: CallState };

function callOf(req: UnaryRequest): CallState {
  const call = (req as Partial<CallRequest>)[CALL];
  if (call === undefined) throw new ConnectError("an interceptor replaced the request without its call", Code.Internal);
  return call;
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
 * building a DOMException with its stack: 14% of the server's busy time for
 * a do-nothing call, for a signal that most handlers never read. Made late,
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

  constructor(call: GrpcUnaryCall, timeoutMs: number | undefined, responseEncoding: string, shutdownSignal: AbortSignal | undefined) {
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
 * The request's headers as handlers read them. Handlers ask for one or two
 * (Idempotency-Key, Content-Type): get() and has() answer those from Node's
 * header object, as `Headers` would (repeated values joined; there is no
 * whitespace to trim, since HTTP/2 refuses values that start or end with
 * it, RFC 9113 §8.2.1); anything else (iteration, changes, names that are not plain tokens, which
 * `Headers` refuses) goes to a real `Headers` made from them on first use,
 * as connect-node makes it for every call.
 */
class RequestHeaders implements Headers {
  readonly #node: http2.IncomingHttpHeaders;
  #headers: Headers | undefined;

  constructor(node: http2.IncomingHttpHeaders) {
    this.#node = node;
  }

  #all(): Headers {
    return (this.#headers ??= webHeadersOf(this.#node));
  }

  get(name: string): string | null {
    if (this.#headers !== undefined || !PLAIN_HEADER_NAME.test(name)) return this.#all().get(name);
    const value = this.#node[name.toLowerCase()];
    if (value === undefined) return null;
    return typeof value === "string" ? value : value.join(", ");
  }

  has(name: string): boolean {
    if (this.#headers !== undefined || !PLAIN_HEADER_NAME.test(name)) return this.#all().has(name);
    return this.#node[name.toLowerCase()] !== undefined;
  }

  append(name: string, value: string): void {
    this.#all().append(name, value);
  }

  delete(name: string): void {
    this.#all().delete(name);
  }

  set(name: string, value: string): void {
    this.#all().set(name, value);
  }

  getSetCookie(): string[] {
    return this.#all().getSetCookie();
  }

  forEach(callback: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    this.#all().forEach((value, key) => callback.call(thisArg, value, key, this));
  }

  keys(): ReturnType<Headers["keys"]> {
    return this.#all().keys();
  }

  values(): ReturnType<Headers["values"]> {
    return this.#all().values();
  }

  entries(): ReturnType<Headers["entries"]> {
    return this.#all().entries();
  }

  [Symbol.iterator](): ReturnType<Headers["entries"]> {
    return this.#all()[Symbol.iterator]();
  }
}

/** A header name `Headers` accepts (an RFC 9110 token); a pseudo-header is not one. */
const PLAIN_HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

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

/**
 * Reads the request body as connect does for a unary call: the envelopes in
 * order, each length checked as soon as its prefix arrives, each message
 * parsed as soon as it is complete, a second one refused (after it parsed);
 * at the end of the body, a stream its client reset is `canceled` (Node
 * ends such a body as if END_STREAM had arrived, and sets the reset code
 * later in the same turn), unread bytes are an incomplete envelope, and no
 * message at all is refused. Stops reading at the first refusal.
 */
function readSingleMessage<T>(req: http2.Http2ServerRequest, readMaxBytes: number, parse: (bytes: Uint8Array) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let buffered = 0;
    /** The length of the envelope being read, once its prefix is in; -1 before. */
    let length = -1;
    let flags = 0;
    let parsed: { message: T } | undefined;
    let stopped = false;
    const stop = (err: Error) => {
      stopped = true;
      req.off("data", onData);
      req.off("end", onEnd);
      req.pause();
      reject(err);
    };
    const take = (n: number): Buffer => {
      const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, buffered);
      chunks.length = 0;
      if (all.byteLength > n) chunks.push(all.subarray(n));
      buffered -= n;
      return all.subarray(0, n);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      buffered += chunk.byteLength;
      try {
        for (;;) {
          if (length < 0) {
            if (buffered < 5) return;
            const prefix = take(5);
            flags = prefix.readUInt8(0);
            length = prefix.readUInt32BE(1);
            if (length > readMaxBytes) {
              throw new ConnectError(
                `message size ${length} is larger than configured readMaxBytes ${readMaxBytes}`,
                Code.ResourceExhausted,
              );
            }
          }
          if (buffered < length) return;
          const data = take(length);
          length = -1;
          if ((flags & COMPRESSED_FLAG) === COMPRESSED_FLAG) {
            throw new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal);
          }
          const message = parse(data);
          if (parsed !== undefined)
            throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
          parsed = { message };
        }
      } catch (err) {
        stop(err instanceof Error ? err : new ConnectError(String(err), Code.Internal));
      }
    };
    const onEnd = () => {
      setImmediate(() => {
        if (stopped) return;
        const rst = req.stream.rstCode;
        if (rst !== undefined && rst !== http2.constants.NGHTTP2_NO_ERROR) {
          return stop(new ConnectError(`the client reset the stream (HTTP/2 error code ${rst})`, Code.Canceled));
        }
        // Like connect's envelope reader: a prefix read whose message never came is not "incomplete", only unread bytes are.
        if (buffered > 0) return stop(new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument));
        if (parsed === undefined)
          return stop(new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented));
        resolve(parsed.message);
      });
    };
    req.on("data", onData);
    req.once("end", onEnd);
  });
}

function envelope(flags: number, data: Uint8Array): Uint8Array {
  const frame = Buffer.allocUnsafe(5 + data.byteLength);
  frame.writeUInt8(flags, 0);
  frame.writeUInt32BE(data.byteLength, 1);
  frame.set(data, 5);
  return frame;
}

function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return typeof value === "string" ? value : value.join(", ");
}

/** The request's headers as connect-node gives them to handlers (pseudo-headers dropped). */
function webHeadersOf(nodeHeaders: http2.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(nodeHeaders)) {
    if (name.startsWith(":") || value === undefined) continue;
    if (typeof value === "string") headers.append(name, value);
    else for (const v of value) headers.append(name, v);
  }
  return headers;
}

/** Headers as Node writes them, the way connect-node converts them. */
function nodeHeadersOf(headers: Headers): http2.OutgoingHttpHeaders {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  headers.forEach((value, key) => {
    const existing = out[key];
    if (existing === undefined) out[key] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[key] = [existing, value];
  });
  return out;
}

function replaceHeaders(to: Headers, from: Headers): void {
  for (const key of [...to.keys()]) to.delete(key);
  from.forEach((value, key) => to.set(key, value));
}
