/**
 * The Node side of WatchEvents' output: a WatchOutput for WatchEvents calls
 * of a streaming content type only, writing batches as frames, the bytes a client that never reads leaves waiting (HTTP/1.1:
 * Node's buffers and the kernel's send queue; HTTP/2: what flow control holds
 * back), holding back until the kernel is sampled, and cutting a dropped
 * client's connection after the grace period.
 */
import { once } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { createContextValues } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import type { JobEvent } from "../../../src/domain/job.js";
import { LeaseQueueService } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { createWatchOutputs } from "../../../src/server/fast-wire/node-watch-output.js";
import { watchFrames } from "../../../src/server/fast-wire/watch-frames.js";
import { WATCH_OUTPUT, type WatchOutput } from "../../../src/service/watch-events-handler.js";

const WATCH = "/leasequeue.v1.LeaseQueueService/WatchEvents";
const STREAMING = "application/connect+proto";
const MAX_PENDING = 256 * 1024;

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const fn of cleanups.splice(0).reverse()) fn();
});

/** A server whose handler hands each call's WatchOutput (or undefined) and response to `onCall`. */
async function serve(
  kind: "h1" | "h2",
  onCall: (output: WatchOutput | undefined, res: http.ServerResponse | http2.Http2ServerResponse) => void,
) {
  const outputs = createWatchOutputs({ maxPendingBytes: MAX_PENDING });
  const handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => {
    const values = createContextValues();
    // The method the RPC adapter would have routed the path to.
    const name = (req.url ?? "").split("/").pop();
    const method = LeaseQueueService.methods.find((m) => m.name === name) ?? LeaseQueueService.method.getStats;
    outputs.addTo(values, req, res, method);
    res.writeHead(200, { "content-type": "application/connect+proto" });
    (res as http.ServerResponse).write(Buffer.alloc(5)); // what the framework sends first
    onCall(values.get(WATCH_OUTPUT), res);
  };
  const server = kind === "h1" ? http.createServer(handler) : http2.createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => {
    (server as http.Server).closeAllConnections?.();
    server.close();
  });
  return (server.address() as net.AddressInfo).port;
}

