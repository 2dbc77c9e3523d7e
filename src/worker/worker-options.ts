/**
 * createWorker's options: what each means and defaults to, and the checks
 * that refuse at once what the server would refuse later (its bounds are
 * domain/request-bounds.ts's).
 */
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
  /** Names this worker in leases and events: 1-128 of `[A-Za-z0-9._:@/-]`, e.g. `${hostname}:${pid}`. */
  workerId: string;
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
  /** Observability hook; exceptions it throws are ignored. Without it, `error`, `refused` and `disconnected` events go to the console. */
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

/** Checks `o` (TypeError or RangeError naming the option) and fills in the defaults; creates the client for a `url`. */
export function workerSettings(o: WorkerOptions): WorkerSettings {
  if ((o.url === undefined) === (o.client === undefined)) throw new TypeError("createWorker: give exactly one of `url` and `client`");
  if (o.client !== undefined && o.token !== undefined)
    throw new TypeError("createWorker: `token` goes with `url`; with `client`, give it to createLeaseQueueClient()");
  if (!BOUNDS.name.test(o.queue)) throw new TypeError(`createWorker: queue ${JSON.stringify(o.queue)} must match ${BOUNDS.name.source}`);
  if (!BOUNDS.workerId.test(o.workerId)) throw new TypeError(`createWorker: workerId must be 1-128 chars of [A-Za-z0-9._:@/-]`);
  if (typeof o.handler !== "function") throw new TypeError("createWorker: handler must be a function");
  const [minInFlight, maxInFlight] = BOUNDS.maxInFlight;
  const concurrency = o.concurrency ?? DEFAULTS.maxInFlight;
  if (!Number.isInteger(concurrency) || concurrency < minInFlight || concurrency > maxInFlight) {
    throw new RangeError(`createWorker: concurrency must be an integer in ${minInFlight}..${maxInFlight}`);
  }
  const [minLease, maxLease] = BOUNDS.leaseDurationMs;
  const leaseDurationMs = o.leaseDuration ?? DEFAULTS.leaseDurationMs;
  if (!Number.isInteger(leaseDurationMs) || leaseDurationMs < minLease || leaseDurationMs > maxLease) {
    throw new RangeError(`createWorker: leaseDuration is in milliseconds and must be an integer in ${minLease}..${maxLease} (1 s..12 h)`);
  }
  const heartbeatIntervalMs = o.heartbeatInterval ?? Math.floor(leaseDurationMs / 3);
  if (!(heartbeatIntervalMs > 0 && heartbeatIntervalMs < leaseDurationMs))
    throw new RangeError("createWorker: heartbeatInterval must be > 0 and shorter than leaseDuration");
  const shutdownTimeoutMs = o.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
  if (!(shutdownTimeoutMs >= 0)) throw new RangeError("createWorker: shutdownTimeout must be >= 0");
  const ackBatchWindowMs = o.ackBatchWindow ?? 1;
  if (!(Number.isFinite(ackBatchWindowMs) && ackBatchWindowMs >= 0 && ackBatchWindowMs <= 1000)) {
    throw new RangeError("createWorker: ackBatchWindow is in milliseconds and must be in 0..1000");
  }
  if (o.workStream !== undefined && typeof o.workStream !== "boolean") throw new TypeError("createWorker: workStream must be a boolean");
  const unary = o.transport === "unary";
  if (unary && o.workStream === true) throw new TypeError('createWorker: transport "unary" takes no Work stream; leave workStream out');
  const client =
    o.client ??
    (o.transport === "unary"
      ? createLeaseQueueClient({ url: o.url!, transport: "connect", httpVersion: "1.1", token: o.token })
      : createLeaseQueueClient({ url: o.url!, transport: o.transport, token: o.token }));
  return {
    client,
    queue: o.queue,
    workerId: o.workerId,
    concurrency,
    leaseDurationMs,
    heartbeatIntervalMs,
    shutdownTimeoutMs,
    reconnectBackoff: o.reconnectBackoff ?? {},
    ackBatchWindowMs,
    path: unary ? "unary" : (o.workStream ?? canStreamBothWays(client)) ? "work" : "stream-claims",
    handler: o.handler,
    tracing: tracingOptions(o.tracing),
    onEvent: eventReporter(o.onEvent, o.workerId, o.queue),
  };
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
