/**
 * Binding a port and reading back where it is, for both listeners (API and
 * side). The address is what the server logs: a caller that asked for port
 * 0 finds the real port there (docs/configuration.md, LEASEQUEUE_PORT).
 */
import type * as net from "node:net";

export interface BoundAddress {
  /** The bound interface, e.g. "127.0.0.1" or "::1". */
  host: string;
  port: number;
  /** e.g. http://127.0.0.1:8080, or http://[::1]:8080. */
  url: string;
}

export interface ListenOptions {
  host: string;
  /** 0 picks any free port. */
  port: number;
  /** The URL scheme of the address. */
  scheme: "http" | "https";
  /** Errors after the port is bound (e.g. a failed accept()). Default: ignored. */
  onError?: (error: Error) => void;
}

/**
 * Binds `server` and resolves with its real address. A failed bind (port in
 * use, no such interface) rejects, after closing the server so that nothing
 * it started (an HTTP server's timeout checks) keeps the process alive.
 */
export async function listen(server: net.Server, opts: ListenOptions): Promise<BoundAddress> {
  await new Promise<void>((resolve, reject) => {
    const fail = (error: Error): void => {
      server.close();
      reject(error);
    };
    server.once("error", fail);
    server.listen({ host: opts.host, port: opts.port }, () => {
      server.off("error", fail);
      resolve();
    });
  });
  const onError = opts.onError ?? (() => {});
  server.on("error", (error) => onError(error));
  return boundAddress(server, opts.scheme);
}

function boundAddress(server: net.Server, scheme: "http" | "https"): BoundAddress {
  const bound = server.address() as net.AddressInfo;
  const hostInUrl = bound.address.includes(":") ? `[${bound.address}]` : bound.address;
  return Object.freeze({ host: bound.address, port: bound.port, url: `${scheme}://${hostInUrl}:${bound.port}` });
}
