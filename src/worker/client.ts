/**
 * A typed LeaseQueue client for producers, workers and operators,
 * over the two protocols a Node.js process would pick (`transport`).
 */
import { fromJson, isMessage, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import type { GenService } from "@bufbuild/protobuf/codegenv2";
import { EmptySchema, ValueSchema, type Empty, type Value } from "@bufbuild/protobuf/wkt";
import { createClient, type CallOptions, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import type * as http2 from "node:http2";
import {
  LeaseQueueService,
  type SubmitBatchRequestSchema,
  type SubmitBatchResponse,
  type SubmitRequestSchema,
  type SubmitResponse,
  type WorkRequest,
  type WorkRequestSchema,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { bearerTokenInterceptor } from "./bearer-token.js";
import { traceContextInterceptor } from "./trace-propagation.js";

/** The generated service client: every RPC of docs/api.md "RPCs", typed. */
export type LeaseQueueClient = Client<typeof LeaseQueueService>;

/** A submit request whose payload may be plain JSON (or a google.protobuf.Value, as the generated client takes it). */
export type JsonSubmitRequest = Omit<MessageInitShape<typeof SubmitRequestSchema>, "payload" | "$typeName"> & {
  payload?: JsonValue | Value;
};
type SubmitInit = MessageInitShape<typeof SubmitRequestSchema>;

/**
 * What createLeaseQueueClient makes: the generated client, whose Submit and
 * SubmitBatch also take payloads as plain JSON, as a handler returns its
 * result (`client.submit({ queue, task, payload: { invoiceId: 42 } })`); a
 * Value message, or its init shape `{ kind: { case, value } }`, is sent as
 * it is. It is a LeaseQueueClient wherever one is asked for; read a job's
 * payload or result as plain JSON with valueToJson(job.result).
 */
export type JsonLeaseQueueClient = LeaseQueueClient & {
  submit(request: JsonSubmitRequest, options?: CallOptions): Promise<SubmitResponse>;
  submitBatch(
    request: Omit<MessageInitShape<typeof SubmitBatchRequestSchema>, "jobs" | "$typeName"> & { jobs?: JsonSubmitRequest[] },
    options?: CallOptions,
  ): Promise<SubmitBatchResponse>;
};

export type LeaseQueueTransport = "grpc" | "connect";

export interface LeaseQueueClientOptions {
  /** The API listener, e.g. `http://127.0.0.1:8080` or `https://queue.internal:8443`. */
  url: string;
  /**
   * Protocol; default `"grpc"`:
   * - `"grpc"`: gRPC over HTTP/2 (h2c for `http://`, TLS with
   *   ALPN for `https://`), binary protobuf. What every other language's
   *   generated stubs speak, and the most efficient choice.
   * - `"connect"`: the Connect protocol, over HTTP/2 by default or HTTP/1.1
   *   (`httpVersion: "1.1"`) for proxies and load balancers that only pass
   *   HTTP/1.1. Server streams work on both; unary calls are plain POSTs you
   *   can reproduce with curl. `useBinaryFormat: false` sends JSON, handy
   *   when reading traffic.
   */
  transport?: LeaseQueueTransport;
  /** Connect only: HTTP version; default `"2"`. gRPC always uses HTTP/2. */
  httpVersion?: "1.1" | "2";
  /** Binary protobuf (default `true`) or JSON (Connect only). */
  useBinaryFormat?: boolean;
  /**
   * HTTP/2 PING interval while calls are open, so a dead connection under an
   * idle stream is noticed and the worker reconnects; default 30 000 ms.
   * 0 disables.
   */
  pingIntervalMs?: number;
  /**
   * A bearer token (as `leasequeue hash-token` printed it), sent as
   * `authorization: Bearer <token>` on every call, unary and streaming.
   * For a server with LEASEQUEUE_AUTH_FILE; use TLS (`https://`) outside a
   * private network (docs/writing-a-worker.md "Authentication"). The SDK
   * never logs it nor puts it in an error.
   */
  token?: string;
  /**
   * Send the active OpenTelemetry span's context as the traceparent and
   * tracestate headers of Submit and SubmitBatch, so that the jobs join the
   * caller's trace (docs/api.md "Trace context"); default true. Without a
   * registered OpenTelemetry SDK there is no span, and nothing is sent.
   */
  traceContext?: boolean;
  /**
   * Applied to every call (after the one that adds `token`, if given). They
   * see every message decoded, so a client with interceptors has the Work
   * stream's leases decoded by protobuf-es rather than read by hand, at some
   * CPU per job (docs/performance.md "Worker SDKs").
   */
  interceptors?: Interceptor[];
  /** Passed to Node's `http2.connect()` (HTTP/2), e.g. `{ ca }` for a private CA. */
  nodeOptions?: http2.SecureClientSessionOptions;
}

/**
 * The Work call with its responses handed over undecoded (an Empty holding
 * every field as an unknown field), for lease-decoding.ts to read: the
 * same call on the wire, the decoding done by hand.
 */
export type RawWorkCall = (requests: AsyncIterable<WorkRequest>, options: { signal: AbortSignal }) => AsyncIterable<Empty>;

const RAW_WORK = { ...LeaseQueueService.method.work, output: EmptySchema };
const RAW_WORK_SERVICE = { ...LeaseQueueService, methods: [RAW_WORK], method: { work: RAW_WORK } } as unknown as GenService<{
  work: { methodKind: "bidi_streaming"; input: typeof WorkRequestSchema; output: typeof EmptySchema };
}>;

/** Clients made by createLeaseQueueClient over HTTP/2, with their raw Work call when their messages are binary. */
const BIDI_CAPABLE = new WeakMap<object, RawWorkCall | undefined>();

/** The raw Work call of a client that createLeaseQueueClient made over HTTP/2 with binary messages and no interceptors of the caller's. */
export function rawWorkCallOf(client: LeaseQueueClient): RawWorkCall | undefined {
  return BIDI_CAPABLE.get(client);
}

/**
 * Whether `client` can open the Work stream: true for a client that
 * createLeaseQueueClient made over HTTP/2, false for Connect over HTTP/1.1
 * and for clients made elsewhere (whose HTTP version the SDK cannot see).
 *
 * A client made here remembers whether its transport can carry a
 * bidirectional stream (HTTP/2: gRPC, or Connect with httpVersion "2"), so a
 * worker on it takes the Work stream
 * (docs/api.md "The batched path: Acknowledge and Work") and one on Connect
 * over HTTP/1.1 takes StreamClaims plus Acknowledge.
 */
export function canStreamBothWays(client: LeaseQueueClient): boolean {
  return BIDI_CAPABLE.has(client);
}

/**
 * Creates a typed client (JsonLeaseQueueClient). Calls reject with
 * `ConnectError`; see docs/api.md "Errors" for codes and reasons.
 */
export function createLeaseQueueClient(options: LeaseQueueClientOptions): JsonLeaseQueueClient {
  return withJsonPayloads(generatedClient(options));
}

const VALUE_KINDS = new Set([undefined, "nullValue", "numberValue", "stringValue", "boolValue", "structValue", "listValue"]);

/**
 * Whether `payload` is a google.protobuf.Value: a message, or the init shape
 * the generated client takes (`{ kind: { case: "numberValue", value: 1 } }`),
 * which is passed on as it is. Anything else is plain JSON.
 */
function isValue(payload: JsonValue | Value): payload is Value {
  if (isMessage(payload, ValueSchema)) return true;
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) return false;
  const keys = Object.keys(payload);
  const kind = (payload as { kind?: unknown }).kind;
  return (
    keys.length === 1 &&
    keys[0] === "kind" &&
    kind !== null &&
    typeof kind === "object" &&
    VALUE_KINDS.has((kind as { case?: string }).case)
  );
}

/** A payload as the generated client takes it: a Value as it is, plain JSON converted. */
function payloadValue(payload: JsonValue | Value | undefined): Value | undefined {
  if (payload === undefined || isValue(payload)) return payload;
  return fromJson(ValueSchema, payload);
}

/** A submit request as the generated client takes it (its payload a Value). */
export function submitRequestInit(r: JsonSubmitRequest): SubmitInit {
  return { ...r, payload: payloadValue(r.payload) };
}

function withJsonPayloads(client: LeaseQueueClient): JsonLeaseQueueClient {
  const submitRequest = submitRequestInit;
  const wrapped = {
    ...client,
    submit: (request: JsonSubmitRequest, options?: CallOptions) => client.submit(submitRequest(request), options),
    submitBatch: (request: { jobs?: JsonSubmitRequest[] }, options?: CallOptions) =>
      client.submitBatch({ ...request, jobs: request.jobs?.map(submitRequest) }, options),
  } as JsonLeaseQueueClient;
  if (BIDI_CAPABLE.has(client)) BIDI_CAPABLE.set(wrapped, BIDI_CAPABLE.get(client));
  return wrapped;
}

function generatedClient(options: LeaseQueueClientOptions): LeaseQueueClient {
  const { url, transport = "grpc", httpVersion = "2", nodeOptions } = options;
  const interceptors = [
    ...(options.token !== undefined ? [bearerTokenInterceptor(options.token)] : []),
    ...(options.traceContext !== false ? [traceContextInterceptor()] : []),
    ...(options.interceptors ?? []),
  ];
  // The Work stream's responses are read by hand only where no interceptor
  // of the caller's could look at them (it would see them undecoded).
  const rawReadable = (options.interceptors ?? []).length === 0;
  const pingIntervalMs = options.pingIntervalMs ?? 30_000;
  const http2Options = {
    ...(pingIntervalMs > 0 ? { pingIntervalMs } : {}),
    ...(nodeOptions !== undefined ? { nodeOptions } : {}),
  };
  switch (transport) {
    case "grpc":
      if (options.useBinaryFormat === false)
        throw new TypeError('createLeaseQueueClient: gRPC is binary only; use transport "connect" for JSON');
      return bidiCapable(createGrpcTransport({ baseUrl: url, interceptors, ...http2Options }), rawReadable);
    case "connect": {
      const common = { baseUrl: url, interceptors, useBinaryFormat: options.useBinaryFormat ?? true };
      if (httpVersion === "1.1") return createClient(LeaseQueueService, createConnectTransport({ ...common, httpVersion: "1.1" }));
      return bidiCapable(createConnectTransport({ ...common, httpVersion: "2", ...http2Options }), rawReadable && common.useBinaryFormat);
    }
    default:
      throw new TypeError(`createLeaseQueueClient: unknown transport ${JSON.stringify(transport)}; use "grpc" or "connect"`);
  }
}

function bidiCapable(transport: Transport, rawReadable: boolean): LeaseQueueClient {
  const client = createClient(LeaseQueueService, transport);
  BIDI_CAPABLE.set(client, rawReadable ? (createClient(RAW_WORK_SERVICE, transport).work as RawWorkCall) : undefined);
  return client;
}
