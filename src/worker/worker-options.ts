/**
 * createWorker's options: what each means and defaults to, and the checks
 * that refuse at once what the server would refuse later (its bounds are
 * domain/request-bounds.ts's).
 */
import { hostname } from "node:os";
import { BOUNDS, DEFAULTS } from "../domain/request-bounds.js";
import type { BackoffOptions } from "./backoff.js";
import { canStreamBothWays, createLeaseQueueClient, type LeaseQueueClient, type LeaseQueueTransport } from "./client.js";
import type { WorkerTracingOptions } from "./attempt-span.js";
import type { JobHandler } from "./job-attempt.js";
import { eventReporter, type ReportEvent, type WorkerEvent } from "./worker-events.js";

/** How long close() waits for running handlers unless `shutdownTimeout` says otherwise (docs/writing-a-worker.md "Options of `createWorker`"). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;

export interface WorkerOptions {
  /** The API URL; the worker creates its own client. Give this or `client`. */
  url?: string;
  /** A client from createLeaseQueueClient(), e.g. with TLS or interceptors. Give this or `url`. */
  client?: LeaseQueueClient;
  /**
   * With `url`: the protocol, `"grpc"` (default) or `"connect"` (see
   * createLeaseQueueClient). `"unary"` (with `url` or `client`): only unary
   * calls, for networks that pass no streams: Claim carrying the
   * acknowledgements of earlier leases, long-polling when it carries none
   * (docs/api.md "Claim with acks"); with `url` over Connect with HTTP/1.1,
   * binary, so every call is a plain POST.
   */
  transport?: LeaseQueueTransport | "unary";
  /** With `url`: a bearer token for a server with authentication on (createLeaseQueueClient's `token`). */
  token?: string;
  /** The queue to work. */
  queue: string;
  /**
   * Names this worker in leases and events: 1-128 of `[A-Za-z0-9._:@/-]`;
   * default `ts-<host>-<pid>` (defaultWorkerId(), cut to 128), as the
   * Python and Go workers make theirs.
   */
  workerId?: string;
  /** Handlers running at once, and the stream's `max_in_flight`: 1..1000; default 1. */
  concurrency?: number;
  /** Lease duration in milliseconds, 1 000..43 200 000 (1 s..12 h); default 60 000. */
  leaseDuration?: number;
  /** Milliseconds between a lease's heartbeats; default a third of `leaseDuration`. Must be shorter than it. */
  heartbeatInterval?: number;
  /** Milliseconds close() waits for running handlers before failing their jobs back; default 10 000 (DEFAULT_SHUTDOWN_TIMEOUT_MS). */
  shutdownTimeout?: number;
  /** Reconnect backoff; default 250 ms doubling to 30 s, jittered (backoff.ts DEFAULT_RECONNECT_BACKOFF). */
  reconnectBackoff?: BackoffOptions;
  /**
   * Milliseconds an acknowledgement (Complete, Fail, Snooze, Release, Heartbeat)
   * waits for others to share its message; default 1. A batch leaves
   * earlier when it holds 1000. 0 waits one turn of the event loop.
   */
  ackBatchWindow?: number;
  /**
   * Take the Work stream (leases and acknowledgements on one HTTP/2 stream)
   * rather than StreamClaims plus Acknowledge. Default: true for a client
   * from createLeaseQueueClient over HTTP/2 (gRPC, or Connect with
   * httpVersion "2"), false for Connect over HTTP/1.1, which cannot carry
   * a bidirectional stream, and for clients made elsewhere.
   */
  workStream?: boolean;
  handler: JobHandler;
  /**
   * The CONSUMER span of each attempt (docs/writing-a-worker.md "Tracing"),
   * through the OpenTelemetry API and the SDK the application registered
   * (none: no spans): a child of the job's trace context, or with
   * `link: true` a new trace linked to it.
   */
  tracing?: WorkerTracingOptions;
  /** Observability hook; exceptions it throws are ignored. Without it, `error` and `disconnected` events go to the console. */
  onEvent?: (event: WorkerEvent) => void;
}

/** WorkerOptions checked, with every default filled in. */
export interface WorkerSettings {
  client: LeaseQueueClient;
  queue: string;
  workerId: string;
  concurrency: number;
  leaseDurationMs: number;
  heartbeatIntervalMs: number;
  shutdownTimeoutMs: number;
  reconnectBackoff: BackoffOptions;
  ackBatchWindowMs: number;
  /** How leases come: the Work stream, StreamClaims plus Acknowledge, or Claim carrying acknowledgements. */
  path: "work" | "stream-claims" | "unary";
  handler: JobHandler;
  tracing: WorkerTracingOptions;
  onEvent: ReportEvent;
}

