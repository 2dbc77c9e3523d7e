/**
 * Composition: config -> store -> service -> listeners, and their orderly
 * shutdown. Everything the server is made of is wired here and only here.
 */
import { setMaxListeners } from "node:events";
import { createRegistry } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { file_google_rpc_error_details } from "../gen/ts/google/rpc/error_details_pb.js";
import { redactDatabaseUrl, type Config } from "./config.js";
import { systemClock, type Clock } from "./domain/clock.js";
import { formatDurationText } from "./domain/duration-text.js";
import { ClaimStreams } from "./dispatch/claim-streams.js";
import { EventFeed } from "./dispatch/event-feed.js";
import { startLeaseSweeper } from "./dispatch/lease-sweeper.js";
import { startPruner } from "./dispatch/pruner.js";
import { QueueWakeups } from "./dispatch/queue-wakeups.js";
import { startScheduler } from "./dispatch/scheduler.js";
import type { Logger } from "./logger.js";
import { createMetrics } from "./metrics/metrics.js";
import { startApiListener, type ApiListener } from "./server/api-listener.js";
import { createConsoleHandler, defaultConsoleDir } from "./server/console-files.js";
import { withApiReference } from "./server/docs-files.js";
import { HealthStatus, ServingStatus } from "./server/health.js";
import { Authenticator } from "./server/authenticator.js";
import { acceptedCompressions } from "./server/request-compression.js";
import { boundaryInterceptor, routes } from "./server/routes.js";
import { createRpcHandler, strictUtf8Decoder } from "./server/rpc-handler.js";
import { startSideListener } from "./server/side-listener.js";
import { createWatchOutputs } from "./server/node-watch-output.js";
import { WriteReadiness } from "./server/write-readiness.js";
import { createLeaseQueueService } from "./service/leasequeue-service.js";
import { callerKey } from "./service/queue-access.js";
import { databaseLocation, describeLocation, holdDatabase, openStore } from "./store/engine.js";
import type { Store } from "./store/store.js";

/** How long shutdown waits for in-flight calls before cutting them off. */
export const SHUTDOWN_GRACE_MS = 10_000;

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

