#!/usr/bin/env node
/**
 * One server of bench/unary-call.mjs: LeaseQueueService with do-nothing
 * handlers (Submit and GetStats answer an empty response at once), served
 * one of three ways, chosen by `variant` in the config (argv[2], JSON):
 *
 *   project       the server's own adapter: app.ts's createApiHandler (the
 *                 RPC adapter, routes, boundary interceptor, metrics, health,
 *                 reflection, JSON options, compression settings, fallback)
 *                 behind its API listener, with the default settings
 *   connect-node  connect-node's connectNodeAdapter with the options of
 *                 bench/children/noop-server.mjs, behind the same listener
 *   raw-http2     node:http2 alone: reads the request body, answers an empty
 *                 gRPC message frame and `grpc-status: 0` by hand
 *
 * `dist` (default: this checkout's dist/) is the build whose server code
 * the first two load, so that two builds can be compared in one run.
 * Sends {type: "ready", url}; exits on "stop".
 */
import { setMaxListeners } from "node:events";
import * as http2 from "node:http2";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { childChannel } from "../lib/children.mjs";

const channel = childChannel();
const { config } = channel;
const dist = resolve(config.dist ?? join(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist"));
const load = (path) => import(pathToFileURL(join(dist, path)).href);

/** The do-nothing service: every other method is unimplemented. */
const noopService = { submit: () => ({}), getStats: () => ({}) };

/** A store that commits nothing: the metrics subscribe to it and read it only when scraped. */
const quietStore = {
  onCommitted: () => () => {},
  onWriteOutcome: () => () => {},
  queueCounts: () => Promise.resolve([]),
  clockOffsetMs: () => 0,
};

async function startProject(shutdownSignal) {
  const { createApiHandler } = await load("src/app.js");
  const { resolveConfig } = await load("src/config.js");
  const { systemClock } = await load("src/domain/clock.js");
  const { silentLogger } = await load("src/testing/index.js");
  const { createMetrics } = await load("src/metrics/metrics.js");
  const { startApiListener } = await load("src/server/api-listener.js");
  const { HealthStatus } = await load("src/server/health.js");
  const serverConfig = resolveConfig({}, {});
  const metrics = createMetrics(quietStore, systemClock);
  const rpc = createApiHandler(serverConfig, {
    service: noopService,
    health: new HealthStatus(),
    auth: undefined,
    metrics,
    log: silentLogger,
    shutdownSignal,
  });
  // The options app.ts's startListeners gives the API port.
  return startApiListener({
    host: "127.0.0.1",
    port: 0,
    handler: rpc.handler,
    maxRequestBytes: serverConfig.maxRequestBytes,
    http2MaxConcurrentStreams: serverConfig.http2MaxConcurrentStreams,
    requestHeadersTimeoutMs: serverConfig.requestHeadersTimeoutMs,
    requestTimeoutMs: serverConfig.requestTimeoutMs,
    keepAliveTimeoutMs: serverConfig.keepAliveTimeoutMs,
    isStreamingRequest: rpc.isStreamingRequest,
  });
}

async function startConnectNode(shutdownSignal) {
  const { connectNodeAdapter } = await import("@connectrpc/connect-node");
  const pb = await load("gen/ts/leasequeue/v1/leasequeue_pb.js");
  const { startApiListener } = await load("src/server/api-listener.js");
  const handler = connectNodeAdapter({
    routes: (router) => router.service(pb.LeaseQueueService, noopService),
    jsonOptions: { ignoreUnknownFields: false },
    readMaxBytes: 131_072,
    shutdownSignal,
  });
  return startApiListener({ host: "127.0.0.1", port: 0, handler, maxRequestBytes: 131_072 });
}

/** An empty message in a gRPC frame: not compressed, length 0. */
const EMPTY_MESSAGE_FRAME = Buffer.alloc(5);

async function startRawHttp2() {
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.on("data", () => {});
    stream.once("end", () => {
      if (stream.destroyed) return;
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(EMPTY_MESSAGE_FRAME);
    });
  });
  const sessions = new Set();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return {
    address: { url: `http://127.0.0.1:${server.address().port}` },
    close: async () => {
      for (const session of sessions) session.destroy();
      await new Promise((done) => server.close(done));
    },
  };
}

const starters = { project: startProject, "connect-node": startConnectNode, "raw-http2": startRawHttp2 };

void channel.run(async () => {
  const start = starters[config.variant];
  if (start === undefined) throw new Error(`unknown variant ${config.variant}`);
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const api = await start(shutdown.signal);
  await channel.send({ type: "ready", url: api.address.url });
  await channel.next("stop");
  shutdown.abort();
  await api.close(1000);
});