/** The longest wait a Node.js timer takes (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * A worker's id unless `workerId` says otherwise, as the Python and Go
 * SDKs make theirs (py-, go-): `ts-<host>-<pid>`, cut to the server's bound
 * of 128 characters.
 */
export function defaultWorkerId(): string {
  return `ts-${hostname()}-${process.pid}`.slice(0, 128);
}

/**
 * Checks `o` and fills in the defaults; creates the client for a `url`.
 * A missing required option, or one of the wrong type, is a TypeError and
 * one out of range a RangeError, each naming the option, thrown before
 * anything connects.
 */
export function workerSettings(o: WorkerOptions): WorkerSettings {
  if (typeof o !== "object" || o === null)
    throw new TypeError(`createWorker: give the options, an object ({ url, queue, handler, ... }), got ${kind(o)}`);
  if ((o.url === undefined) === (o.client === undefined)) throw new TypeError("createWorker: give exactly one of `url` and `client`");
  if (o.url !== undefined) checkUrl(o.url);
  if (o.client !== undefined && (typeof o.client !== "object" || o.client === null || typeof o.client.acknowledge !== "function")) {
    throw new TypeError(`createWorker: client must be a client from createLeaseQueueClient(), got ${kind(o.client)}`);
  }
  if (o.transport !== undefined && o.transport !== "grpc" && o.transport !== "connect" && o.transport !== "unary") {
    throw new TypeError(`createWorker: transport must be "grpc", "connect" or "unary", got ${describe(o.transport)}`);
  }
  if (o.token !== undefined) {
    if (o.client !== undefined)
      throw new TypeError("createWorker: `token` goes with `url`; with `client`, give it to createLeaseQueueClient()");
    if (typeof o.token !== "string") throw new TypeError(`createWorker: token must be a string, got ${kind(o.token)}`);
  }
  const queue = requiredString(o.queue, "queue");
  if (!BOUNDS.name.test(queue)) throw new RangeError(`createWorker: queue ${JSON.stringify(queue)} must match ${BOUNDS.name.source}`);
  const workerId = o.workerId === undefined ? defaultWorkerId() : requiredString(o.workerId, "workerId");
  if (!BOUNDS.workerId.test(workerId)) {
    throw new RangeError(
      o.workerId === undefined
        ? `createWorker: workerId: the default ${JSON.stringify(workerId)} (from the host name) is not 1-128 chars of [A-Za-z0-9._:@/-]; give workerId`
        : "createWorker: workerId must be 1-128 chars of [A-Za-z0-9._:@/-]",
    );
  }
  if (typeof o.handler !== "function") {
    throw new TypeError(`createWorker: handler ${o.handler === undefined ? "is required" : `must be a function, got ${kind(o.handler)}`}`);
  }
  const [minInFlight, maxInFlight] = BOUNDS.maxInFlight;
  const concurrency = optionalNumber(o.concurrency, "concurrency") ?? DEFAULTS.maxInFlight;
  if (!Number.isInteger(concurrency) || concurrency < minInFlight || concurrency > maxInFlight) {
    throw new RangeError(`createWorker: concurrency must be an integer in ${minInFlight}..${maxInFlight}`);
  }
  const [minLease, maxLease] = BOUNDS.leaseDurationMs;
  const leaseDurationMs = optionalNumber(o.leaseDuration, "leaseDuration") ?? DEFAULTS.leaseDurationMs;
  if (!Number.isInteger(leaseDurationMs) || leaseDurationMs < minLease || leaseDurationMs > maxLease) {
    throw new RangeError(`createWorker: leaseDuration is in milliseconds and must be an integer in ${minLease}..${maxLease} (1 s..12 h)`);
  }
  const heartbeatIntervalMs = optionalNumber(o.heartbeatInterval, "heartbeatInterval") ?? Math.floor(leaseDurationMs / 3);
  if (!(heartbeatIntervalMs > 0 && heartbeatIntervalMs < leaseDurationMs))
    throw new RangeError("createWorker: heartbeatInterval must be > 0 and shorter than leaseDuration");
  const shutdownTimeoutMs = optionalNumber(o.shutdownTimeout, "shutdownTimeout") ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
  if (!(shutdownTimeoutMs >= 0 && shutdownTimeoutMs <= MAX_TIMER_MS)) {
    throw new RangeError(`createWorker: shutdownTimeout is in milliseconds and must be in 0..${MAX_TIMER_MS}`);
  }
  const reconnectBackoff = backoffOptions(o.reconnectBackoff);
  const ackBatchWindowMs = optionalNumber(o.ackBatchWindow, "ackBatchWindow") ?? 1;
  if (!(ackBatchWindowMs >= 0 && ackBatchWindowMs <= 1000)) {
    throw new RangeError("createWorker: ackBatchWindow is in milliseconds and must be in 0..1000");
  }
  if (o.workStream !== undefined && typeof o.workStream !== "boolean") throw new TypeError("createWorker: workStream must be a boolean");
  const unary = o.transport === "unary";
  if (unary && o.workStream === true) throw new TypeError('createWorker: transport "unary" takes no Work stream; leave workStream out');
  if (o.onEvent !== undefined && typeof o.onEvent !== "function") {
    throw new TypeError(`createWorker: onEvent must be a function, got ${kind(o.onEvent)}`);
  }
  const tracing = tracingOptions(o.tracing);
  const client =
    o.client ??
    (o.transport === "unary"
      ? createLeaseQueueClient({ url: o.url!, transport: "connect", httpVersion: "1.1", token: o.token })
      : createLeaseQueueClient({ url: o.url!, transport: o.transport, token: o.token }));
  return {
    client,
    queue,
    workerId,
    concurrency,
    leaseDurationMs,
    heartbeatIntervalMs,
    shutdownTimeoutMs,
    reconnectBackoff,
    ackBatchWindowMs,
    path: unary ? "unary" : (o.workStream ?? canStreamBothWays(client)) ? "work" : "stream-claims",
    handler: o.handler,
    tracing,
    onEvent: eventReporter(o.onEvent, workerId, queue),
  };
}