export async function startServer(
  config: Config,
  {
    log,
    clock: host = systemClock,
    databaseClock,
    sweepIntervalMs,
    claimKeepaliveMs,
    watchKeepaliveMs,
    watchBufferLimit,
    pruneIntervalMs,
    databaseHoldWaitMs,
  }: StartOptions,
): Promise<RunningServer> {
  // First: a bad auth file refuses to start before anything is opened (AuthFileError).
  const auth = config.authFile === undefined ? undefined : new Authenticator(config.authFile, log);
  if (auth !== undefined) log.info("authentication on", { authFile: config.authFile, tokens: auth.size });
  // One server per database file: taken before the store opens, given up after it closes (store/engine.ts).
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
    });
  } catch (err) {
    hold.release();
    throw err;
  }
  // Every time from here on is the store's: on PostgreSQL the database's clock.
  const clock = store.clock;
  log.info("database open", {
    ...describeLocation(location, redactDatabaseUrl),
    ...(location.engine === "postgres" ? { clockOffsetSeconds: store.clockOffsetMs() / 1000 } : {}),
    retention: formatDurationText(config.retention.retentionMs),
    deadRetention: config.retention.deadRetentionMs === null ? "kept" : formatDurationText(config.retention.deadRetentionMs),
  });

  const wakeups = new QueueWakeups(store, clock);
  const claimStreams = new ClaimStreams({ store, wakeups, clock, log, keepaliveMs: claimKeepaliveMs });
  const events = new EventFeed(store, {
    keepaliveMs: watchKeepaliveMs,
    bufferLimit: watchBufferLimit,
    maxSubscribers: config.maxWatchers,
    maxPendingBytes: config.watchMaxPendingBytes,
  });
  const metrics = createMetrics(store, clock, {
    claimWaiters: () => wakeups.waiting,
    claimStreams: () => claimStreams.streams,
    watchEvents: () => events.stats,
    limitedClaims: () => wakeups.limitedClaims,
  });
  // Readiness and grpc.health.v1 follow the database's ability to take writes.
  const healthServices = ["", "leasequeue.v1.LeaseQueueService"] as const;
  const health = new HealthStatus(Object.fromEntries(healthServices.map((s) => [s, ServingStatus.SERVING])), {
    refresh: () => store.checkWritable(),
  });
  const readiness = new WriteReadiness({ store, health, services: healthServices, log });
  // Schedules (api.md section D): one timer to the earliest next run; runs missed while down fire now.
  const scheduler = startScheduler({ store, clock, log });
  const service = createLeaseQueueService({
    store,
    clock,
    wakeups,
    claimStreams,
    events,
    scheduler,
    onIdempotentReplay: (queue) => metrics.idempotentReplay(queue),
    workKeepaliveMs: claimKeepaliveMs,
    log,
  });
  const shutdown = new AbortController();
  // connect-es links every in-flight call's context signal to this one (one
  // abort listener per call, removed when the call ends): more than 10
  // concurrent calls is normal, not a leak, so lift Node's warning threshold.
  setMaxListeners(0, shutdown.signal);
  // connect's JSON serialization reads `textDecoder` from these options,
  // although the router's option type does not declare it.
  // The registry lets JSON carry the google.rpc details packed in an
  // AcknowledgementResult's status (google.protobuf.Any).
  const jsonOptions = {
    ignoreUnknownFields: false,
    textDecoder: strictUtf8Decoder(),
    registry: createRegistry(file_google_rpc_error_details),
  };
  // WatchEvents writes pre-encoded events straight to its response (service/watch-event-frames.ts).
  const watchOutputs = createWatchOutputs({ maxPendingBytes: config.watchMaxPendingBytes });
  const rpc = createRpcHandler({
    contextValues: (values, req, res, method) => {
      // Authentication first: a refused call gets nothing else prepared.
      if (auth !== undefined) values.set(callerKey, auth.authorize(method, req.headers.authorization));
      watchOutputs.addTo(values, req, res);
    },
    routes: routes({ service, health, reflection: config.reflection }),
    interceptors: [boundaryInterceptor(log, metrics)],
    log,
    metrics,
    jsonOptions,
    readMaxBytes: config.maxRequestBytes,
    // Request encodings, and the ones responses may use: gzip unless configured.
    acceptCompression: acceptedCompressions(config.requestCompression),
    // connect compresses responses of at least this many bytes (default 1 KiB).
    compressMinBytes: config.responseCompression ? 1024 : Number.MAX_SAFE_INTEGER,
    shutdownSignal: shutdown.signal,
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
  const sweeper = startLeaseSweeper({ store, log, intervalMs: sweepIntervalMs });
  const pruner = startPruner({
    store,
    clock,
    log,
    policy: config.retention,
    intervalMs: pruneIntervalMs,
    onPruned: (pruned) => metrics.pruned(pruned),
  });

  let api: ApiListener | undefined;
  let side: Awaited<ReturnType<typeof startSideListener>> | undefined;
  try {
    api = await startApiListener({
      host: config.host,
      port: config.port,
      handler: rpc.handler,
      tls: config.tls,
      maxRequestBytes: config.maxRequestBytes,
      http2MaxConcurrentStreams: config.http2MaxConcurrentStreams,
      requestHeadersTimeoutMs: config.requestHeadersTimeoutMs,
      // A connection that has not sent its first byte has not sent its headers either.
      firstByteTimeoutMs: Math.min(10_000, config.requestHeadersTimeoutMs),
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
    side = await startSideListener({
      host: config.metricsHost,
      port: config.metricsPort,
      metrics: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
      ready: async () => {
        await readiness.check();
        return !shutdown.signal.aborted;
      },
    });
    log.info("metrics listening", {
      listener: "metrics",
      url: side.address.url,
      host: side.address.host,
      port: side.address.port,
      paths: ["/metrics", "/health/live", "/health/ready"],
    });
  } catch (err) {
    await api?.close(0);
    await sweeper.stop();
    await pruner.stop();
    await scheduler.stop();
    await store.close();
    hold.release();
    throw err;
  }

  let closing: Promise<void> | undefined;
  const apiListener = api;
  const sideListener = side;
  return {
    apiUrl: apiListener.address.url,
    metricsUrl: sideListener.address.url,
    store,
    reloadAuth() {
      if (auth === undefined) {
        log.info("nothing to reload: authentication is off (LEASEQUEUE_AUTH_FILE is not set)");
        return false;
      }
      return auth.reload();
    },
    close() {
      closing ??= (async () => {
        log.info("shutting down", { graceMs: SHUTDOWN_GRACE_MS });
        readiness.close();
        health.set("", ServingStatus.NOT_SERVING);
        health.set("leasequeue.v1.LeaseQueueService", ServingStatus.NOT_SERVING);
        // Streams and long-polls end now (streams with `unavailable`); unary calls finish.
        shutdown.abort(new ConnectError("the server is shutting down", Code.Unavailable));
        await sweeper.stop();
        await pruner.stop();
        await scheduler.stop();
        await apiListener.close(SHUTDOWN_GRACE_MS);
        claimStreams.close();
        events.close();
        wakeups.close();
        metrics.close();
        await sideListener.close();
        await store.close();
        hold.release();
        log.info("stopped");
      })();
      return closing;
    },
  };
}
