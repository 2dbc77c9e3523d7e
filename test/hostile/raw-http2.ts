/**
 * A raw node:http2 client for the hostile tests: it sends exactly the frames
 * a test asks for (bombs, trickled bodies, resets), which no RPC client does.
 */
import * as http2 from "node:http2";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processMemory, mib } from "../helpers/proc-stats.js";
import { spawnServer, type SpawnedServer } from "../helpers/process.js";

export const SERVICE = "/leasequeue.v1.LeaseQueueService";

export interface RawReply {
  status: number;
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
  /** RST_STREAM code if the stream was reset (0 = NO_ERROR after a complete answer). */
  rstCode: number;
}

/** Connects with prior knowledge (h2c); resolves once the server's SETTINGS arrived. */
export async function connectH2(url: string): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url);
  session.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    session.once("remoteSettings", () => resolve());
    session.once("error", reject);
  });
  return session;
}

/** One request: headers, then `body` (if any) and END_STREAM. */
export function rawRequest(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: Uint8Array,
): Promise<RawReply> {
  const stream = session.request({ ":method": "POST", ...headers }, { endStream: body === undefined });
  if (body !== undefined) stream.end(body);
  return readReply(stream);
}

/** Collects a stream's answer; resolves when the stream closes, whatever the reason. */
export function readReply(stream: http2.ClientHttp2Stream): Promise<RawReply> {
  return new Promise((resolve) => {
    let status = 0;
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      headers = h;
      status = Number(h[":status"]);
    });
    stream.on("trailers", (t) => (trailers = t));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => {});
    stream.on("close", () => resolve({ status, headers, trailers, body: Buffer.concat(chunks), rstCode: stream.rstCode ?? 0 }));
  });
}

/** The gRPC status of a reply: from the trailers, or from a trailers-only HEADERS frame. */
export function grpcStatus(reply: RawReply): number | undefined {
  const raw = reply.trailers["grpc-status"] ?? reply.headers["grpc-status"];
  return raw === undefined ? undefined : Number(raw);
}

/** A gRPC / Connect-streaming envelope. */
export function envelope(message: Uint8Array, flags = 0): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt8(flags, 0);
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** Opens `count` h2c sessions to `url`. */
export function connectMany(url: string, count: number): Promise<http2.ClientHttp2Session[]> {
  return Promise.all(Array.from({ length: count }, () => connectH2(url)));
}

export interface HostileServer extends SpawnedServer {
  pid: number;
  /** Resident memory now and its peak since start, in bytes. */
  memory(): { rssBytes: number; peakRssBytes: number };
  /** "RSS 80.1 MiB (peak 120.3 MiB)" */
  describeMemory(): string;
  cleanup(): Promise<void>;
}

/** A real `leasequeue` process on port 0 with a fresh database; `env` adds settings. */
export async function spawnHostileServer(env: Record<string, string> = {}): Promise<HostileServer> {
  const dir = mkdtempSync(join(tmpdir(), "lq-hostile-"));
  const server = await spawnServer(join(dir, "q.db"), [], { env: { LEASEQUEUE_LOG_LEVEL: "debug", ...env } });
  const pid = server.child.pid!;
  const memory = () => processMemory(pid);
  return {
    ...server,
    pid,
    memory,
    describeMemory() {
      const m = memory();
      return `RSS ${mib(m.rssBytes)} (peak ${mib(m.peakRssBytes)})`;
    },
    async cleanup() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** JSON log lines of the server at level error (the logger writes `level`). */
export function errorLines(server: SpawnedServer): string[] {
  return server.lines.filter((line) => {
    try {
      return JSON.parse(line).level === "error";
    } catch {
      return false;
    }
  });
}

/** Sum of leasequeue_rpc_duration_seconds_count samples matching method and code. */
export async function rpcCount(metricsUrl: string, method: string, code: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("leasequeue_rpc_duration_seconds_count{")) continue;
    if (line.includes(`method="${method}"`) && line.includes(`code="${code}"`)) total += Number(line.split(" ").pop());
  }
  return total;
}
