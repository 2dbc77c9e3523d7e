/**
 * Composition: config -> store -> service -> listeners, and their orderly
 * shutdown. Everything the server is made of is wired here and only here:
 * startServer reads as the list of steps, each step below it.
 */
import { setMaxListeners } from "node:events";
import { createRegistry } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { file_google_rpc_error_details } from "../gen/ts/google/rpc/error_details_pb.js";
import { redactDatabaseUrl, type Config } from "./config/config.js";
import { systemClock, type Clock } from "./domain/clock.js";
import { formatDurationText } from "./domain/duration-text.js";
import { FIRST_BYTE_TIMEOUT_MS } from "./domain/timing-defaults.js";
import { BacklogWatches } from "./dispatch/backlog-watches.js";
import { ClaimStreams } from "./dispatch/claim-streams.js";
import { EventFeed } from "./dispatch/event-feed.js";
import { startLeaseSweeper } from "./maintenance/lease-sweeper.js";
import { startPruner } from "./maintenance/pruner.js";
import { JobWaiters } from "./dispatch/job-waiters.js";
import { QueueWakeups } from "./dispatch/queue-wakeups.js";
import { startScheduler } from "./maintenance/scheduler.js";
import type { Logger } from "./logger.js";
import { createMetrics, type Metrics } from "./metrics/metrics.js";
import { startApiListener, type ApiListener } from "./server/api-listener.js";
import { createConsoleHandler, defaultConsoleDir } from "./server/console-files.js";
import { withApiReference } from "./server/docs-files.js";
import { HealthStatus, ServingStatus } from "./server/health.js";
import { Authenticator } from "./server/authenticator.js";
import type { CallSpans } from "./server/call-spans.js";
import { binaryRoutes, createWatchOutputs, HAND_ENCODERS } from "./server/fast-wire/index.js";
import { acceptedCompressions } from "./server/request-compression.js";
import { boundaryInterceptor, routes, type RoutesOptions } from "./server/routes.js";
import { createRpcHandler, strictUtf8Decoder, type RpcHandler } from "./server/rpc-handler.js";
import { startSideListener, type SideListener } from "./server/side-listener.js";
import { WriteReadiness } from "./server/write-readiness.js";
import { createExternalScalerService } from "./service/external-scaler-handlers.js";
import { createLeaseQueueService } from "./service/leasequeue-service.js";
import { databaseLocation, describeLocation, holdDatabase, openStore, type DatabaseFileReport } from "./store/engine.js";
import type { Store } from "./store/store.js";
import { startTracing, type Tracing } from "./telemetry/tracing.js";

/** How long shutdown waits for in-flight calls before cutting them off. */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * How long shutdown waits for the collector to take the last spans: a
 * tenth of the drain time (docs/operations.md "Logs and signals"), so a
 * collector that is down or never answers cannot hold a stop.
 */
export const SPAN_FLUSH_MS = SHUTDOWN_GRACE_MS / 10;

export interface RunningServer {
  /** e.g. http://127.0.0.1:8080 */
  readonly apiUrl: string;
  /** e.g. http://127.0.0.1:9464 */
  readonly metricsUrl: string;
  readonly store: Store;
  /**
   * Reads the auth file again (SIGHUP): a valid file replaces the tokens, a
   * bad one is logged and the tokens in force stay. Returns whether the
   * tokens were replaced (false too when authentication is off).
   */
  reloadAuth(): boolean;
  /** Stops accepting, lets in-flight calls finish (bounded), closes the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  log: Logger;
  /** The host's clock. The server runs on its store's clock (Store.clock): on PostgreSQL it follows the database's. */
  clock?: Clock;
  /** PostgreSQL: the database's clock as a test moves it; default: the database's own. */
  databaseClock?: Clock;
  /** Background lease sweep interval; default 500 ms. */
  sweepIntervalMs?: number;
  /** Idle interval between StreamClaims and Work keepalive messages; default 15 s. */
  claimKeepaliveMs?: number;
  /** Idle interval between WatchEvents keepalive messages; default 15 s. */
  watchKeepaliveMs?: number;
  /** Events buffered per WatchEvents subscriber before it is dropped; default 10 000. */
  watchBufferLimit?: number;
  /** Time between retention passes (the first runs at start); default 60 s. */
  pruneIntervalMs?: number;
  /** How long to wait for another process's hold on the database before refusing to start; default 5 s (store/engine.ts). */
  databaseHoldWaitMs?: number;
}

