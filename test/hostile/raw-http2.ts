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

/** Connects (h2c with prior knowledge, or TLS with ALPN h2 for an https url); resolves once the server's SETTINGS arrived. */
export async function connectH2(url: string, options: http2.SecureClientSessionOptions = {}): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url, options);
  session.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    session.once("remoteSettings", () => resolve());
    session.once("error", reject);
  });
  return session;
}

/** One request: headers, then `body` (if any) and END_STREAM. */
export function rawRequest(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Uint8Array): Promise<RawReply> {
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

const FRAME_DATA = 0x0;
const FRAME_HEADERS = 0x1;
const FRAME_RST_STREAM = 0x3;
const FRAME_SETTINGS = 0x4;
const FRAME_PING = 0x6;
const FLAG_END_STREAM = 0x1;
const FLAG_ACK = 0x1;
const FLAG_END_HEADERS = 0x4;

function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header.writeUInt8(type, 3);
  header.writeUInt8(flags, 4);
  header.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([header, payload]);
}

/** HPACK "literal header field without indexing, new name", no Huffman (RFC 7541 §6.2.2); names and values under 127 bytes. */
function hpackLiteral(name: string, value: string): Buffer {
  const n = Buffer.from(name, "latin1");
  const v = Buffer.from(value, "latin1");
  if (n.length > 126 || v.length > 126) throw new Error("hpackLiteral: header too long for this encoder");
  return Buffer.concat([Buffer.from([0x00, n.length]), n, Buffer.from([v.length]), v]);
}

/**
 * A hand-written HTTP/2 client connection over TCP: it sends exactly the
 * frames asked for, which node:http2 will not (its `close()` sends
 * END_STREAM before RST_STREAM). It acknowledges the server's SETTINGS and
 * PINGs and records every RST_STREAM and GOAWAY it receives.
 */
export class RawH2Connection {
  private nextStreamId = 1;
  private received: Buffer = Buffer.alloc(0);
  /** stream id -> RST_STREAM error code received from the server. */
  readonly resets = new Map<number, number>();
  /** stream id -> HEADERS frames received (a response began). */
  readonly responded = new Set<number>();
  goaway: number | undefined;
  readonly closed: Promise<void>;

  private constructor(readonly socket: import("node:net").Socket) {
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", () => {});
    this.closed = new Promise((resolve) => socket.once("close", () => resolve()));
  }

  static async open(url: string): Promise<RawH2Connection> {
    const { hostname, port } = new URL(url);
    const net = await import("node:net");
    const socket = net.connect({ host: hostname, port: Number(port) });
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", () => resolve());
      socket.once("error", reject);
    });
    const conn = new RawH2Connection(socket);
    socket.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"), frame(FRAME_SETTINGS, 0, 0)]));
    return conn;
  }

  /** Sends a request's HEADERS (END_STREAM only if `endStream`); returns its stream id. */
  headers(path: string, headers: Record<string, string>, endStream = false): number {
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    const block = Buffer.concat([
      hpackLiteral(":method", "POST"),
      hpackLiteral(":scheme", "http"),
      hpackLiteral(":path", path),
      hpackLiteral(":authority", "127.0.0.1"),
      ...Object.entries(headers).map(([k, v]) => hpackLiteral(k, v)),
    ]);
    this.socket.write(frame(FRAME_HEADERS, FLAG_END_HEADERS | (endStream ? FLAG_END_STREAM : 0), id, block));
    return id;
  }

  /** Sends one DATA frame on stream `id`. */
  data(id: number, payload: Buffer, endStream = false): void {
    this.socket.write(frame(FRAME_DATA, endStream ? FLAG_END_STREAM : 0, id, payload));
  }

  /** Sends RST_STREAM with `code` (default CANCEL). */
  reset(id: number, code = 0x8): void {
    const payload = Buffer.alloc(4);
    payload.writeUInt32BE(code, 0);
    this.socket.write(frame(FRAME_RST_STREAM, 0, id, payload));
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
    while (this.received.length >= 9) {
      const length = this.received.readUIntBE(0, 3);
      if (this.received.length < 9 + length) return;
      const type = this.received.readUInt8(3);
      const flags = this.received.readUInt8(4);
      const streamId = this.received.readUInt32BE(5) & 0x7fffffff;
      const payload = this.received.subarray(9, 9 + length);
      this.received = this.received.subarray(9 + length);
      if (type === FRAME_SETTINGS && (flags & FLAG_ACK) === 0) this.socket.write(frame(FRAME_SETTINGS, FLAG_ACK, 0));
      else if (type === FRAME_PING && (flags & FLAG_ACK) === 0) this.socket.write(frame(FRAME_PING, FLAG_ACK, 0, Buffer.from(payload)));
      else if (type === FRAME_RST_STREAM) this.resets.set(streamId, payload.readUInt32BE(0));
      else if (type === FRAME_HEADERS) this.responded.add(streamId);
      else if (type === 0x7) this.goaway = payload.readUInt32BE(4);
    }
  }
}
