import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as https from "node:https";
import * as net from "node:net";
import type * as tls from "node:tls";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { setImmediate as nextTurn } from "node:timers/promises";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  connectNodeAdapter,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { startApiListener, type ApiListener, type ApiListenerOptions } from "../../src/server/api-listener.js";
import { refuseOversizedBodies } from "../../src/server/body-limits.js";
import type { NodeRequestHandler } from "../../src/server/node-request-handler.js";
import { sniffProtocol } from "../../src/server/protocol-sniffing.js";
import { opensslAvailable, writeSelfSignedCert } from "../helpers/tls.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const CHECK_PATH = "/grpc.health.v1.Health/Check";
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const MAX_BYTES = 1024;
const SERVING = HealthCheckResponse_ServingStatus.SERVING;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/**
 * A health service whose Check answers SERVING, except for the service name
 * "slow", which waits until the test releases it.
 */
function createHealthApp() {
  const calls: string[] = [];
  let releaseSlow!: () => void;
  const slowReleased = new Promise<void>((resolve) => (releaseSlow = resolve));
  let markSlowStarted!: () => void;
  const slowStarted = new Promise<void>((resolve) => (markSlowStarted = resolve));
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(Health, {
        async check(req) {
          calls.push(req.service);
          if (req.service === "slow") {
            markSlowStarted();
            await slowReleased;
          }
          return { status: SERVING };
        },
      });
    },
  });
  cleanups.push(releaseSlow);
  return { handler, calls, slowStarted, releaseSlow };
}

async function listen(opts: Partial<ApiListenerOptions> & { handler: NodeRequestHandler }): Promise<ApiListener> {
  const listener = await startApiListener({ host: "127.0.0.1", port: 0, maxRequestBytes: MAX_BYTES, ...opts });
  cleanups.push(() => listener.close(0));
  return listener;
}

function h2SessionManager(url: string, nodeOptions?: http2.SecureClientSessionOptions): Http2SessionManager {
  const manager = new Http2SessionManager(url, {}, nodeOptions);
  cleanups.push(() => manager.abort());
  return manager;
}

/** A listener with one HTTP/2 Health call in flight that the handler holds open. */
async function startSlowHttp2Call() {
  const app = createHealthApp();
  const listener = await listen({ handler: app.handler });
  const url = listener.address.url;
  const client = createClient(Health, createConnectTransport({ baseUrl: url, httpVersion: "2", sessionManager: h2SessionManager(url) }));
  const call = client.check({ service: "slow" });
  await app.slowStarted;
  return { app, listener, call };
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks);
}

/** A Connect JSON Health Check on `session`: its stream, its response headers, and its reply once it ends. */
function h2HealthCheck(session: http2.ClientHttp2Session, service: string) {
  const stream = session.request({ ":method": "POST", ":path": CHECK_PATH, "content-type": "application/json" });
  stream.on("error", () => {});
  stream.end(JSON.stringify({ service }));
  const response = once(stream, "response") as Promise<[http2.IncomingHttpHeaders]>;
  response.catch(() => {});
  const reply = response.then(async ([headers]) => {
    const body = (await readAll(stream)).toString();
    return { status: Number(headers[":status"]), body: body === "" ? undefined : JSON.parse(body) };
  });
  reply.catch(() => {}); // a test that does not await it does not care
  return { stream, response, reply };
}

const FRAME_SETTINGS = 0x4;
const FRAME_GOAWAY = 0x7;
const FLAG_ACK = 0x1;

/** The HTTP/2 frame headers a raw socket receives (RFC 9113 §4.1). */
async function* readFrames(socket: net.Socket): AsyncGenerator<{ type: number; flags: number }> {
  let pending = Buffer.alloc(0);
  for await (const chunk of socket) {
    pending = Buffer.concat([pending, chunk as Buffer]);
    while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
      yield { type: pending[3], flags: pending[4] };
      pending = pending.subarray(9 + pending.readUIntBE(0, 3));
    }
  }
}

async function connectRaw(port: number): Promise<net.Socket> {
  const socket = net.connect(port, "127.0.0.1");
  socket.setNoDelay(true);
  cleanups.push(() => socket.destroy());
  await once(socket, "connect");
  return socket;
}

