/**
 * The operations console's files on the API port: `/` and the bundle files by
 * exact name with strict security headers and the right caching; everything
 * else 404 (traversal attempts, the side port's paths); 503 with a hint when
 * the console was never built; works in production mode and over HTTP/2.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConsoleHandler, defaultConsoleDir } from "../../src/server/console-files.js";
import { loadSiteFiles, SITE_SECURITY_HEADERS } from "../../src/server/static-site.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

function expectSecurityHeaders(headers: Headers | http.IncomingHttpHeaders): void {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name]);
  expect(get("content-security-policy")).toMatch(/^default-src 'self'(;|$)/);
  expect(get("content-security-policy")).not.toMatch(/unsafe-/);
  expect(get("x-content-type-options")).toBe("nosniff");
  expect(get("x-frame-options")).toBe("DENY");
  expect(get("referrer-policy")).toBe("no-referrer");
}

/** A fake built console in a temp folder. */
function fakeConsole(): string {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-console-"));
  writeFileSync(join(dir, "index.html"), '<!doctype html><script type="module" src="app-ABCDEFGH.js"></script>');
  writeFileSync(join(dir, "app-ABCDEFGH.js"), "console.log('x');".repeat(200));
  writeFileSync(join(dir, "app-ABCDEFGH.js.map"), "{}");
  writeFileSync(join(dir, "favicon.svg"), "<svg/>");
  writeFileSync(join(dir, ".env"), "SECRET=1");
  writeFileSync(join(dir, "notes.md"), "not served");
  mkdirSync(join(dir, "sub"));
  writeFileSync(join(dir, "sub", "inner.js"), "nested");
  return dir;
}

/** Serves one handler on a free port over HTTP/1.1. */
async function serve(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe("console handler (fixture folder)", () => {
  let dir: string;
  let site: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    dir = fakeConsole();
    site = await serve(createConsoleHandler(dir));
  });
  afterAll(async () => {
    await site.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves index.html at / with no-cache and the security headers", async () => {
    const res = await fetch(`${site.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expectSecurityHeaders(res.headers);
    expect(await res.text()).toContain("app-ABCDEFGH.js");
  });

  it("serves hashed bundle files by exact name, cacheable forever", async () => {
    const js = await fetch(`${site.url}/app-ABCDEFGH.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expectSecurityHeaders(js.headers);
    const map = await fetch(`${site.url}/app-ABCDEFGH.js.map`);
    expect(map.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const icon = await fetch(`${site.url}/favicon.svg`);
    expect(icon.headers.get("content-type")).toBe("image/svg+xml");
    expect(icon.headers.get("cache-control")).toBe("no-cache");
  });

  it("compresses with gzip when asked, and revalidates by ETag", async () => {
    const raw = await new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      http
        .get(`${site.url}/app-ABCDEFGH.js`, { headers: { "accept-encoding": "gzip" } }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        })
        .on("error", reject);
    });
    expect(raw.headers["content-encoding"]).toBe("gzip");
    expect(raw.headers["vary"]).toBe("Accept-Encoding");
    expect(gunzipSync(raw.body).toString()).toBe("console.log('x');".repeat(200));

    const first = await fetch(`${site.url}/`);
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^".+"$/);
    const again = await fetch(`${site.url}/`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expectSecurityHeaders(again.headers);
  });

  it("answers HEAD without a body and refuses other methods", async () => {
    const head = await fetch(`${site.url}/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get("content-length"))).toBeGreaterThan(0);
    expect(await head.text()).toBe("");
    const post = await fetch(`${site.url}/`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
  });

  it.each([
    "/.env",
    "/notes.md",
    "/sub/inner.js",
    "/sub%2finner.js",
    "/../package.json",
    "/%2e%2e/package.json",
    "/app-ABCDEFGH.js/",
    "//app-ABCDEFGH.js",
    "/index.html/..",
    "/metrics",
    "/health/ready",
  ])("answers 404 for %s", async (path) => {
    // fetch() would normalize dot segments; send the path as is.
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get({ host: "127.0.0.1", port: Number(new URL(site.url).port), path }, resolve).on("error", reject);
    });
    res.resume();
    expect(res.statusCode).toBe(404);
    expectSecurityHeaders(res.headers);
  });

  it("serves only what was there at startup", async () => {
    writeFileSync(join(dir, "late.js"), "added after start");
    expect((await fetch(`${site.url}/late.js`)).status).toBe(404);
  });
});

describe("console handler without a built console", () => {
  it("answers 503 at / with a hint to build, 404 elsewhere, and reports it once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-noconsole-"));
    const missing: string[] = [];
    const site = await serve(createConsoleHandler(join(dir, "console"), { onMissing: (d) => missing.push(d) }));
    try {
      expect(missing).toEqual([join(dir, "console")]);
      const res = await fetch(`${site.url}/`);
      expect(res.status).toBe(503);
      expect(await res.text()).toContain("npm run build");
      expectSecurityHeaders(res.headers);
      expect((await fetch(`${site.url}/app.js`)).status).toBe(404);
    } finally {
      await site.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("treats a folder without index.html as not built", () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-noindex-"));
    writeFileSync(join(dir, "app.js"), "x");
    try {
      expect(loadSiteFiles(dir)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("console on the API port (built by npm run build)", () => {
  let t: TestServer;
  const built = loadSiteFiles(defaultConsoleDir()) !== undefined;

  beforeAll(async () => {
    t = await startTestServer({ environment: "production" });
  });
  afterAll(async () => {
    await t?.close();
  });

  it.skipIf(!built && process.env.CI !== "true")("serves the console in production mode, over HTTP/1.1 and HTTP/2", async () => {
    const res = await fetch(`${t.apiUrl}/`);
    expect(res.status).toBe(200);
    expectSecurityHeaders(res.headers);
    const html = await res.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.some((a) => /^app-[A-Z0-9]{8}\.js$/.test(a))).toBe(true);
    expect(assets.some((a) => /^app-[A-Z0-9]{8}\.css$/.test(a))).toBe(true);
    for (const asset of assets) {
      const r = await fetch(`${t.apiUrl}/${asset}`);
      expect(r.status, asset).toBe(200);
      expectSecurityHeaders(r.headers);
    }
    // No inline script or style in the page (the CSP would block them).
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=/);

    const session = http2.connect(t.apiUrl);
    try {
      const { status, headers } = await new Promise<{ status: number; headers: http2.IncomingHttpHeaders }>((resolve, reject) => {
        const stream = session.request({ ":path": "/", ":method": "GET" });
        stream.on("response", (h) => {
          stream.resume();
          stream.on("end", () => resolve({ status: Number(h[":status"]), headers: h }));
        });
        stream.on("error", reject);
        stream.end();
      });
      expect(status).toBe(200);
      expect(headers["content-security-policy"]).toBe(SITE_SECURITY_HEADERS["content-security-policy"]);
      expect(headers["x-frame-options"]).toBe("DENY");
    } finally {
      session.close();
    }
  });

  it("keeps the side port's paths and unknown paths 404, and RPCs working", async () => {
    for (const path of ["/metrics", "/health/live", "/health/ready", "/leasequeue.v1.LeaseQueueService/NoSuchMethod"]) {
      const res = await fetch(
        `${t.apiUrl}${path}`,
        path.includes("Service") ? { method: "POST", headers: { "content-type": "application/json" }, body: "{}" } : {},
      );
      expect(res.status, path).toBe(404);
    }
    const stats = await t.call("GetStats", {});
    expect(stats.status).toBe(200);
  });
});