export { databaseLocation } from "./store/engine.js";

export async function startServer(config: Config, options: StartOptions): Promise<RunningServer> {
  const { log } = options;
  // First: a bad auth file refuses to start before anything is opened (AuthFileError).
  const auth = loadAuthentication(config, log);
  // Spans only with an exporter configured: otherwise the SDK is never loaded.
  const tracing = config.tracing === undefined ? undefined : await startTracing(config.tracing, log);
  const database = await openDatabase(config, log, options);
  const { store } = database;
  // Every time from here on is the store's: on PostgreSQL the database's clock.
  const clock = store.clock;
  const feeds = createFeeds(config, store, clock, log, options);
  const metrics = createServerMetrics(store, clock, feeds);
  const health = createHealth(store, log);
  const background = startBackgroundWork(config, store, clock, log, metrics, tracing, options);
  const service = createLeaseQueueService({
    store,
    clock,
    ...feeds,
    scheduler: background.scheduler,
    onIdempotentReplay: (queue) => metrics.idempotentReplay(queue),
    producerSpans: tracing?.producers,
    workKeepaliveMs: options.claimKeepaliveMs,
    handEncoders: config.wire === "fast" ? HAND_ENCODERS : undefined,
    log,
  });
  const scaler = createExternalScalerService({ store, backlogWatches: feeds.backlogWatches });
  const shutdown = createShutdownSignal();
  const rpc = createApiHandler(config, {
    service,
    scaler,
    health: health.status,
    auth,
    metrics,
    log,
    shutdownSignal: shutdown.signal,
    callSpans: tracing?.calls,
  });
  let listeners: Listeners;
  try {
    listeners = await startListeners(config, { rpc, metrics, health, auth, log, shutdownSignal: shutdown.signal });
  } catch (err) {
    // Nothing was served: stop what runs in the background and give the database back.
    await background.stop();
    await database.close();
    await stopTracing(tracing, log);
    throw err;
  }

  let closing: Promise<void> | undefined;
  return {
    apiUrl: listeners.api.address.url,
    metricsUrl: listeners.side.address.url,
    store,
    reloadAuth: () => reloadAuthentication(auth, log),
    close() {
      closing ??= (async () => {
        log.info("shutting down", { graceMs: SHUTDOWN_GRACE_MS });
        health.stopServing();
        // Streams and long-polls end now (streams with `unavailable`); unary calls finish.
        shutdown.abort(new ConnectError("the server is shutting down", Code.Unavailable));
        await background.stop();
        await listeners.api.close(SHUTDOWN_GRACE_MS);
        feeds.claimStreams.close();
        feeds.events.close();
        feeds.wakeups.close();
        feeds.backlogWatches.close();
        feeds.jobWaiters.close();
        metrics.close();
        await listeners.side.close();
        await database.close();
        // Last: the spans of the calls that just finished are exported.
        await stopTracing(tracing, log);
        log.info("stopped");
      })();
      return closing;
    },
  };
}

async function stopTracing(tracing: Tracing | undefined, log: Logger): Promise<void> {
  try {
    await tracing?.shutdown(SPAN_FLUSH_MS);
  } catch (err) {
    log.warn("exporting the last spans failed; they are dropped", { error: err instanceof Error ? err.message : String(err) });
  }
}