/** Writes each byte on its own, letting the event loop turn between them. */
async function writeBytewise(socket: net.Socket, bytes: Buffer): Promise<void> {
  for (const byte of bytes) {
    await new Promise<void>((resolve, reject) => socket.write(Buffer.of(byte), (err) => (err ? reject(err) : resolve())));
    await nextTurn();
  }
}

/** Sends only the headers of a POST (the body never leaves the client) and reads the answer. */
async function postHeadersOnly(url: string, headers: Record<string, string>) {
  const req = http.request(url + CHECK_PATH, { method: "POST", headers, agent: false });
  req.on("error", () => {});
  cleanups.push(() => req.destroy());
  let continued = false;
  req.on("continue", () => (continued = true));
  req.flushHeaders();
  const [res] = (await once(req, "response")) as [http.IncomingMessage];
  const body = await readAll(res);
  const socket = req.socket!;
  if (!socket.destroyed) await once(socket, "close");
  return { res, body, continued };
}

describe("sniffProtocol", () => {
  it("waits while the bytes are a proper prefix of the HTTP/2 preface", () => {
    for (let n = 0; n < PREFACE.length; n++) expect(sniffProtocol(PREFACE.subarray(0, n))).toBeUndefined();
  });

  it("says h2 once the whole preface is there, whatever follows", () => {
    expect(sniffProtocol(PREFACE)).toBe("h2");
    expect(sniffProtocol(Buffer.concat([PREFACE, Buffer.from([0, 0, 0, 4])]))).toBe("h2");
  });

  it("says http/1.1 at the first byte that differs from the preface", () => {
    expect(sniffProtocol(Buffer.from("P"))).toBeUndefined();
    expect(sniffProtocol(Buffer.from("PO"))).toBe("http/1.1");
    expect(sniffProtocol(Buffer.from("G"))).toBe("http/1.1");
    expect(sniffProtocol(Buffer.from("PRI * HTTP/1.1"))).toBe("http/1.1");
  });
});

