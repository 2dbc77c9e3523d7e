/**
 * One cleartext port for HTTP/2 (h2c with prior knowledge, as gRPC clients
 * speak it) and HTTP/1.1: `http2.createServer` cannot do this alone, since
 * its `allowHTTP1` works only with TLS. Each connection's first bytes are
 * compared with the HTTP/2 client preface and the socket is handed to the
 * server of its protocol.
 */
import type * as net from "node:net";

/** RFC 9113 §3.4: every HTTP/2 connection starts with these 24 octets. */
const HTTP2_CLIENT_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export type SniffedProtocol = "h2" | "http/1.1";

/**
 * Looks at the first bytes of a cleartext connection: "h2" once they are the
 * whole HTTP/2 client preface, "http/1.1" as soon as they stop matching it,
 * undefined while they are a proper prefix of it (wait for more).
 */
export function sniffProtocol(firstBytes: Uint8Array): SniffedProtocol | undefined {
  const n = Math.min(firstBytes.length, HTTP2_CLIENT_PREFACE.length);
  for (let i = 0; i < n; i++) {
    if (firstBytes[i] !== HTTP2_CLIENT_PREFACE[i]) return "http/1.1";
  }
  return n === HTTP2_CLIENT_PREFACE.length ? "h2" : undefined;
}

/** Where a sniffed connection goes: the servers that take sockets by `emit("connection", socket)`. */
export interface SniffTargets {
  h1: net.Server;
  h2: net.Server;
}

/**
 * Reads `socket` until its protocol is known, then hands it over with the
 * bytes read so far put back. A socket that sends nothing for `timeoutMs`
 * before that is destroyed. `onDecided` runs just before the hand-over.
 */
export function sniffConnection(socket: net.Socket, timeoutMs: number, targets: SniffTargets, onDecided: () => void): void {
  const dropSilent = (): void => {
    socket.destroy();
  };
  socket.setTimeout(timeoutMs);
  socket.once("timeout", dropSilent);
  let seen: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const protocol = sniffProtocol(seen);
    if (protocol === undefined) return;
    socket.off("data", onData);
    socket.off("timeout", dropSilent);
    onDecided();
    handOver(socket, seen, protocol, targets);
  };
  socket.on("data", onData);
}

function handOver(socket: net.Socket, firstBytes: Buffer, protocol: SniffedProtocol, targets: SniffTargets): void {
  socket.setTimeout(0);
  // We are inside a 'data' emission: while the socket flows, the stream's
  // flow loop would re-emit the bytes we put back to nobody. Pause first.
  socket.pause();
  socket.unshift(firstBytes);
  if (protocol === "h2") {
    // Node's HTTP/2 session drains the socket's buffer itself on its next
    // tick and then reads the handle natively: it must stay paused, or a
    // flowing socket could emit those bytes elsewhere first.
    targets.h2.emit("connection", socket);
  } else {
    // Node's HTTP/1.1 server reads buffered bytes through 'data' events
    // and starts reading the handle on 'resume'.
    targets.h1.emit("connection", socket);
    process.nextTick(() => socket.resume());
  }
}