/** An HTTP/1.1 POST whose response is read up to its first bytes and then never again. */
async function h1NonReader(port: number, path = WATCH): Promise<net.Socket> {
  const socket = net.connect({ host: "127.0.0.1", port });
  cleanups.push(() => socket.destroy());
  await once(socket, "connect");
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${STREAMING}\r\nContent-Length: 0\r\n\r\n`);
  await once(socket, "data");
  socket.pause();
  return socket;
}

/** An event whose frame takes about 64 KiB. */
const BIG_EVENT: JobEvent = {
  sequence: 1,
  jobId: "01a230ac-40d4-7659-bdf9-5453cc692072",
  queue: "q",
  groupKey: "",
  kind: "progress",
  fromState: "running",
  toState: "running",
  eventTime: 1_764_590_000_000,
  workerId: "w",
  attempt: 1,
  message: "x".repeat(64 * 1024),
};

/** Writes a 64 KiB event at a time until the output says it holds more than `bytes` for the client. */
async function fill(output: WatchOutput, bytes: number): Promise<number> {
  const frameBytes = watchFrames([BIG_EVENT], "binary").length;
  let written = 0;
  while (output.pendingOutputBytes() <= bytes) {
    if (written > 64 * 1024 * 1024) throw new Error("64 MiB written and the client still looks like it reads");
    output.write([BIG_EVENT]);
    written += frameBytes;
    const writable = output.whenWritable();
    if (writable !== undefined) await writable;
  }
  return written;
}

describe("WatchOutputs", () => {
  it("are made for WatchEvents calls of a streaming content type only", async () => {
    const seen = new Map<string, WatchOutput | undefined>();
    const port = await serve("h1", (output, res) => {
      const req = (res as http.ServerResponse).req;
      seen.set(`${req.url} ${req.headers["content-type"]}`, output);
      res.end();
    });
    for (const [path, type] of [
      [WATCH, STREAMING],
      [WATCH, "application/grpc-web+json"],
      [WATCH, "application/json"],
      ["/leasequeue.v1.LeaseQueueService/GetStats", STREAMING],
    ]) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { "content-type": type } });
      await res.arrayBuffer();
    }
    expect(seen.get(`${WATCH} ${STREAMING}`)).toBeDefined();
    expect(seen.get(`${WATCH} application/grpc-web+json`)).toBeDefined();
    expect(seen.get(`${WATCH} application/json`)).toBeUndefined();
    expect(seen.get(`/leasequeue.v1.LeaseQueueService/GetStats ${STREAMING}`)).toBeUndefined();
  });

  it("write each batch as the frames of the call's format", async () => {
    const bodies = new Map<string, Buffer>();
    const port = await serve("h1", (output, res) => {
      output!.write([BIG_EVENT, BIG_EVENT]);
      output!.write(null);
      res.end();
    });
    for (const type of [STREAMING, "application/grpc-web+json"]) {
      const res = await fetch(`http://127.0.0.1:${port}${WATCH}`, { method: "POST", headers: { "content-type": type } });
      bodies.set(type, Buffer.from(await res.arrayBuffer()));
    }
    for (const [type, format] of [
      [STREAMING, "binary"],
      ["application/grpc-web+json", "json"],
    ] as const) {
      // After the framework's first 5 bytes: the two events' frames, then a keepalive's.
      const want = Buffer.concat([Buffer.alloc(5), watchFrames([BIG_EVENT, BIG_EVENT], format), watchFrames(null, format)]);
      expect(bodies.get(type)!.equals(want), type).toBe(true);
    }
  });

  it("see the bytes an HTTP/1.1 client never reads, the kernel's included, and hold back until they know", async () => {
    const calls: Array<{ output: WatchOutput; res: http.ServerResponse }> = [];
    const arrived = new Promise<void>((resolve) => {
      void serve("h1", (output, res) => {
        calls.push({ output: output!, res: res as http.ServerResponse });
        resolve();
      }).then((port) => h1NonReader(port));
    });
    await arrived;
    const { output, res } = calls[0];
    const written = await fill(output, MAX_PENDING);
    console.log(`HTTP/1.1 non-reader: ${written} bytes written before ${output.pendingOutputBytes()} were seen waiting`);
    // Little more than the limit went out unseen: the peer's receive buffer, the limit, one write.
    expect(written).toBeLessThan(MAX_PENDING + 4 * 1024 * 1024);

    const closed = once(res, "close");
    output.closeAfter(50);
    await closed;
    expect(res.destroyed).toBe(true);
  });

  it("see what HTTP/2 flow control holds back for a stream that is never read", async () => {
    let call: { output: WatchOutput; res: http2.Http2ServerResponse } | undefined;
    let arrived!: () => void;
    const ready = new Promise<void>((resolve) => (arrived = resolve));
    const port = await serve("h2", (output, res) => {
      call = { output: output!, res: res as http2.Http2ServerResponse };
      arrived();
    });
    const session = http2.connect(`http://127.0.0.1:${port}`);
    cleanups.push(() => session.destroy());
    const stream = session.request({ ":method": "POST", ":path": WATCH, "content-type": STREAMING });
    stream.end();
    await once(stream, "response");
    stream.pause();
    await ready;
    const written = await fill(call!.output, MAX_PENDING);
    expect(call!.output.whenWritable()).toBeUndefined(); // no kernel to wait for on HTTP/2
    expect(written).toBeLessThan(MAX_PENDING + 256 * 1024);

    const closed = once(call!.res, "close");
    call!.output.closeAfter(50);
    await closed;
    // The stream is gone with what it held; the connection stays for other calls.
    expect(call!.res.stream.destroyed).toBe(true);
    const again = session.request({ ":method": "POST", ":path": "/leasequeue.v1.LeaseQueueService/GetStats" });
    again.end();
    const [headers] = (await once(again, "response")) as [http2.IncomingHttpHeaders];
    expect(headers[":status"]).toBe(200);
  });
});