describe("one cleartext port", () => {
  it("reports its real address when asked for port 0", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    expect(listener.address.host).toBe("127.0.0.1");
    expect(listener.address.port).toBeGreaterThan(0);
    expect(listener.address.url).toBe(`http://127.0.0.1:${listener.address.port}`);
  });

  it("rejects when the port is taken", async () => {
    const first = await listen({ handler: createHealthApp().handler });
    await expect(
      startApiListener({ host: "127.0.0.1", port: first.address.port, maxRequestBytes: MAX_BYTES, handler: createHealthApp().handler }),
    ).rejects.toMatchObject({ code: "EADDRINUSE" });
  });

  it("serves Connect JSON over HTTP/1.1 to fetch", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const res = await fetch(listener.address.url + CHECK_PATH, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "SERVING" });
  });

  it("serves Connect over HTTP/2", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const url = listener.address.url;
    const transport = createConnectTransport({ baseUrl: url, httpVersion: "2", sessionManager: h2SessionManager(url) });
    expect(await createClient(Health, transport).check({})).toMatchObject({ status: SERVING });
  });

  it("serves gRPC to connect-node's gRPC transport", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const url = listener.address.url;
    const transport = createGrpcTransport({ baseUrl: url, sessionManager: h2SessionManager(url) });
    expect(await createClient(Health, transport).check({})).toMatchObject({ status: SERVING });
  });

  it("serves gRPC to @grpc/grpc-js with insecure credentials", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const definition = protoLoader.loadSync(join(HERE, "../../proto/grpc/health/v1/health.proto"), { enums: String });
    const loaded = grpc.loadPackageDefinition(definition) as any;
    const client: grpc.Client & {
      check(req: object, cb: (err: grpc.ServiceError | null, res: { status: string }) => void): void;
    } = new loaded.grpc.health.v1.Health(`127.0.0.1:${listener.address.port}`, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    const res = await new Promise<{ status: string }>((resolve, reject) =>
      client.check({ service: "" }, (err, value) => (err ? reject(err) : resolve(value))),
    );
    expect(res.status).toBe("SERVING");
  });

  it("serves gRPC-Web over HTTP/1.1", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const transport = createGrpcWebTransport({ baseUrl: listener.address.url, httpVersion: "1.1" });
    expect(await createClient(Health, transport).check({})).toMatchObject({ status: SERVING });
  });

  it("routes a preface that arrives one byte at a time to HTTP/2", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const socket = await connectRaw(listener.address.port);
    const frames = readFrames(socket);
    await writeBytewise(socket, PREFACE);
    socket.write(Buffer.from([0, 0, 0, 0x04, 0, 0, 0, 0, 0])); // our (empty) SETTINGS
    // The server sends its SETTINGS unasked; acknowledging ours proves it
    // took the preface and our frame as HTTP/2 (a bad preface gets a GOAWAY).
    for await (const frame of frames) {
      expect(frame.type).not.toBe(FRAME_GOAWAY);
      if (frame.type === FRAME_SETTINGS && frame.flags & FLAG_ACK) return;
    }
    expect.unreachable("connection closed before the server acknowledged our SETTINGS");
  });

  it("routes an HTTP/1.1 request that starts like the preface ('P') to HTTP/1.1", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const socket = await connectRaw(listener.address.port);
    const request = Buffer.from(
      `POST ${CHECK_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    const answer = readAll(socket);
    await writeBytewise(socket, request.subarray(0, 4));
    socket.write(request.subarray(4));
    const text = (await answer).toString();
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toContain('{"status":"SERVING"}');
  });

  it("drops a connection that sends nothing before its first byte", async () => {
    const listener = await listen({ handler: createHealthApp().handler, firstByteTimeoutMs: 50 });
    const socket = await connectRaw(listener.address.port);
    await once(socket, "close");
  });

  it("drops a connection that stalls inside the preface", async () => {
    const listener = await listen({ handler: createHealthApp().handler, firstByteTimeoutMs: 50 });
    const socket = await connectRaw(listener.address.port);
    socket.write(PREFACE.subarray(0, 5));
    await once(socket, "close");
  });

  it("pings HTTP/2 sessions so idle streams survive proxies", async () => {
    const listener = await listen({ handler: createHealthApp().handler, http2PingIntervalMs: 20 });
    const session = http2.connect(listener.address.url);
    cleanups.push(() => session.destroy());
    await once(session, "ping");
  });
});

describe("request body limit", () => {
  const message = `request body of 1000000 bytes exceeds the limit of ${MAX_BYTES} bytes (LEASEQUEUE_MAX_REQUEST_BYTES)`;

  it("refuses an oversized Connect unary call with resource_exhausted (HTTP 429) before the body is sent", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler });
    const { res, body } = await postHeadersOnly(listener.address.url, {
      "content-type": "application/json",
      "content-length": "1000000",
    });
    expect(res.statusCode).toBe(429);
    expect(res.headers["content-type"]).toBe("application/json");
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(body.toString())).toEqual({ code: "resource_exhausted", message });
    expect(app.calls).toEqual([]);
  });

  it("refuses an oversized gRPC-Web call over HTTP/1.1 with grpc-status 8, trailers-only", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler });
    const { res, body } = await postHeadersOnly(listener.address.url, {
      "content-type": "application/grpc-web+proto",
      "content-length": "1000000",
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/grpc-web+proto");
    expect(res.headers["grpc-status"]).toBe(String(Code.ResourceExhausted));
    expect(decodeURIComponent(String(res.headers["grpc-message"]))).toBe(message);
    expect(body.length).toBe(0);
    expect(app.calls).toEqual([]);
  });

  it("refuses an oversized Connect streaming call with an end-stream error", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const { res, body } = await postHeadersOnly(listener.address.url, {
      "content-type": "application/connect+json",
      "content-length": "1000000",
    });
    expect(res.statusCode).toBe(200);
    expect(body[0]).toBe(0b10);
    expect(body.readUInt32BE(1)).toBe(body.length - 5);
    expect(JSON.parse(body.subarray(5).toString())).toEqual({ error: { code: "resource_exhausted", message } });
  });

  it("refuses an oversized gRPC call over HTTP/2 trailers-only and resets the stream with NO_ERROR", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler });
    const session = http2.connect(listener.address.url);
    cleanups.push(() => session.destroy());
    const stream = session.request(
      {
        ":method": "POST",
        ":path": CHECK_PATH,
        "content-type": "application/grpc",
        te: "trailers",
        "content-length": "1000000",
      },
      { endStream: false },
    );
    const [headers, flags] = (await once(stream, "response")) as [http2.IncomingHttpHeaders, number];
    expect(headers[":status"]).toBe(200);
    expect(headers["grpc-status"]).toBe("8");
    expect(flags & http2.constants.NGHTTP2_FLAG_END_STREAM).toBeTruthy();
    stream.resume();
    await once(stream, "close");
    expect(stream.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(app.calls).toEqual([]);
  });

  it("does not say 100-continue to an oversized body", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const { res, continued } = await postHeadersOnly(listener.address.url, {
      "content-type": "application/json",
      "content-length": "1000000",
      expect: "100-continue",
    });
    expect(res.statusCode).toBe(429);
    expect(continued).toBe(false);
  });

  it("says 100-continue to a body within the limit and serves it", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const req = http.request(listener.address.url + CHECK_PATH, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json", "content-length": "2", expect: "100-continue" },
    });
    req.on("continue", () => req.end("{}"));
    req.flushHeaders();
    const [res] = (await once(req, "response")) as [http.IncomingMessage];
    expect(res.statusCode).toBe(200);
    expect(JSON.parse((await readAll(res)).toString())).toEqual({ status: "SERVING" });
  });

  it("passes bodies at the limit, and bodies of unknown length, to the handler", async () => {
    const seen: string[] = [];
    const inner: NodeRequestHandler = (req, res) => {
      seen.push(String(req.headers["content-length"] ?? "chunked"));
      res.end();
    };
    const server = http.createServer(refuseOversizedBodies(10, inner));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`;
    expect((await fetch(url, { method: "POST", body: "x".repeat(10) })).status).toBe(200);
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("x".repeat(11)));
        controller.close();
      },
    });
    expect((await fetch(url, { method: "POST", body: chunked, duplex: "half" })).status).toBe(200);
    expect((await fetch(url, { method: "POST", body: "x".repeat(11) })).status).toBe(413);
    expect(seen).toEqual(["10", "chunked"]);
  });
});

