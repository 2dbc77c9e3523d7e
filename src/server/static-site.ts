/**
 * Serves a built browser page (the operations console at `/`, the API
 * reference at `/docs`) from a folder of files, as connectNodeAdapter's
 * `fallback`: whatever is not an RPC comes here.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, extname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";

/** Sent with every response of a site handler, 404s and 503s included. */
export const SITE_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  // Scripts, styles, fetches (Connect calls), images and fonts: this origin
  // only; no inline script or style, no eval, no plugins, no framing.
  "content-security-policy": "default-src 'self'; base-uri 'none'; object-src 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
});

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".txt": "text/plain; charset=utf-8",
};

/** esbuild's `[name]-[hash]` output names: content-addressed, so cacheable forever. */
const HASHED_NAME = /^[A-Za-z0-9_.]+-[A-Z0-9]{8}\.(?:js|css)(?:\.map)?$/;
/** Only plain names are ever served (no dot files, no odd characters). */
const SERVABLE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

export interface SiteFile {
  body: Buffer;
  /** Present when gzip makes the body smaller. */
  gzip?: Buffer;
  contentType: string;
  cacheControl: string;
  etag: string;
}

export interface SiteHandlerOptions {
  /** Where the site answers: `/` (default), or a prefix such as `/docs` (its index answers at `/docs` and `/docs/`). */
  basePath?: string;
  /** The 503's text at the index when `dir` holds no built site. */
  notBuiltText: string;
  /** Called once at creation when `dir` holds no built site (no index.html). */
  onMissing?: (dir: string) => void;
}

/**
 * `<package root>/dist/<name>`, whether this module runs compiled
 * (`dist/src/server/`) or from source (`src/server/`, tests).
 */
export function packageDistDir(name: string): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const compiled = here.endsWith(`${sep}dist${sep}src${sep}server`);
  const root = resolve(here, compiled ? "../../.." : "../..");
  return join(root, "dist", name);
}

/** Reads a site's files once; undefined when it is not built. */
export function loadSiteFiles(dir: string): Map<string, SiteFile> | undefined {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return undefined;
  }
  const files = new Map<string, SiteFile>();
  for (const entry of entries) {
    const contentType = CONTENT_TYPES[extname(entry.name)];
    if (!entry.isFile() || contentType === undefined || !SERVABLE_NAME.test(entry.name)) continue;
    const body = readFileSync(join(dir, entry.name));
    const compressible = contentType.startsWith("text/") || contentType.startsWith("application/json") || contentType === "image/svg+xml";
    const gzip = compressible ? gzipSync(body, { level: 9 }) : undefined;
    files.set(entry.name, {
      body,
      gzip: gzip !== undefined && gzip.length < body.length ? gzip : undefined,
      contentType,
      cacheControl: HASHED_NAME.test(entry.name) ? "public, max-age=31536000, immutable" : "no-cache",
      etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`,
    });
  }
  return files.has("index.html") ? files : undefined;
}

/** The request's path, without its query. */
export function requestPath(url: string | undefined): string {
  const u = url ?? "/";
  const query = u.indexOf("?");
  return query === -1 ? u : u.slice(0, query);
}

/** The file a path names under `basePath` ("index.html" for the base itself); undefined for any other path. */
function fileNameOf(path: string, basePath: string): string | undefined {
  if (basePath === "/") return path === "/" ? "index.html" : path.startsWith("/") ? path.slice(1) : undefined;
  if (path === basePath || path === `${basePath}/`) return "index.html";
  return path.startsWith(`${basePath}/`) ? path.slice(basePath.length + 1) : undefined;
}

/**
 * The handler that serves the site in `dir`:
 * - The page's `index.html` answers at the site's base path; the other files
 *   by their exact name under it. The allow-list is the set of regular files
 *   in the folder when the server starts, read into memory then: no path is
 *   ever joined to a file system path, so there is no traversal to guard
 *   against.
 * - Every response carries strict security headers (CSP `default-src 'self'`,
 *   nosniff, DENY framing, no referrer).
 * - index.html and the other unhashed files are `no-cache` (revalidated by
 *   ETag); `name-HASH.ext` files are immutable for a year.
 * - Anything else is 404 (so /metrics and /health/* stay 404 on this port).
 * - Without a built page (tsc only), the index is 503 saying to run
 *   `npm run build`.
 */
export function createSiteHandler(dir: string, options: SiteHandlerOptions): NodeHandlerFn {
  const basePath = options.basePath ?? "/";
  const files = loadSiteFiles(dir);
  if (files === undefined) options.onMissing?.(dir);

  return (req, res) => {
    const name = fileNameOf(requestPath(req.url), basePath);
    const file = name === undefined || name.includes("/") ? undefined : files?.get(name);

    if (file === undefined) {
      if (files === undefined && name === "index.html") {
        sendText(res, 503, options.notBuiltText);
      } else {
        sendText(res, 404, "Not found\n");
      }
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendText(res, 405, "Method not allowed\n", { allow: "GET, HEAD" });
      return;
    }
    sendFile(req, res, file);
  };
}

function sendFile(req: Request, res: Response, file: SiteFile): void {
  const gzip = file.gzip !== undefined && acceptsGzip(req) ? file.gzip : undefined;
  const etag = gzip === undefined ? file.etag : `${file.etag.slice(0, -1)}-gz"`;
  const headers: Record<string, string> = {
    ...SITE_SECURITY_HEADERS,
    "content-type": file.contentType,
    "cache-control": file.cacheControl,
    etag,
  };
  if (file.gzip !== undefined) headers["vary"] = "Accept-Encoding";
  if (matchesEtag(req.headers["if-none-match"], etag)) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  const body = gzip ?? file.body;
  if (gzip !== undefined) headers["content-encoding"] = "gzip";
  headers["content-length"] = String(body.length);
  res.writeHead(200, headers);
  if (req.method === "HEAD") res.end();
  else res.end(body);
}

/** connect-node's handler type (HTTP/1.1 and HTTP/2 alike); the package does not export its name. */
export type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions["fallback"]>;
type Request = Parameters<NodeHandlerFn>[0];
type Response = Parameters<NodeHandlerFn>[1];

/** A plain-text answer (404, 405, 503) with the security headers, never cached. */
export function sendText(res: Response, status: number, text: string, extra: Record<string, string> = {}): void {
  const body = Buffer.from(text, "utf8");
  res.writeHead(status, {
    ...SITE_SECURITY_HEADERS,
    "content-type": "text/plain; charset=utf-8",
    "cache-control": "no-store",
    "content-length": String(body.length),
    ...extra,
  });
  res.end(body);
}

function acceptsGzip(req: Request): boolean {
  const header = req.headers["accept-encoding"];
  if (typeof header !== "string") return false;
  return header.split(",").some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(";");
    if (coding !== "gzip") return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

function matchesEtag(header: string | string[] | undefined, etag: string): boolean {
  if (typeof header !== "string") return false;
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t === etag || t === `W/${etag}`;
  });
}
