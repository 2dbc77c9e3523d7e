/**
 * A TCP proxy in front of a database, for outage tests: the code under test
 * connects to the proxy, and the test takes the "database" away and back
 * without touching the real one (which other test files share).
 *
 * - `reset()`: every open connection is cut (as pg_terminate_backend or a
 *   restart of the database would), new ones are still accepted.
 * - `stop()`: connections cut and the port closed: connecting is refused
 *   (the database is down).
 * - `start()`: listening again on the same port.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  readonly port: number;
  reset(): void;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async () => {
    const s = createServer((client) => {
      const upstream = createConnection(target);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on("close", () => sockets.delete(socket));
        socket.on("error", () => {});
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => resolve());
    });
    port = (s.address() as { port: number }).port;
    server = s;
  };
  const reset = () => {
    for (const socket of sockets) socket.destroy();
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    reset();
    if (s !== undefined) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  await listen();
  return {
    get port() {
      return port;
    },
    reset,
    stop,
    start: listen,
    close: stop,
  };
}