/**
 * A grace that outlasts the test's time limit: a close that waited it out
 * instead of ending idle connections at once fails the test, whatever the
 * machine's pace (no wall-clock bound to hold a loaded machine to).
 */
const CLOSE_GRACE_BEYOND_TEST_MS = 10 * 60_000;

describe("close()", () => {
  it("ends an idle HTTP/2 session with GOAWAY instead of waiting out the grace period", async () => {
    const listener = await listen({ handler: createHealthApp().handler });
    const session = http2.connect(listener.address.url);
    cleanups.push(() => session.destroy());
    session.on("error", () => {});
    await once(session, "remoteSettings");
    const goaway = once(session, "goaway");
    await listener.close(CLOSE_GRACE_BEYOND_TEST_MS);
    await goaway;
  });

  it("lets an in-flight HTTP/2 call finish, refusing new connections meanwhile", async () => {
    const { app, listener, call } = await startSlowHttp2Call();
    const closed = listener.close(CLOSE_GRACE_BEYOND_TEST_MS);
    const refused = net.connect(listener.address.port, "127.0.0.1");
    const [error] = (await once(refused, "error")) as [NodeJS.ErrnoException];
    expect(error.code).toBe("ECONNREFUSED");
    app.releaseSlow();
    expect(await call).toMatchObject({ status: SERVING });
    await closed;
  });

  it("lets an in-flight HTTP/1.1 call finish and closes its keep-alive connection", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler });
    const agent = new http.Agent({ keepAlive: true });
    cleanups.push(() => agent.destroy());
    const req = http.request(listener.address.url + CHECK_PATH, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json" },
    });
    req.end(JSON.stringify({ service: "slow" }));
    const response = once(req, "response") as Promise<[http.IncomingMessage]>;
    await app.slowStarted;
    const closed = listener.close(CLOSE_GRACE_BEYOND_TEST_MS);
    app.releaseSlow();
    const [res] = await response;
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse((await readAll(res)).toString())).toEqual({ status: "SERVING" });
    await closed;
  });

  it("closes a keep-alive connection whose response had started before close()", async () => {
    let finish!: () => void;
    const finishResponse = new Promise<void>((resolve) => (finish = resolve));
    cleanups.push(finish);
    const listener = await listen({
      handler: (_req, res) => {
        const response = res as http.ServerResponse; // this test speaks HTTP/1.1 only
        response.writeHead(200, { "content-type": "text/plain" });
        response.write("first ");
        void finishResponse.then(() => response.end("last"));
      },
    });
    const agent = new http.Agent({ keepAlive: true });
    cleanups.push(() => agent.destroy());
    const req = http.get(listener.address.url + "/", { agent });
    const [res] = (await once(req, "response")) as [http.IncomingMessage];
    expect(res.headers.connection).toBe("keep-alive");
    await once(res, "data");
    const closed = listener.close(CLOSE_GRACE_BEYOND_TEST_MS);
    finish();
    await readAll(res);
    await closed;
  });

  it("holds a call that arrives while draining, and serves it after the session's GOAWAY", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler });
    const session = http2.connect(listener.address.url);
    cleanups.push(() => session.destroy());
    session.on("error", () => {});
    const events: string[] = [];
    let lastStreamId = -1;
    session.on("goaway", (_code: number, last: number) => {
      events.push("goaway");
      lastStreamId = last;
    });
    const slow = h2HealthCheck(session, "slow");
    await app.slowStarted;
    const closed = listener.close(60_000);
    // Sent after close(): the server holds it until the client can no longer
    // be refused a call on this connection.
    const held = h2HealthCheck(session, "held");
    void held.response.then(
      () => events.push("held call answered"),
      () => {},
    );
    app.releaseSlow();
    expect(await slow.reply).toEqual({ status: 200, body: { status: "SERVING" } });
    expect(await held.reply).toEqual({ status: 200, body: { status: "SERVING" } });
    // The GOAWAY came first and covers the held call: the client makes its
    // next call elsewhere, and none of its calls was refused.
    expect(events).toEqual(["goaway", "held call answered"]);
    expect(held.stream.id).toBeLessThanOrEqual(lastStreamId);
    await closed;
  });

  it("sends the GOAWAY of a session that never goes quiet after at most MAX_QUIET_WAIT_MS, serving every call it held", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler });
    const session = http2.connect(listener.address.url);
    cleanups.push(() => session.destroy());
    session.on("error", () => {});
    const goaway = once(session, "goaway") as Promise<[number, number]>;
    await h2HealthCheck(session, "warm-up").reply;
    const closed = listener.close(60_000);
    // A client that starts a call every few milliseconds without waiting for
    // the answers: the session is never quiet.
    const calls: ReturnType<typeof h2HealthCheck>[] = [];
    const starting = setInterval(() => {
      if (!session.closed && !session.destroyed) calls.push(h2HealthCheck(session, "busy"));
    }, 10);
    cleanups.push(() => clearInterval(starting));
    const [, lastStreamId] = await goaway;
    clearInterval(starting);
    const covered = calls.filter((c) => c.stream.id !== undefined && c.stream.id <= lastStreamId);
    expect(covered.length).toBeGreaterThan(0);
    for (const call of covered) expect(await call.reply).toEqual({ status: 200, body: { status: "SERVING" } });
    session.close();
    await closed;
  });

  it("cuts calls that outlive the grace period", async () => {
    const { listener, call } = await startSlowHttp2Call();
    await listener.close(50);
    const error = await call.then(
      () => undefined,
      (reason: unknown) => ConnectError.from(reason),
    );
    // connect-node reports a stream cut by a closing session as canceled
    expect(error).toBeInstanceOf(ConnectError);
  });
});

