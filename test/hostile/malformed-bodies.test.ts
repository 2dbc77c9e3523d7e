/**
 * Request bodies that are not what they claim to be, against a real server
 * process: each is refused with a coded error in its protocol's shape,
 * counted in the RPC metrics, never logged as a server failure, and nothing
 * is stored.
 */
import * as zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mib } from "../helpers/proc-stats.js";
import { listAllJobs, okJson } from "../helpers/process.js";
import {
  connectH2,
  envelope,
  errorLines,
  grpcStatus,
  rawRequest,
  rpcCount,
  SERVICE,
  spawnHostileServer,
  type HostileServer,
} from "./raw-http2.js";
import type * as http2 from "node:http2";

/** Not protobuf binary: 0xff... is a varint that never ends. */
const GARBAGE = Buffer.alloc(64, 0xff);

let server: HostileServer;
let session: http2.ClientHttp2Session;
beforeAll(async () => {
  server = await spawnHostileServer();
  session = await connectH2(server.apiUrl);
}, 60_000);
afterAll(async () => {
  session?.close();
  await server?.cleanup();
});

function parseFrames(body: Buffer): { flags: number; data: Buffer }[] {
  const frames: { flags: number; data: Buffer }[] = [];
  for (let i = 0; i + 5 <= body.length;) {
    const length = body.readUInt32BE(i + 1);
    frames.push({ flags: body[i], data: body.subarray(i + 5, i + 5 + length) });
    i += 5 + length;
  }
  return frames;
}

describe("undecodable protobuf binary", () => {
  it("is invalid_argument (HTTP 400) over Connect unary", async () => {
    const reply = await rawRequest(
      session,
      { ":path": `${SERVICE}/Submit`, "content-type": "application/proto", "connect-protocol-version": "1" },
      GARBAGE,
    );
    expect(reply.status).toBe(400);
    const error = JSON.parse(reply.body.toString("utf8"));
    expect(error.code).toBe("invalid_argument");
    expect(error.message).toContain("request message is not a valid binary leasequeue.v1.SubmitRequest");
  });

  it("is grpc-status 3 (INVALID_ARGUMENT) over gRPC, for unary and server-stream methods", async () => {
    for (const method of ["Submit", "WatchEvents"]) {
      const reply = await rawRequest(
        session,
        { ":path": `${SERVICE}/${method}`, "content-type": "application/grpc", te: "trailers" },
        envelope(GARBAGE),
      );
      expect(reply.status).toBe(200);
      expect(grpcStatus(reply), method).toBe(3);
      expect(decodeURIComponent(String(reply.trailers["grpc-message"]))).toContain("request message is not a valid binary");
    }
  });

  it("is grpc-status 3 over gRPC for a Work stream, whether the bytes are not protobuf or not a WorkRequest", async () => {
    // GARBAGE fails before any field is read; acks (field 2) sent as a varint is protobuf that no WorkRequest is.
    for (const body of [GARBAGE, Buffer.from([0x10, 0x01])]) {
      const reply = await rawRequest(
        session,
        { ":path": `${SERVICE}/Work`, "content-type": "application/grpc", te: "trailers" },
        envelope(body),
      );
      expect(reply.status).toBe(200);
      expect(grpcStatus(reply)).toBe(3);
      expect(decodeURIComponent(String(reply.trailers["grpc-message"]))).toContain(
        "request message is not a valid binary leasequeue.v1.WorkRequest",
      );
    }
  });

  it("is grpc-status 3 over gRPC-Web, in its trailer frame", async () => {
    const reply = await rawRequest(
      session,
      { ":path": `${SERVICE}/Submit`, "content-type": "application/grpc-web+proto" },
      envelope(GARBAGE),
    );
    const trailer = parseFrames(reply.body).find((f) => (f.flags & 0x80) !== 0);
    expect(trailer?.data.toString("latin1")).toMatch(/grpc-status: 3\r\n/);
  });

  it("is invalid_argument in the end-stream message over Connect streaming", async () => {
    const reply = await rawRequest(
      session,
      { ":path": `${SERVICE}/WatchEvents`, "content-type": "application/connect+proto", "connect-protocol-version": "1" },
      envelope(GARBAGE),
    );
    const end = parseFrames(reply.body).find((f) => (f.flags & 0b10) !== 0);
    expect(JSON.parse(end!.data.toString("utf8")).error.code).toBe("invalid_argument");
  });

  it("is counted in the RPC metrics and never logged as a server failure", async () => {
    // The tests above sent three undecodable Submits (Connect, gRPC, gRPC-Web), two WatchEvents and two Work streams.
    expect(await rpcCount(server.metricsUrl, "Submit", "invalid_argument")).toBeGreaterThanOrEqual(3);
    expect(await rpcCount(server.metricsUrl, "WatchEvents", "invalid_argument")).toBeGreaterThanOrEqual(2);
    expect(await rpcCount(server.metricsUrl, "Work", "invalid_argument")).toBeGreaterThanOrEqual(2);
    expect(await rpcCount(server.metricsUrl, "Submit", "internal")).toBe(0);
    expect(errorLines(server)).toEqual([]);
  });
});

describe("JSON that is not UTF-8", () => {
  it("is invalid_argument (HTTP 400) over Connect JSON on HTTP/1.1, and nothing is stored", async () => {
    // A raw 0xff byte inside a payload string, where any text is accepted:
    // a lenient decoder would store U+FFFD in its place.
    const body = Buffer.concat([Buffer.from('{"queue":"utf8","task":"t","payload":{"note":"a'), Buffer.from([0xff]), Buffer.from('b"}}')]);
    const res = await fetch(`${server.apiUrl}${SERVICE}/Submit`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    expect(res.status).toBe(400);
    const error = (await res.json()) as { code: string; message: string };
    expect(error.code).toBe("invalid_argument");
    expect(error.message).toContain("not valid UTF-8");
    expect(await listAllJobs(server.apiUrl, "utf8")).toEqual([]);
  });
});

describe("sizes that lie", () => {
  it("refuses a single gzip bomb with resource_exhausted (HTTP 429)", async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const res = await fetch(`${server.apiUrl}${SERVICE}/Submit`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: bomb,
    });
    expect(res.status).toBe(429);
    expect(((await res.json()) as { code: string }).code).toBe("resource_exhausted");
  });

  it("refuses a gRPC length prefix declaring 4 GiB without allocating it", async () => {
    const before = server.memory();
    const prefix = Buffer.alloc(5 + 16);
    prefix.writeUInt32BE(0xffffffff, 1); // declares 4 GiB - 1; 16 bytes follow
    const reply = await rawRequest(session, { ":path": `${SERVICE}/Submit`, "content-type": "application/grpc", te: "trailers" }, prefix);
    expect(grpcStatus(reply)).toBe(8); // RESOURCE_EXHAUSTED
    const after = server.memory();
    console.log(`4 GiB length prefix: RSS ${mib(before.rssBytes)} -> ${mib(after.rssBytes)}, peak ${mib(after.peakRssBytes)}`);
    expect(after.peakRssBytes).toBeLessThan(before.peakRssBytes + 64 * 1024 * 1024);
  });

  it("still serves an honest client afterwards", async () => {
    const { job } = await okJson(server.apiUrl, "Submit", { queue: "honest", task: "t" });
    expect(job.queue).toBe("honest");
  });
});
