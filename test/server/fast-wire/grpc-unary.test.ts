/**
 * Unary calls over gRPC with binary messages are served by grpc-unary.ts
 * instead of connect's protocol handler: every answer must be the one
 * connect gives. Two servers run the same service through the same RPC
 * adapter and boundary interceptor; on the second the service is
 * registered with (empty) options of its own, which keeps it on connect's
 * path. Each case sends the same bytes to both and compares status,
 * headers, trailers, body, what the handler saw and the RPC metrics.
 */
import { once } from "node:events";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import { ErrorInfoSchema } from "../../../gen/ts/google/rpc/error_details_pb.js";
import {
  LeaseQueueService,
  SubmitRequestSchema,
  SubmitResponseSchema,
  type SubmitRequest,
} from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { QueueError } from "../../../src/domain/errors.js";
import { silentLogger } from "../../../src/testing/index.js";
import type { Metrics } from "../../../src/metrics/metrics.js";
import { servesAsGrpcUnary } from "../../../src/server/fast-wire/grpc-unary.js";
import { boundaryInterceptor } from "../../../src/server/routes.js";
import { createRpcHandler } from "../../../src/server/rpc-handler.js";
import { until } from "../../helpers/until.js";

const SUBMIT = "/leasequeue.v1.LeaseQueueService/Submit";

interface Served {
  url: string;
  /** What handlers saw, by the call's `task`. */
  seen: Map<string, unknown>;
  /** Resolves when a handler of `task` next starts (asked before the call is sent). */
  entered(task: string): Promise<void>;
  /** (method, code label) of every call the metrics recorded. */
  observed: string[];
  shutdown: AbortController;
  close(): Promise<void>;
}

/** A promise the test settles: what a handler waits for instead of a time. */
function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * What the "late" and "after" handlers wait for before they first read their
 * signal: the test opens it once both servers counted the call (its response
 * closed: the client gone, or the answer sent).
 */
let callOver = gate();

function refuses(f: () => unknown): boolean {
  try {
    f();
    return false;
  } catch {
    return true;
  }
}

/** Waits until the call's signal aborts, notes the reason, and fails with it. */
async function untilAborted(ctx: HandlerContext, seen: Map<string, unknown>, task: string): Promise<never> {
  const reason: unknown = ctx.signal.aborted
    ? ctx.signal.reason
    : await new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve(ctx.signal.reason)));
  const error = ConnectError.from(reason);
  seen.set(task, { code: error.code, message: error.rawMessage });
  throw error;
}

function service(seen: Map<string, unknown>, enter: (task: string) => void): Partial<ServiceImpl<typeof LeaseQueueService>> {
  return {
    async submit(req: SubmitRequest, ctx: HandlerContext) {
      enter(req.task);
      switch (req.task) {
        case "ok":
          ctx.responseHeader.set("x-echo", ctx.requestHeader.get("x-echo") ?? "none");
          ctx.responseTrailer.set("x-trailer", "t");
          return { job: { id: "job-1", queue: req.queue, task: req.task }, deduplicated: true };
        case "context":
          seen.set(req.task, {
            url: ctx.url.replace(/:\d+\//, ":port/"),
            protocolName: ctx.protocolName,
            requestMethod: ctx.requestMethod,
            method: ctx.method.name,
            service: ctx.service.typeName,
            timeoutMs: ctx.timeoutMs() === undefined ? "none" : ctx.timeoutMs()! > 0 && ctx.timeoutMs()! <= 60_000,
            header: ctx.requestHeader.get("X-Echo"),
            has: [ctx.requestHeader.has("x-echo"), ctx.requestHeader.has("x-none")],
            missing: ctx.requestHeader.get("x-none"),
            padded: ctx.requestHeader.get("x-padded"),
            pseudoRefused: refuses(() => ctx.requestHeader.get(":path")),
            names: [...ctx.requestHeader.keys()].sort().join(","),
            changed: (ctx.requestHeader.set("x-echo", "changed"), ctx.requestHeader.get("x-echo")),
            entries: JSON.stringify([...ctx.requestHeader].filter(([k]) => k.startsWith("x-"))),
            signal: ctx.signal.aborted,
          });
          return {};
        case "spread":
          seen.set(req.task, {
            header: ctx.requestHeader.get("x-echo"),
            aborted: ctx.signal.aborted,
            url: ctx.url.replace(/:\d+\//, ":port/"),
          });
          return { job: { id: "spread" } };
        case "big":
          return { job: { id: "x".repeat(4000) } };
        case "connect-error":
          throw new ConnectError("not now", Code.FailedPrecondition, { "x-meta": "m" }, [
            { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: "NOT_NOW", domain: "test" }) },
          ]);
        case "queue-error":
          throw new QueueError("JOB_NOT_FOUND", "job j does not exist", { jobId: "j" });
        case "bug":
          throw new Error("a secret the client must not see");
        case "wait":
          return untilAborted(ctx, seen, req.task);
        case "late":
          // The signal is first read after the client has gone.
          await callOver.opened;
          return untilAborted(ctx, seen, req.task);
        case "after": {
          // The signal is first read after the call.
          const task = req.task;
          void callOver.opened.then(() => seen.set(task, { aborted: ctx.signal.aborted }));
          return {};
        }
        default:
          return {};
      }
    },
  };
}

