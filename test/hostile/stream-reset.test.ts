/**
 * Streams reset right after their HEADERS (RST_STREAM CANCEL), for unary and
 * server-stream methods, in gRPC and Connect: a client's cancel is logged at
 * debug and counted as `canceled`, never as a server failure.
 */
import * as http2 from "node:http2";
import { afterEach, describe, expect, it } from "vitest";
import { processCpuMs } from "../helpers/proc-stats.js";
import { okJson } from "../helpers/process.js";
import { connectMany, errorLines, rpcCount, SERVICE, spawnHostileServer, type HostileServer } from "./raw-http2.js";

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

/** Sends HEADERS (no END_STREAM), then RST_STREAM CANCEL as soon as the stream has its id. */
function headersThenReset(session: http2.ClientHttp2Session, method: string, contentType: string): Promise<void> {
  const stream = session.request(
    { ":method": "POST", ":path": `${SERVICE}/${method}`, "content-type": contentType, "connect-protocol-version": "1", te: "trailers" },
    { endStream: false },
  );
  stream.on("error", () => {});
  stream.once("ready", () => stream.close(http2.constants.NGHTTP2_CANCEL));
  return new Promise((resolve) => stream.once("close", () => resolve()));
}

describe("client resets", () => {
  it("logs 2,000 resets at debug, counts them as canceled, and keeps serving", async () => {
    server = await spawnHostileServer();
    const sessions = await connectMany(server.apiUrl, 4);
    const cpuBefore = processCpuMs(server.pid);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: RESETS }, (_, i) => {
        const kind = KINDS[i % KINDS.length];
        return headersThenReset(sessions[i % sessions.length], kind.method, kind.contentType);
      }),
    );
    for (const s of sessions) s.close();

    // The server is still serving, and has finished with every reset stream.
    const honest = await okJson(server.apiUrl, "Submit", { queue: "after-resets", task: "t" });
    expect(honest.job.queue).toBe("after-resets");
    const canceled = async () => (await rpcCount(server!.metricsUrl, "Submit", "canceled")) + (await rpcCount(server!.metricsUrl, "WatchEvents", "canceled"));
    let counted = await canceled();
    // The last resets may still be closing on the server: poll the metric briefly.
    for (let i = 0; i < 50 && counted < RESETS; i++) {
      await new Promise((r) => setTimeout(r, 100));
      counted = await canceled();
    }
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
    // Every reset the server saw is canceled; nghttp2 may drop a stream whose
    // HEADERS and RST_STREAM arrived in one read before Node dispatched it.
    expect(counted).toBeGreaterThan(RESETS / 2);
    expect(counted).toBeLessThanOrEqual(RESETS);
  }, 60_000);
});
