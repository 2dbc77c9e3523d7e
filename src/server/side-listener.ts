import * as http from "node:http";
import { listen, type BoundAddress } from "./listen.js";

/**
 * The side port's HTTP timeouts (docs/api.md "Side port"): a scrape or a
 * probe is one small GET, so its request must arrive whole within 10 s,
 * and an idle keep-alive connection is closed after 5 s (a scraper comes
 * back every few seconds at most; one that does not opens a new one).
 */
export const SIDE_PORT_TIMEOUTS = { headersTimeout: 10_000, requestTimeout: 10_000, keepAliveTimeout: 5_000 } as const;

/** How long close() lets requests in flight on the side port finish before cutting them (docs/api.md "Side port"). */
export const SIDE_PORT_CLOSE_GRACE_MS = 5_000;

export interface SideListenerOptions {
  /** Interface to bind, e.g. "127.0.0.1". */
  host: string;
  /** Port to bind; 0 picks any free port. */
  port: number;
  /** Renders the metrics exposition (Prometheus text format) for `GET /metrics`. */
  metrics: () => Promise<{ contentType: string; body: string }>;
  /** true once the database is open, migrated and writable */
  ready: () => Promise<boolean>;
}

export interface SideListener {
  /** Real bound address, url like http://127.0.0.1:9464. */
  readonly address: BoundAddress;
  /** Stop accepting, let in-flight requests finish up to `graceMs` (default SIDE_PORT_CLOSE_GRACE_MS), then cut the rest. */
  close(graceMs?: number): Promise<void>;
}

interface SideResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const ALLOWED_METHODS = "GET, HEAD";

/**
 * Starts the side port (plain HTTP/1.1) for Prometheus and probes:
 * `GET /metrics`, `GET /health/live` (200 while the process runs) and
 * `GET /health/ready` (200 once `ready()` says so, 503 otherwise), plus HEAD of
 * each. Any other path is 404 and any other method 405. It serves nothing else,
 * so it can be exposed to a scraper without exposing the API.
 */
export async function startSideListener(opts: SideListenerOptions): Promise<SideListener> {
  const server = http.createServer({ ...SIDE_PORT_TIMEOUTS }, (req, res) => {
    void answer(req, opts).then(
      (reply) => send(req, res, reply),
      (error: unknown) => send(req, res, json(500, { status: "error", reason: describe(error) })),
    );
  });

  // No onError: accept errors after the bind need nothing on a probe port.
  const address = await listen(server, { host: opts.host, port: opts.port, scheme: "http" });

  let closed: Promise<void> | undefined;
  const close = (graceMs = SIDE_PORT_CLOSE_GRACE_MS): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      const deadline = setTimeout(() => server.closeAllConnections(), graceMs);
      // Node's close() also closes idle keep-alive connections.
      server.close(() => {
        clearTimeout(deadline);
        resolve();
      });
    });
    return closed;
  };

  return { address, close };
}

async function answer(req: http.IncomingMessage, opts: SideListenerOptions): Promise<SideResponse> {
  const path = (req.url ?? "/").split("?", 1)[0];
  const route = routes.get(path);
  if (route === undefined) return json(404, { status: "not_found", reason: `no such path: ${path}` });
  if (req.method !== "GET" && req.method !== "HEAD") {
    const reply = json(405, { status: "method_not_allowed", reason: `${req.method} is not allowed; use GET or HEAD` });
    reply.headers.allow = ALLOWED_METHODS;
    return reply;
  }
  return route(opts);
}

const routes = new Map<string, (opts: SideListenerOptions) => Promise<SideResponse>>([
  [
    "/metrics",
    async (opts) => {
      const { contentType, body } = await opts.metrics();
      return { status: 200, headers: { "content-type": contentType }, body };
    },
  ],
  ["/health/live", () => Promise.resolve(json(200, { status: "live" }))],
  [
    "/health/ready",
    async (opts) => {
      let ready: boolean;
      try {
        ready = await opts.ready();
      } catch (error) {
        return json(503, { status: "not_ready", reason: `readiness check failed: ${describe(error)}` });
      }
      return ready
        ? json(200, { status: "ready" })
        : json(503, { status: "not_ready", reason: "the database is not open, migrated and writable yet" });
    },
  ],
]);

function json(status: number, value: Record<string, string>): SideResponse {
  return { status, headers: { "content-type": "application/json" }, body: JSON.stringify(value) + "\n" };
}

function send(req: http.IncomingMessage, res: http.ServerResponse, reply: SideResponse): void {
  const body = Buffer.from(reply.body, "utf8");
  res.writeHead(reply.status, {
    ...reply.headers,
    "content-length": String(body.length),
    "cache-control": "no-store",
  });
  res.end(req.method === "HEAD" ? undefined : body);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
