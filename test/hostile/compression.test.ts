/**
 * Compression bombs against a real server process: brotli is refused unless
 * configured (its window is what costs memory), gzip and configured brotli
 * stop at LEASEQUEUE_MAX_REQUEST_BYTES after decompression, and other
 * clients keep being served meanwhile.
 */
import * as zlib from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { brotliWindowBits } from "../../src/server/request-compression.js";
import { mib, processCpuMs } from "../helpers/proc-stats.js";
import { okJson } from "../helpers/process.js";
import { connectMany, rawRequest, rpcCount, SERVICE, spawnHostileServer, type HostileServer, type RawReply } from "./raw-http2.js";

const BOMBS = 400;
const SESSIONS = 4; // 100 streams each, under the 256-stream limit per connection
/** Generous: the attack measured 6.7 GB before the fix; a bounded server stays near its idle size. */
const PEAK_RSS_LIMIT = 600 * 1024 * 1024;

/** 64 MiB of zeros: tens of bytes in brotli, about 64 KB in gzip. */
const BOMB_PAYLOAD = Buffer.alloc(64 * 1024 * 1024);

function brotliBomb(windowBits: number): Buffer {
  return zlib.brotliCompressSync(BOMB_PAYLOAD, {
    params: { [zlib.constants.BROTLI_PARAM_LGWIN]: windowBits, [zlib.constants.BROTLI_PARAM_QUALITY]: 5 },
  });
}
const GZIP_BOMB = zlib.gzipSync(BOMB_PAYLOAD, { level: 9 });

let server: HostileServer | undefined;
afterEach(async () => {
  await server?.cleanup();
  server = undefined;
});

/** Fires BOMBS concurrent Connect unary Submit calls with `body` encoded as `encoding`, plus one honest Submit. */
async function bombard(s: HostileServer, encoding: string, body: Buffer): Promise<{ replies: RawReply[]; honest: any }> {
  const sessions = await connectMany(s.apiUrl, SESSIONS);
  const cpuBefore = processCpuMs(s.pid);
  const started = performance.now();
  try {
    const bombs = Array.from({ length: BOMBS }, (_, i) =>
      rawRequest(
        sessions[i % SESSIONS],
        {
          ":path": `${SERVICE}/Submit`,
          "content-type": "application/proto",
          "content-encoding": encoding,
          "connect-protocol-version": "1",
        },
        body,
      ),
    );
    // Another client, on its own connection, while the bombs are in flight.
    const honest = okJson(s.apiUrl, "Submit", { queue: "honest", task: "t" });
    const replies = await Promise.all(bombs);
    const result = { replies, honest: await honest };
    console.log(
      `${BOMBS} concurrent ${encoding} bombs of ${body.length} bytes: ${s.describeMemory()}, ` +
        `server CPU ${Math.round(processCpuMs(s.pid) - cpuBefore)} ms, ${Math.round(performance.now() - started)} ms wall`,
    );
    return result;
  } finally {
    for (const session of sessions) session.close();
  }
}

describe("brotliWindowBits", () => {
  it("reads the window every encoder setting declares (RFC 7932 §9.1)", () => {
    for (let lgwin = 10; lgwin <= 24; lgwin++) {
      const stream = zlib.brotliCompressSync(Buffer.alloc(100_000, 7), { params: { [zlib.constants.BROTLI_PARAM_LGWIN]: lgwin } });
      expect(brotliWindowBits(stream), `lgwin ${lgwin}`).toBe(lgwin);
    }
    expect(brotliWindowBits(new Uint8Array(0))).toBeUndefined();
    expect(brotliWindowBits(Uint8Array.of(0b0010001))).toBe("large"); // n = 0, m = 1: the large-window extension
  });
});