/** An interceptor that hands on a copy of the request (`{...req}`) for the task "spread", as interceptors may. */
const spreadingInterceptor: Interceptor = (next) => (req) => {
  if (!req.stream && (req.message as SubmitRequest).task === "spread") return next({ ...req, message: req.message });
  return next(req);
};

async function serve(viaConnect: boolean, compressMinBytes?: number): Promise<Served> {
  const seen = new Map<string, unknown>();
  const entries = new Map<string, Array<() => void>>();
  const enter = (task: string) => {
    for (const resolve of entries.get(task)?.splice(0) ?? []) resolve();
  };
  const observed: string[] = [];
  const metrics: Pick<Metrics, "observeRpc"> = {
    observeRpc: (method, code) => observed.push(`${method} ${code === undefined ? "ok" : Code[code]}`),
  };
  const shutdown = new AbortController();
  const routes = (router: ConnectRouter) => {
    if (viaConnect) router.service(LeaseQueueService, service(seen, enter), {});
    else router.service(LeaseQueueService, service(seen, enter));
  };
  const rpc = createRpcHandler({
    routes,
    log: silentLogger,
    metrics,
    interceptors: [boundaryInterceptor(silentLogger, metrics as Metrics), spreadingInterceptor],
    readMaxBytes: 1024,
    acceptCompression: [compressionGzip],
    compressMinBytes: compressMinBytes ?? Number.MAX_SAFE_INTEGER,
    shutdownSignal: shutdown.signal,
  });
  const server = http2.createServer(rpc.handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    entered: (task) =>
      new Promise<void>((resolve) => {
        const waiting = entries.get(task) ?? [];
        waiting.push(resolve);
        entries.set(task, waiting);
      }),
    observed,
    shutdown,
    async close() {
      for (const s of sessions) s.destroy();
      server.close();
      await once(server, "close");
    },
  };
}

interface Exchange {
  status: number;
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: Buffer;
}

interface Send {
  headers?: Record<string, string>;
  body?: Uint8Array[];
  /** Reset the stream (CANCEL) once the server's handler of this task has started. */
  resetOnceEntered?: string;
}