function loadAuthentication(config: Config, log: Logger): Authenticator | undefined {
  if (config.authFile === undefined) return undefined;
  const auth = new Authenticator(config.authFile, log);
  log.info("authentication on", { authFile: config.authFile, tokens: auth.size });
  return auth;
}

function reloadAuthentication(auth: Authenticator | undefined, log: Logger): boolean {
  if (auth === undefined) {
    log.info("nothing to reload: authentication is off (LEASEQUEUE_AUTH_FILE is not set)");
    return false;
  }
  return auth.reload();
}

interface OpenDatabase {
  store: Store;
  /** Closes the store, then gives up this process's hold on the database. */
  close(): Promise<void>;
}

/**
 * One server per database file: the hold is taken before the store opens
 * and given up after it closes (store/engine.ts), or at once when it fails
 * to open.
 */
async function openDatabase(config: Config, log: Logger, options: StartOptions): Promise<OpenDatabase> {
  const { clock: host = systemClock, databaseClock, databaseHoldWaitMs } = options;
  const location = databaseLocation(config);
  const hold = holdDatabase(location, databaseHoldWaitMs);
  let store: Store;
  try {
    store = await openStore(location, host, {
      onListenerError: (error, retryInMs) => log.warn("database notifications lost; reconnecting", { error: error.message, retryInMs }),
      ...(databaseClock !== undefined ? { databaseClock } : {}),
      onClockUnmeasured: (reason, offsetMs) =>
        log.warn("database clock not measured; keeping the last offset", { reason, offsetSeconds: offsetMs / 1000 }),
      onClockJump: (jumpMs) => log.warn("host clock jumped", { jumpSeconds: jumpMs / 1000 }),
      onDatabaseFile: (report) => logDatabaseFile(report, log),
    });
  } catch (err) {
    hold.release();
    throw err;
  }
  log.info("database open", {
    ...describeLocation(location, redactDatabaseUrl),
    ...(location.engine === "postgres" ? { clockOffsetSeconds: store.clockOffsetMs() / 1000 } : {}),
    retention: formatDurationText(config.retention.retentionMs),
    deadRetention: config.retention.deadRetentionMs === null ? "kept" : formatDurationText(config.retention.deadRetentionMs),
  });
  return {
    store,
    async close() {
      await store.close();
      hold.release();
    },
  };
}

/** docs/operations.md "The database file removed while serving": what the operator reads in the log. */
function logDatabaseFile(report: DatabaseFileReport, log: Logger): void {
  const { kind, ...fields } = report;
  if (kind === "lost") log.error("the database file is gone: writes are refused and the server is not ready", fields);
  else if (kind === "saved")
    log.error("saved what the server holds of the lost database file; stop the server and restore it", {
      ...fields,
      restore: `leasequeue restore ${report.savedTo} --db ${report.path}`,
    });
  else if (kind === "saveFailed")
    log.error("could not save what the server holds of the lost database file; keep the server running: it tries again every 10 s", fields);
  else log.info("the database file is back: writes resume once one succeeds", fields);
}

/** What the store's commits wake and feed: long-poll waiters, StreamClaims and Work, WatchEvents, KEDA's StreamIsActive, WaitJob. */
interface Feeds {
  wakeups: QueueWakeups;
  claimStreams: ClaimStreams;
  events: EventFeed;
  backlogWatches: BacklogWatches;
  jobWaiters: JobWaiters;
}

function createFeeds(config: Config, store: Store, clock: Clock, log: Logger, options: StartOptions): Feeds {
  const wakeups = new QueueWakeups(store, clock);
  const claimStreams = new ClaimStreams({ store, wakeups, clock, log, keepaliveMs: options.claimKeepaliveMs });
  const events = new EventFeed(store, {
    keepaliveMs: options.watchKeepaliveMs,
    bufferLimit: options.watchBufferLimit,
    maxSubscribers: config.maxWatchers,
    maxPendingBytes: config.watchMaxPendingBytes,
  });
  return { wakeups, claimStreams, events, backlogWatches: new BacklogWatches(store, clock), jobWaiters: new JobWaiters(store) };
}