// Without openssl the TLS tests are skipped on a workstation, but fail under CI.
describe.skipIf(!opensslAvailable() && process.env.CI !== "true")("one TLS port", () => {
  let cert = "";
  let key = "";
  beforeAll(() => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-tls-"));
    try {
      writeSelfSignedCert(dir);
      cert = readFileSync(join(dir, "cert.pem"), "utf8");
      key = readFileSync(join(dir, "key.pem"), "utf8");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports an https url", async () => {
    const listener = await listen({ handler: createHealthApp().handler, tls: { cert, key } });
    expect(listener.address.url).toBe(`https://127.0.0.1:${listener.address.port}`);
  });

  it("negotiates h2 by ALPN and serves Connect and gRPC over it", async () => {
    const listener = await listen({ handler: createHealthApp().handler, tls: { cert, key } });
    const url = listener.address.url;
    const session = http2.connect(url, { ca: cert });
    cleanups.push(() => session.destroy());
    await once(session, "connect");
    expect(session.alpnProtocol).toBe("h2");

    const connect = createConnectTransport({ baseUrl: url, httpVersion: "2", sessionManager: h2SessionManager(url, { ca: cert }) });
    expect(await createClient(Health, connect).check({})).toMatchObject({ status: SERVING });
    const grpcTransport = createGrpcTransport({ baseUrl: url, sessionManager: h2SessionManager(url, { ca: cert }) });
    expect(await createClient(Health, grpcTransport).check({})).toMatchObject({ status: SERVING });
  });

  it("negotiates http/1.1 by ALPN, and serves HTTP/1.1 to clients that offer no ALPN", async () => {
    const listener = await listen({ handler: createHealthApp().handler, tls: { cert, key } });
    const url = listener.address.url;
    const offerHttp1: https.RequestOptions & tls.ConnectionOptions = {
      method: "POST",
      ca: cert,
      agent: false,
      ALPNProtocols: ["http/1.1"],
      headers: { "content-type": "application/json" },
    };
    const req = https.request(url + CHECK_PATH, offerHttp1);
    req.end("{}");
    const [res] = (await once(req, "response")) as [http.IncomingMessage];
    expect((res.socket as tls.TLSSocket).alpnProtocol).toBe("http/1.1");
    expect(res.httpVersion).toBe("1.1");
    expect(JSON.parse((await readAll(res)).toString())).toEqual({ status: "SERVING" });

    const connect = createConnectTransport({ baseUrl: url, httpVersion: "1.1", nodeOptions: { ca: cert, agent: false } });
    expect(await createClient(Health, connect).check({})).toMatchObject({ status: SERVING });
    const grpcWeb = createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1", nodeOptions: { ca: cert, agent: false } });
    expect(await createClient(Health, grpcWeb).check({})).toMatchObject({ status: SERVING });
  });

  it("refuses an oversized body over TLS HTTP/1.1 too", async () => {
    const app = createHealthApp();
    const listener = await listen({ handler: app.handler, tls: { cert, key } });
    const req = https.request(listener.address.url + CHECK_PATH, {
      method: "POST",
      ca: cert,
      agent: false,
      headers: { "content-type": "application/json", "content-length": "1000000" },
    });
    req.on("error", () => {});
    cleanups.push(() => req.destroy());
    req.flushHeaders();
    const [res] = (await once(req, "response")) as [http.IncomingMessage];
    expect(res.statusCode).toBe(429);
    expect(JSON.parse((await readAll(res)).toString())).toMatchObject({ code: "resource_exhausted" });
    expect(app.calls).toEqual([]);
  });

  it("closes an idle h2 session and an idle HTTP/1.1 connection promptly", async () => {
    const listener = await listen({ handler: createHealthApp().handler, tls: { cert, key } });
    const url = listener.address.url;
    const session = http2.connect(url, { ca: cert });
    session.on("error", () => {});
    cleanups.push(() => session.destroy());
    await once(session, "remoteSettings");
    const agent = new https.Agent({ keepAlive: true, ca: cert });
    cleanups.push(() => agent.destroy());
    const req = https.request(url + CHECK_PATH, { method: "POST", agent, headers: { "content-type": "application/json" } });
    req.end("{}");
    const [res] = (await once(req, "response")) as [http.IncomingMessage];
    await readAll(res);
    await listener.close(CLOSE_GRACE_BEYOND_TEST_MS);
  });
});