/** One raw HTTP/2 exchange. */
async function exchange(server: Served, { headers = {}, body = [], resetOnceEntered }: Send): Promise<Exchange> {
  const entered = resetOnceEntered === undefined ? undefined : server.entered(resetOnceEntered);
  const session = http2.connect(server.url);
  try {
    const stream = session.request({
      ":method": "POST",
      ":path": SUBMIT,
      "content-type": "application/grpc",
      te: "trailers",
      ...headers,
    });
    const chunks: Buffer[] = [];
    let responseHeaders: Record<string, unknown> = {};
    let trailers: Record<string, unknown> = {};
    stream.on("response", (h) => (responseHeaders = { ...h }));
    stream.on("trailers", (t) => (trailers = { ...t }));
    stream.on("data", (c: Buffer) => chunks.push(c));
    for (const b of body) stream.write(b);
    stream.end();
    void entered?.then(() => stream.close(http2.constants.NGHTTP2_CANCEL));
    await new Promise<void>((resolve) => stream.once("close", resolve));
    const { date: _date, ...kept } = responseHeaders;
    return { status: Number(responseHeaders[":status"] ?? 0), headers: kept, trailers, body: Buffer.concat(chunks) };
  } finally {
    session.close();
  }
}

function frame(bytes: Uint8Array, flags = 0): Uint8Array {
  const out = Buffer.alloc(5 + bytes.byteLength);
  out.writeUInt8(flags, 0);
  out.writeUInt32BE(bytes.byteLength, 1);
  out.set(bytes, 5);
  return out;
}

const submit = (task: string, queue = "q") => frame(toBinary(SubmitRequestSchema, create(SubmitRequestSchema, { queue, task })));

let fast: Served;
let viaConnect: Served;

beforeAll(async () => {
  [fast, viaConnect] = await Promise.all([serve(false), serve(true)]);
});
afterAll(async () => {
  await Promise.all([fast.close(), viaConnect.close()]);
});

/** Sends `send` to both servers; returns both answers after checking they are the same, and the same calls were counted. */
async function same(send: Send): Promise<Exchange> {
  const before = [fast.observed.length, viaConnect.observed.length];
  const [a, b] = await Promise.all([exchange(fast, send), exchange(viaConnect, send)]);
  expect(a).toEqual(b);
  // The metrics are recorded when the response closes, which the client may see first.
  await until("both servers to count the call", () => fast.observed.length > before[0] && viaConnect.observed.length > before[1]);
  expect(fast.observed.slice(before[0])).toEqual(viaConnect.observed.slice(before[1]));
  expect(fast.observed.length - before[0]).toBe(1);
  return a;
}