describe("request compression", () => {
  it("refuses 400 concurrent brotli bombs as an unsupported encoding, with memory bounded and others served", async () => {
    server = await spawnHostileServer();
    const bomb = brotliBomb(24); // declares a 16 MiB window
    const { replies, honest } = await bombard(server, "br", bomb);
    for (const reply of replies) {
      expect(reply.status).toBe(501); // Connect's HTTP status for unimplemented
      const error = JSON.parse(reply.body.toString("utf8"));
      expect(error.code).toBe("unimplemented");
      expect(error.message).toContain('unknown compression "br"');
    }
    expect(honest.job.queue).toBe("honest");
    expect(server.memory().peakRssBytes).toBeLessThan(PEAK_RSS_LIMIT);
    // Refused before any interceptor, and still counted.
    expect(await rpcCount(server.metricsUrl, "Submit", "unimplemented")).toBe(BOMBS);
  }, 60_000);

  it("refuses 400 concurrent gzip bombs at the decompressed size limit, with memory bounded and others served", async () => {
    server = await spawnHostileServer();
    const { replies, honest } = await bombard(server, "gzip", GZIP_BOMB);
    for (const reply of replies) {
      expect(reply.status).toBe(429);
      const error = JSON.parse(reply.body.toString("utf8"));
      expect(error.code).toBe("resource_exhausted");
      expect(error.message).toContain("readMaxBytes 131072");
    }
    expect(honest.job.queue).toBe("honest");
    expect(server.memory().peakRssBytes).toBeLessThan(PEAK_RSS_LIMIT);
    expect(await rpcCount(server.metricsUrl, "Submit", "resource_exhausted")).toBe(BOMBS);
  }, 60_000);

  it("with brotli configured, refuses windows over 4 MiB and bounds 400 concurrent 4 MiB-window bombs", async () => {
    server = await spawnHostileServer({ LEASEQUEUE_REQUEST_COMPRESSION: "gzip,br" });
    const sessions = await connectMany(server.apiUrl, 1);
    try {
      const wide = await rawRequest(
        sessions[0],
        { ":path": `${SERVICE}/Submit`, "content-type": "application/proto", "content-encoding": "br", "connect-protocol-version": "1" },
        brotliBomb(24),
      );
      expect(wide.status).toBe(429);
      expect(JSON.parse(wide.body.toString("utf8")).message).toContain("declares a window of 2^24 bytes; the limit is 2^22 bytes");

      // An honest brotli request (the encoders' default window of 2^22) is served.
      const honest = await rawRequest(
        sessions[0],
        { ":path": `${SERVICE}/Submit`, "content-type": "application/json", "content-encoding": "br", "connect-protocol-version": "1" },
        zlib.brotliCompressSync(Buffer.from(JSON.stringify({ queue: "brotli", task: "t" }))),
      );
      expect(honest.status, honest.body.toString()).toBe(200);
      expect(JSON.parse(honest.body.toString("utf8")).job.queue).toBe("brotli");
    } finally {
      sessions[0].close();
    }

    const { replies, honest } = await bombard(server, "br", brotliBomb(22));
    for (const reply of replies) {
      expect(reply.status).toBe(429);
      expect(JSON.parse(reply.body.toString("utf8")).code).toBe("resource_exhausted");
    }
    expect(honest.job.queue).toBe("honest");
    expect(server.memory().peakRssBytes).toBeLessThan(PEAK_RSS_LIMIT);
    console.log(`peak RSS with brotli on: ${mib(server.memory().peakRssBytes)}`);
  }, 60_000);

  it("compresses responses over 1 KiB only with LEASEQUEUE_RESPONSE_COMPRESSION=on (off by default)", async () => {
    for (const [setting, expected] of [
      ["on", "gzip"],
      ["off", undefined],
      [undefined, undefined],
    ] as const) {
      server = await spawnHostileServer(setting === undefined ? {} : { LEASEQUEUE_RESPONSE_COMPRESSION: setting });
      for (let i = 0; i < 20; i++) await okJson(server.apiUrl, "Submit", { queue: "big", task: "t", payload: { i, pad: "x".repeat(100) } });
      const [session] = await connectMany(server.apiUrl, 1);
      const reply = await rawRequest(
        session,
        { ":path": `${SERVICE}/ListJobs`, "content-type": "application/json", "accept-encoding": "gzip", "connect-protocol-version": "1" },
        Buffer.from(JSON.stringify({ queue: "big" })),
      );
      session.close();
      expect(reply.status).toBe(200);
      expect(reply.headers["content-encoding"], `LEASEQUEUE_RESPONSE_COMPRESSION=${setting}`).toBe(expected);
      const json = expected === "gzip" ? zlib.gunzipSync(reply.body) : reply.body;
      expect(JSON.parse(json.toString("utf8")).jobs).toHaveLength(20);
      await server.cleanup();
      server = undefined;
    }
  }, 60_000);
});