function createServerMetrics(store: Store, clock: Clock, { wakeups, claimStreams, events, jobWaiters }: Feeds): Metrics {
  return createMetrics(store, clock, {
    claimWaiters: () => wakeups.waiting,
    jobWaiters: () => jobWaiters.waiting,
    claimStreams: () => claimStreams.streams,
    watchEvents: () => events.stats,
    limitedClaims: () => wakeups.limitedClaims,
  });
}

const HEALTH_SERVICES = ["", "leasequeue.v1.LeaseQueueService"] as const;

/** Readiness and grpc.health.v1, following the database's ability to take writes. */
function createHealth(store: Store, log: Logger) {
  const status = new HealthStatus(Object.fromEntries(HEALTH_SERVICES.map((s) => [s, ServingStatus.SERVING])), {
    refresh: () => store.checkWritable(),
  });
  const readiness = new WriteReadiness({ store, health: status, services: HEALTH_SERVICES, log });
  return {
    status,
    readiness,
    /** Shutdown: readiness stops checking and every service reports NOT_SERVING. */
    stopServing() {
      readiness.close();
      for (const service of HEALTH_SERVICES) status.set(service, ServingStatus.NOT_SERVING);
    },
  };
}

/**
 * The timers that work without a caller: schedules (docs/api.md
 * "Schedules": one timer to the earliest next run; runs missed while down
 * fire now), the lease sweep, and retention.
 */
function startBackgroundWork(
  config: Config,
  store: Store,
  clock: Clock,
  log: Logger,
  metrics: Metrics,
  tracing: Tracing | undefined,
  options: StartOptions,
) {
  const scheduler = startScheduler({ store, clock, log, producerSpans: tracing?.producers });
  const sweeper = startLeaseSweeper({ store, log, intervalMs: options.sweepIntervalMs });
  const pruner = startPruner({
    store,
    clock,
    log,
    policy: config.retention,
    intervalMs: options.pruneIntervalMs,
    onPruned: (pruned) => metrics.pruned(pruned),
  });
  return {
    scheduler,
    async stop() {
      await sweeper.stop();
      await pruner.stop();
      await scheduler.stop();
    },
  };
}

/**
 * Aborted at shutdown. connect-es links every in-flight call's context
 * signal to this one (one abort listener per call, removed when the call
 * ends): more than 10 concurrent calls is normal, not a leak, so Node's
 * warning threshold is lifted.
 */
function createShutdownSignal(): AbortController {
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  return shutdown;
}

export interface ApiHandlerParts {
  service: RoutesOptions["service"];
  scaler?: RoutesOptions["scaler"];
  health: HealthStatus;
  auth: Authenticator | undefined;
  metrics: Metrics;
  log: Logger;
  shutdownSignal: AbortSignal;
  /** The SERVER span of each call (docs/operations.md "Tracing"); undefined: no spans. */
  callSpans?: CallSpans;
}

/**
 * Everything the API port answers: the RPCs, and the API reference and
 * console for every other path. Exported so that bench/unary-call.mjs can
 * mount a do-nothing service through exactly this adapter
 * (docs/performance.md "The cost of one unary call").
 */