describe("unary gRPC with binary messages, answered as connect answers", () => {
  it("answers a message with the handler's headers and trailers", async () => {
    const r = await same({ headers: { "x-echo": "hello" }, body: [submit("ok")] });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/grpc+proto");
    expect(r.headers["x-echo"]).toBe("hello");
    expect(r.trailers).toMatchObject({ "grpc-status": "0", "x-trailer": "t" });
    const response = fromBinary(SubmitResponseSchema, r.body.subarray(5));
    expect(response.job?.id).toBe("job-1");
    expect(fast.observed.at(-1)).toBe("Submit ok");
  });

  it("gives the handler the same context: URL, protocol, method, headers, deadline", async () => {
    const variants: Array<Record<string, string>> = [
      { "x-echo": "a", "x-padded": "\tv " },
      { "grpc-timeout": "30S" },
      { "content-type": "application/grpc+proto" },
    ];
    for (const headers of variants) {
      await same({ headers, body: [submit("context")] });
      expect(fast.seen.get("context")).toEqual(viaConnect.seen.get("context"));
      // nghttp2 drops a value with surrounding whitespace (RFC 9113 §8.2.1): there is nothing to trim.
      if (headers["x-padded"] !== undefined) {
        expect(fast.seen.get("context")).toMatchObject({ header: "a", has: [true, false], missing: null, padded: null });
      }
    }
    expect(fast.seen.get("context")).toMatchObject({ protocolName: "grpc", requestMethod: "POST", method: "Submit", timeoutMs: "none" });
    const seen = fast.seen.get("context") as { names: string; pseudoRefused: boolean; changed: string };
    expect(seen.names).not.toContain(":");
    expect(seen).toMatchObject({ pseudoRefused: true, changed: "changed" });
  });

  it("serves a request an interceptor copied, the handler seeing its headers and signal", async () => {
    await same({ headers: { "x-echo": "copied" }, body: [submit("spread")] });
    expect(fast.seen.get("spread")).toEqual({ header: "copied", aborted: false, url: expect.stringContaining(":port/") as unknown });
    expect(viaConnect.seen.get("spread")).toEqual(fast.seen.get("spread"));
  });

  it("sends a handler's ConnectError with its metadata and details, and a QueueError as its code", async () => {
    const r = await same({ body: [submit("connect-error")] });
    expect(r.trailers).toMatchObject({ "grpc-status": String(Code.FailedPrecondition), "x-meta": "m" });
    expect(r.trailers["grpc-status-details-bin"]).toBeDefined();
    const q = await same({ body: [submit("queue-error")] });
    expect(q.trailers["grpc-status"]).toBe(String(Code.NotFound));
  });

  it("answers a handler's bug as internal, without its message", async () => {
    const r = await same({ body: [submit("bug")] });
    expect(r.trailers).toMatchObject({ "grpc-status": String(Code.Internal), "grpc-message": "internal%20error" });
  });

  it("refuses what connect refuses, with connect's code and words", async () => {
    const cases: Array<[string, Send, Code]> = [
      ["bytes that are not a SubmitRequest", { body: [frame(Buffer.from([0x0a, 0xff]))] }, Code.InvalidArgument],
      ["a length prefix over readMaxBytes", { body: [Buffer.from([0, 0, 0, 8, 0])] }, Code.ResourceExhausted],
      ["two messages", { body: [submit("ok"), submit("ok")] }, Code.Unimplemented],
      ["a second message that does not parse", { body: [submit("ok"), frame(Buffer.from([0x0a, 0xff]))] }, Code.InvalidArgument],
      ["no message", { body: [] }, Code.Unimplemented],
      ["part of a prefix", { body: [Buffer.from([0, 0, 0])] }, Code.InvalidArgument],
      ["a compressed message without an encoding", { body: [frame(Buffer.from([]), 1)] }, Code.Internal],
      ["a timeout that is not one", { headers: { "grpc-timeout": "soon" }, body: [submit("ok")] }, Code.InvalidArgument],
      ["an encoding it does not know", { headers: { "grpc-encoding": "snappy" }, body: [submit("ok")] }, Code.Unimplemented],
    ];
    for (const [what, send, code] of cases) {
      const r = await same(send);
      expect(r.trailers["grpc-status"], what).toBe(String(code));
    }
  });

  it("serves a message split across DATA frames, and a prefix without its message as connect does", async () => {
    const whole = submit("ok");
    await same({ body: [whole.subarray(0, 2), whole.subarray(2, 7), whole.subarray(7)] });
    // connect counts only unread bytes as an incomplete envelope: a prefix whose message never came is "missing".
    const r = await same({ body: [Buffer.from([0, 0, 0, 0, 9])] });
    expect(r.trailers["grpc-status"]).toBe(String(Code.Unimplemented));
  });

  it("says which encoding responses may use, and compresses large ones the same way", async () => {
    const r = await same({ headers: { "grpc-accept-encoding": "gzip" }, body: [submit("big")] });
    expect(r.headers["grpc-encoding"]).toBe("gzip");
    const [small, smallConnect] = await Promise.all([serve(false, 1024), serve(true, 1024)]);
    try {
      const send = { headers: { "grpc-accept-encoding": "gzip" }, body: [submit("big")] };
      const [a, b] = await Promise.all([exchange(small, send), exchange(smallConnect, send)]);
      expect(a.headers).toEqual(b.headers);
      expect(a.trailers).toEqual(b.trailers);
      expect(a.body[0]).toBe(1);
      expect(gunzipSync(a.body.subarray(5))).toEqual(gunzipSync(b.body.subarray(5)));
    } finally {
      await Promise.all([small.close(), smallConnect.close()]);
    }
  });

  it("aborts a waiting handler at the deadline, with deadline_exceeded", async () => {
    const r = await same({ headers: { "grpc-timeout": "50m" }, body: [submit("wait")] });
    expect(r.trailers["grpc-status"]).toBe(String(Code.DeadlineExceeded));
    expect(fast.seen.get("wait")).toEqual(viaConnect.seen.get("wait"));
  });

  it("aborts a waiting handler when the client cancels, and counts the call as canceled", async () => {
    fast.seen.delete("wait");
    viaConnect.seen.delete("wait");
    await same({ body: [submit("wait")], resetOnceEntered: "wait" });
    expect(fast.seen.get("wait")).toEqual({ code: Code.Canceled, message: "http/2 stream closed with error code CANCEL (0x8)" });
    expect(viaConnect.seen.get("wait")).toEqual(fast.seen.get("wait"));
    expect(fast.observed.at(-1)).toBe("Submit Canceled");
  });

  it("gives a handler that first reads its signal after the client left an aborted one, and so after the call", async () => {
    callOver = gate();
    await same({ body: [submit("late")], resetOnceEntered: "late" });
    callOver.open();
    await until("both late handlers to read their signal", () => fast.seen.has("late") && viaConnect.seen.has("late"));
    expect(fast.seen.get("late")).toEqual({ code: Code.Canceled, message: "http/2 stream closed with error code CANCEL (0x8)" });
    expect(viaConnect.seen.get("late")).toEqual(fast.seen.get("late"));
    callOver = gate();
    await same({ body: [submit("after")] });
    callOver.open();
    await until("both handlers to read their signal after the call", () => fast.seen.has("after") && viaConnect.seen.has("after"));
    expect(fast.seen.get("after")).toEqual({ aborted: true });
    expect(viaConnect.seen.get("after")).toEqual({ aborted: true });
  });

  it("aborts a waiting handler at shutdown with the shutdown's reason", async () => {
    const [a, b] = await Promise.all([serve(false), serve(true)]);
    try {
      const waiting = Promise.all([a.entered("wait"), b.entered("wait")]);
      const calls = [a, b].map((s) => exchange(s, { body: [submit("wait")] }));
      await waiting;
      for (const s of [a, b]) s.shutdown.abort(new ConnectError("the server is shutting down", Code.Unavailable));
      const [ra, rb] = await Promise.all(calls);
      expect(ra).toEqual(rb);
      expect(ra.trailers["grpc-status"]).toBe(String(Code.Unavailable));
      expect(a.seen.get("wait")).toEqual({ code: Code.Unavailable, message: "the server is shutting down" });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe("which requests take this path", () => {
  const request = (headers: http2.IncomingHttpHeaders, method = "POST", authority: string | null = "h") =>
    ({ method, authority: authority ?? undefined, headers }) as unknown as http2.Http2ServerRequest;

  it("takes POSTs of binary gRPC, uncompressed", () => {
    for (const type of ["application/grpc", "application/grpc+proto", "Application/GRPC+Proto"]) {
      expect(servesAsGrpcUnary(request({ "content-type": type })), type).toBe(true);
    }
    expect(servesAsGrpcUnary(request({ "content-type": "application/grpc", "grpc-encoding": "identity" }))).toBe(true);
  });

  it("leaves JSON, other protocols, compressed requests, other methods and requests without an authority to connect", () => {
    expect(servesAsGrpcUnary(request({ "content-type": "application/grpc+json" }))).toBe(false);
    expect(servesAsGrpcUnary(request({ "content-type": "application/grpc-web" }))).toBe(false);
    expect(servesAsGrpcUnary(request({ "content-type": "application/proto" }))).toBe(false);
    expect(servesAsGrpcUnary(request({ "content-type": "application/grpc", "grpc-encoding": "gzip" }))).toBe(false);
    expect(servesAsGrpcUnary(request({ "content-type": "application/grpc" }, "GET"))).toBe(false);
    expect(servesAsGrpcUnary(request({ "content-type": "application/grpc" }, "POST", null))).toBe(false);
  });
});
