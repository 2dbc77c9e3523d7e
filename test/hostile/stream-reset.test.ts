/**
 * Streams reset right after their HEADERS (RST_STREAM CANCEL), for unary and
 * server-stream methods, in gRPC and Connect: a client's cancel is logged at
 * debug and counted as `canceled`, never as a server failure.
 */
import { once } from "node:events";
import * as http2 from "node:http2";
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { processCpuMs } from "../helpers/proc-stats.js";
import { until } from "../helpers/until.js";
import { okJson } from "../helpers/process.js";
import { errorLines, RawH2Connection, rpcCount, SERVICE, spawnHostileServer, type HostileServer } from "./raw-http2.js";

const RESETS = 2_000;

let server: HostileServer | undefined;
afterEach(async () => {
  await server?.cleanup();
  server = undefined;
});

const KINDS = [
  { method: "Submit", contentType: "application/grpc" },
  { method: "Submit", contentType: "application/proto" },
  { method: "WatchEvents", contentType: "application/grpc" },
  { method: "WatchEvents", contentType: "application/connect+json" },
] as const;

/** Resolves once the server has sent `text` on `socket`; fails if the connection ends first. */
function answered(socket: net.Socket, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let received = "";
    const onData = (chunk: Buffer) => {
      received += chunk.toString("latin1");
      if (!received.includes(text)) return;
      socket.off("data", onData).off("close", onClose);
      resolve();
    };
    const onClose = () =>
      reject(new Error(`the connection closed before the server sent ${JSON.stringify(text)}; got ${JSON.stringify(received)}`));
    socket.on("data", onData).once("close", onClose);
  });
}

/** HEADERS without END_STREAM, then RST_STREAM CANCEL: a request the client abandons before sending its body. */
function headersThenReset(conn: RawH2Connection, method: string, contentType: string): void {
  const id = conn.headers(`${SERVICE}/${method}`, { "content-type": contentType, "connect-protocol-version": "1", te: "trailers" });
  conn.reset(id, http2.constants.NGHTTP2_CANCEL);
}

describe("client resets", () => {
  it("logs 2,000 resets at debug, counts them as canceled, and keeps serving", async () => {
    server = await spawnHostileServer();
    // Four connections, 500 resets each: under nghttp2's rapid-reset guard,
    // which would end a connection that resets streams faster than that.
    const conns = await Promise.all([0, 1, 2, 3].map(() => RawH2Connection.open(server!.apiUrl)));
    const cpuBefore = processCpuMs(server.pid);
    const started = performance.now();
    for (let i = 0; i < RESETS; i++) {
      const kind = KINDS[i % KINDS.length];
      headersThenReset(conns[i % conns.length], kind.method, kind.contentType);
    }

    // The server is still serving, and has finished with every reset stream.
    const honest = await okJson(server.apiUrl, "Submit", { queue: "after-resets", task: "t" });
    expect(honest.job.queue).toBe("after-resets");
    const canceled = async () =>
      (await rpcCount(server!.metricsUrl, "Submit", "canceled")) + (await rpcCount(server!.metricsUrl, "WatchEvents", "canceled"));
    // The last resets may still be closing on the server.
    const counted = await until(`${RESETS} calls counted as canceled`, async () => {
      const n = await canceled();
      return n >= RESETS ? n : false;
    });
    for (const c of conns) expect(c.goaway).toBeUndefined();
    for (const c of conns) c.close();
    const debugLines = server.lines.filter((l) => l.includes('"level":"debug"') && l.includes("cancel")).length;
    console.log(
      `${RESETS} resets: ${counted} counted as canceled, ${debugLines} debug lines, ${errorLines(server).length} error lines, ` +
        `${server.describeMemory()}, server CPU ${Math.round(processCpuMs(server.pid) - cpuBefore)} ms, ${Math.round(performance.now() - started)} ms wall`,
    );

    expect(errorLines(server)).toEqual([]);
    expect(server.stderrLines.filter((l) => /failed/i.test(l))).toEqual([]);
    for (const method of ["Submit", "WatchEvents"]) {
      expect(await rpcCount(server.metricsUrl, method, "internal")).toBe(0);
      expect(await rpcCount(server.metricsUrl, method, "unknown")).toBe(0);
    }
    // Node dispatches every stream whose HEADERS arrived, reset or not.
    expect(counted).toBe(RESETS);
  }, 60_000);

  it("counts HTTP/1.1 connections dropped in the middle of a request body as canceled, never logged as failures", async () => {
    server = await spawnHostileServer();
    const { hostname, port } = new URL(server.apiUrl);
    const DROPS = 200;
    await Promise.all(
      Array.from({ length: DROPS }, async (_, i) => {
        const socket = net.connect({ host: hostname, port: Number(port) });
        socket.on("error", () => {});
        await once(socket, "connect");
        const method = i % 2 === 0 ? "Submit" : "WatchEvents";
        const contentType = i % 2 === 0 ? "application/json" : "application/connect+json";
        const continued = answered(socket, "HTTP/1.1 100 Continue\r\n");
        socket.write(
          `POST ${SERVICE}/${method} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${contentType}\r\nContent-Length: 1000\r\n` +
            `Expect: 100-continue\r\n\r\n{`,
        );
        // Dropped once the server serves the request and reads its body: its 100 Continue says so.
        await continued;
        socket.destroy();
      }),
    );
    const counted = async () =>
      (await rpcCount(server!.metricsUrl, "Submit", "canceled")) + (await rpcCount(server!.metricsUrl, "WatchEvents", "canceled"));
    const canceled = await until(`${DROPS} calls counted as canceled`, async () => {
      const n = await counted();
      return n >= DROPS ? n : false;
    });
    console.log(
      `${DROPS} HTTP/1.1 connections dropped mid-body: ${canceled} counted as canceled, ${errorLines(server).length} error lines`,
    );
    expect(errorLines(server)).toEqual([]);
    expect(canceled).toBe(DROPS);
    for (const method of ["Submit", "WatchEvents"]) expect(await rpcCount(server.metricsUrl, method, "internal")).toBe(0);
    const { job } = await okJson(server.apiUrl, "Submit", { queue: "after-drops", task: "t" });
    expect(job.queue).toBe("after-drops");
  }, 60_000);
});
