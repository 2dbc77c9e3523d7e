/**
 * WatchEvents subscribers that read their response headers and then never
 * read again, the way a stuck or hostile client behaves, for the hostile
 * tests. Each resolves once the server has registered it (headers seen) and
 * returns a function that closes it.
 */
import http2 from "node:http2";
import net from "node:net";

const WATCH_PATH = "/leasequeue.v1.LeaseQueueService/WatchEvents";

/**
 * A raw gRPC stream over its own HTTP/2 session whose flow-control window is
 * never reopened; `request` is the WatchEventsRequest in binary (default:
 * empty, a live watch).
 */
export async function openHttp2NonReader(apiUrl: string, request: Uint8Array = new Uint8Array()): Promise<() => void> {
  const session = http2.connect(apiUrl);
  session.on("error", () => {});
  const stream = session.request({ ":method": "POST", ":path": WATCH_PATH, "content-type": "application/grpc+proto", te: "trailers" });
  stream.on("error", () => {});
  const frame = Buffer.alloc(5 + request.length);
  frame.writeUInt32BE(request.length, 1);
  frame.set(request, 5);
  stream.end(frame);
  await new Promise<void>((resolve, reject) => {
    stream.once("response", () => resolve());
    stream.once("error", reject);
  });
  stream.pause();
  return () => session.destroy();
}

/** A Connect JSON stream over HTTP/1.1 whose TCP socket is never read after the first bytes of the response. */
export async function openHttp1NonReader(apiUrl: string): Promise<() => void> {
  const { hostname, port } = new URL(apiUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  socket.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", () => resolve());
    socket.once("error", reject);
  });
  const body = Buffer.concat([Buffer.from([0, 0, 0, 0, 2]), Buffer.from("{}")]);
  socket.write(
    `POST ${WATCH_PATH} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/connect+json\r\n` +
      `Connect-Protocol-Version: 1\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  socket.write(body);
  const first = await new Promise<Buffer>((resolve, reject) => {
    socket.once("data", resolve);
    socket.once("error", reject);
  });
  socket.pause();
  if (!first.toString("latin1").startsWith("HTTP/1.1 200")) {
    socket.destroy();
    throw new Error(`WatchEvents over HTTP/1.1 answered ${first.toString("latin1").split("\r\n", 1)[0]}`);
  }
  return () => socket.destroy();
}