export function createApiHandler(
  config: Config,
  { service, scaler, health, auth, metrics, log, shutdownSignal, callSpans }: ApiHandlerParts,
): RpcHandler {
  // connect's JSON serialization reads `textDecoder` from these options,
  // although the router's option type does not declare it.
  // The registry lets JSON carry the google.rpc details packed in an
  // AcknowledgementResult's status (google.protobuf.Any).
  const jsonOptions = {
    ignoreUnknownFields: false,
    textDecoder: strictUtf8Decoder(),
    registry: createRegistry(file_google_rpc_error_details),
  };
  // The hand-written wire paths (server/fast-wire/README.md), or with LEASEQUEUE_WIRE=library the libraries' own;
  // but for WatchEvents' output in both modes: writing the frames itself is what holds a watch to its unread-bytes limit.
  const fast = config.wire === "fast";
  const watchOutputs = createWatchOutputs({ maxPendingBytes: config.watchMaxPendingBytes });
  return createRpcHandler({
    contextValues: (values, req, res, method) => {
      // Authentication first: a refused call gets nothing else prepared.
      if (auth !== undefined) auth.admit(values, method, req.headers.authorization);
      watchOutputs.addTo(values, req, res, method);
    },
    routes: routes({ service, scaler, health, reflection: config.reflection }),
    binaryRoutes: fast ? binaryRoutes(service) : undefined,
    handWire: fast,
    interceptors: [boundaryInterceptor(log, metrics)],
    log,
    metrics,
    callSpans,
    jsonOptions,
    readMaxBytes: config.maxRequestBytes,
    // Request encodings, and the ones responses may use: gzip unless configured.
    acceptCompression: acceptedCompressions(config.requestCompression),
    // connect compresses responses of at least this many bytes (default 1 KiB).
    compressMinBytes: config.responseCompression ? 1024 : Number.MAX_SAFE_INTEGER,
    shutdownSignal,
    // Everything that is not an RPC: the API reference at /docs (when on),
    // the operations console at / (else 404).
    fallback: withApiReference(
      createConsoleHandler(defaultConsoleDir(), {
        onMissing: (dir) => log.warn("operations console not built; / answers 503 until `npm run build`", { dir }),
      }),
      {
        enabled: config.docs,
        onMissing: (dir) => log.warn("API reference not built; /docs answers 503 until `npm run build`", { dir }),
      },
    ),
  });
}

interface Listeners {
  api: ApiListener;
  side: SideListener;
}

interface ListenerParts {
  rpc: RpcHandler;
  metrics: Metrics;
  health: { readiness: WriteReadiness };
  auth: Authenticator | undefined;
  log: Logger;
  shutdownSignal: AbortSignal;
}

/** The API port, then the side port (metrics and health); a side port that fails to open closes the API port. */
async function startListeners(config: Config, { rpc, metrics, health, auth, log, shutdownSignal }: ListenerParts): Promise<Listeners> {
  const api = await startApiListener({
    host: config.host,
    port: config.port,
    handler: rpc.handler,
    tls: config.tls,
    maxRequestBytes: config.maxRequestBytes,
    http2MaxConcurrentStreams: config.http2MaxConcurrentStreams,
    requestHeadersTimeoutMs: config.requestHeadersTimeoutMs,
    // A connection that has not sent its first byte has not sent its headers either.
    firstByteTimeoutMs: Math.min(FIRST_BYTE_TIMEOUT_MS, config.requestHeadersTimeoutMs),
    requestTimeoutMs: config.requestTimeoutMs,
    keepAliveTimeoutMs: config.keepAliveTimeoutMs,
    isStreamingRequest: rpc.isStreamingRequest,
    onError: (err) => log.warn("api connection error", { error: err }),
  });
  log.info("api listening", {
    listener: "api",
    url: api.address.url,
    host: api.address.host,
    port: api.address.port,
    protocols: ["grpc", "grpc-web", "connect"],
    tls: config.tls !== undefined,
    reflection: config.reflection,
    docs: config.docs,
    authentication: auth !== undefined,
  });
  let side: SideListener;
  try {
    side = await startSideListener({
      host: config.metricsHost,
      port: config.metricsPort,
      metrics: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
      ready: async () => {
        await health.readiness.check();
        return !shutdownSignal.aborted;
      },
    });
  } catch (err) {
    await api.close(0);
    throw err;
  }
  log.info("metrics listening", {
    listener: "metrics",
    url: side.address.url,
    host: side.address.host,
    port: side.address.port,
    paths: ["/metrics", "/health/live", "/health/ready"],
  });
  return { api, side };
}