/** What a value is, for an error message: its type, or null; never its text (a token, say). */
function kind(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

/** A value short enough to quote in an error message (for options that are never secret). */
function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : kind(value);
}

function requiredString(value: unknown, name: string): string {
  if (value === undefined) throw new TypeError(`createWorker: ${name} is required`);
  if (typeof value !== "string") throw new TypeError(`createWorker: ${name} must be a string, got ${kind(value)}`);
  return value;
}

/** A number option: undefined when not given; a TypeError naming it for anything but a number (NaN included). */
function optionalNumber(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || Number.isNaN(value)) throw new TypeError(`createWorker: ${name} must be a number, got ${kind(value)}`);
  return value;
}

function checkUrl(url: unknown): void {
  if (typeof url !== "string") throw new TypeError(`createWorker: url must be a string, got ${kind(url)}`);
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    throw new TypeError(`createWorker: url must be an http:// or https:// URL such as "http://127.0.0.1:8080", got ${JSON.stringify(url)}`);
  }
}

function backoffOptions(b: BackoffOptions | undefined): BackoffOptions {
  if (b === undefined) return {};
  if (typeof b !== "object" || b === null)
    throw new TypeError(`createWorker: reconnectBackoff must be an object ({ initialMs?, maxMs? }), got ${kind(b)}`);
  for (const name of ["initialMs", "maxMs"] as const) {
    const ms = optionalNumber(b[name], `reconnectBackoff.${name}`);
    if (ms !== undefined && !(ms > 0 && ms <= MAX_TIMER_MS)) {
      throw new RangeError(`createWorker: reconnectBackoff.${name} is in milliseconds and must be in 1..${MAX_TIMER_MS}`);
    }
  }
  if (b.initialMs !== undefined && b.maxMs !== undefined && b.initialMs > b.maxMs) {
    throw new RangeError("createWorker: reconnectBackoff.initialMs must not exceed reconnectBackoff.maxMs");
  }
  return { initialMs: b.initialMs, maxMs: b.maxMs };
}

function tracingOptions(t: WorkerTracingOptions | undefined): WorkerTracingOptions {
  if (t === undefined) return {};
  if (typeof t !== "object" || t === null) throw new TypeError("createWorker: tracing must be an object ({ link?, tracer? })");
  if (t.link !== undefined && typeof t.link !== "boolean") throw new TypeError("createWorker: tracing.link must be a boolean");
  if (t.tracer !== undefined && typeof t.tracer?.startSpan !== "function") {
    throw new TypeError("createWorker: tracing.tracer must be an OpenTelemetry Tracer");
  }
  return t;
}
