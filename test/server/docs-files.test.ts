/**
 * The API reference's files at `/docs` on the API port: the page at `/docs`
 * and `/docs/`, its files by exact name under `/docs/`, with the console's
 * security headers and caching rules; 404 under `/docs` when it is off (the
 * default in production) and on again with LEASEQUEUE_DOCS=on; 503 with a
 * hint when it was never built; every other path still reaches the console.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConsoleHandler } from "../../src/server/console-files.js";
import { defaultDocsDir, withApiReference } from "../../src/server/docs-files.js";
import { loadSiteFiles, SITE_SECURITY_HEADERS } from "../../src/server/static-site.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

function expectSecurityHeaders(headers: Headers | http.IncomingHttpHeaders): void {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name]);
  for (const [name, value] of Object.entries(SITE_SECURITY_HEADERS)) expect(get(name), name).toBe(value);
  expect(get("content-security-policy")).toMatch(/^default-src 'self'(;|$)/);
  expect(get("content-security-policy")).not.toMatch(/unsafe-/);
}

/** A fake console and a fake reference in temp folders. */
function fakeSites(): { root: string; console: string; docs: string } {
  const root = mkdtempSync(join(tmpdir(), "leasequeue-docs-"));
  const console = join(root, "console");
  const docs = join(root, "docs");
  mkdirSync(console);
  mkdirSync(docs);
  writeFileSync(join(console, "index.html"), "<!doctype html><title>console</title>");
  writeFileSync(
    join(docs, "index.html"),
    '<!doctype html><title>reference</title><script type="module" src="/docs/app-ABCDEFGH.js"></script>',
  );
  writeFileSync(join(docs, "app-ABCDEFGH.js"), "console.log('docs');");
  writeFileSync(join(docs, "reference.json"), JSON.stringify({ services: [] }));
  writeFileSync(join(docs, ".hidden"), "x");
  return { root, console, docs };
}

async function serve(handler: http.RequestListener): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** GET with the path sent as is (fetch would normalize dot segments). */
function rawGet(port: number, path: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      })
      .on("error", reject);
  });
}

describe("API reference handler (fixture folders)", () => {
  let dirs: ReturnType<typeof fakeSites>;
  let on: Awaited<ReturnType<typeof serve>>;
  let off: Awaited<ReturnType<typeof serve>>;

  beforeAll(async () => {
    dirs = fakeSites();
    const consoleHandler = createConsoleHandler(dirs.console);
    on = await serve(withApiReference(consoleHandler, { enabled: true, dir: dirs.docs }));
    off = await serve(withApiReference(consoleHandler, { enabled: false, dir: dirs.docs }));
  });
  afterAll(async () => {
    await on.close();
    await off.close();
    rmSync(dirs.root, { recursive: true, force: true });
  });

  it.each(["/docs", "/docs/", "/docs/index.html", "/docs?x=1"])(
    "serves the page at %s, no-cache, with the security headers",
    async (path) => {
      const res = await rawGet(on.port, path);
      expect(res.status).toBe(200);
      expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(res.headers["cache-control"]).toBe("no-cache");
      expectSecurityHeaders(res.headers);
      expect(res.body).toContain("<title>reference</title>");
    },
  );

  it("serves the bundle by its hashed name for a year and reference.json revalidated", async () => {
    const js = await fetch(`${on.url}/docs/app-ABCDEFGH.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expectSecurityHeaders(js.headers);
    const reference = await fetch(`${on.url}/docs/reference.json`);
    expect(reference.status).toBe(200);
    expect(reference.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(reference.headers.get("cache-control")).toBe("no-cache");
    expect(await reference.json()).toEqual({ services: [] });
  });

  it.each([
    "/docs/.hidden",
    "/docs/../index.html",
    "/docs/sub/app-ABCDEFGH.js",
    "/docs//app-ABCDEFGH.js",
    "/docs/app-ABCDEFGH.js/",
    "/docs/metrics",
  ])("answers 404 for %s", async (path) => {
    const res = await rawGet(on.port, path);
    expect(res.status).toBe(404);
    expectSecurityHeaders(res.headers);
  });

  it("leaves every other path to the console", async () => {
    expect((await rawGet(on.port, "/")).body).toContain("<title>console</title>");
    expect((await rawGet(on.port, "/docsx")).status).toBe(404);
    // The reference's files are not the console's.
    expect((await rawGet(on.port, "/app-ABCDEFGH.js")).status).toBe(404);
    expect((await rawGet(off.port, "/")).body).toContain("<title>console</title>");
  });

  it("answers 404 under /docs when off, saying how to turn it on", async () => {
    for (const path of ["/docs", "/docs/", "/docs/app-ABCDEFGH.js", "/docs/reference.json"]) {
      const res = await rawGet(off.port, path);
      expect(res.status, path).toBe(404);
      expect(res.body, path).toContain("LEASEQUEUE_DOCS=on");
      expectSecurityHeaders(res.headers);
    }
  });

  it("answers 503 at /docs with a hint to build when it is on but not built, and reports it once", async () => {
    const missing: string[] = [];
    const site = await serve(
      withApiReference(createConsoleHandler(dirs.console), {
        enabled: true,
        dir: join(dirs.root, "nothing"),
        onMissing: (d) => missing.push(d),
      }),
    );
    try {
      expect(missing).toEqual([join(dirs.root, "nothing")]);
      const res = await rawGet(site.port, "/docs");
      expect(res.status).toBe(503);
      expect(res.body).toContain("npm run build");
      expectSecurityHeaders(res.headers);
      expect((await rawGet(site.port, "/docs/app.js")).status).toBe(404);
    } finally {
      await site.close();
    }
  });
});

describe("API reference on the API port (built by npm run build)", () => {
  const built = loadSiteFiles(defaultDocsDir()) !== undefined;
  let dev: TestServer;
  let production: TestServer;
  let productionOn: TestServer;

  beforeAll(async () => {
    dev = await startTestServer();
    production = await startTestServer({ environment: "production" });
    productionOn = await startTestServer({ environment: "production", docs: "on" });
  });
  afterAll(async () => {
    await dev?.close();
    await production?.close();
    await productionOn?.close();
  });

  it.skipIf(!built && process.env.CI !== "true")(
    "serves /docs outside production, and in production only with LEASEQUEUE_DOCS=on",
    async () => {
      for (const t of [dev, productionOn]) {
        const res = await fetch(`${t.apiUrl}/docs`);
        expect(res.status).toBe(200);
        expectSecurityHeaders(res.headers);
        const html = await res.text();
        // The page's own files, by absolute path under /docs/, and nothing inline.
        const assets = [...html.matchAll(/(?:src|href|content)="(\/[^"]*)"/g)].map((m) => m[1]);
        expect(assets.some((a) => /^\/docs\/app-[A-Z0-9]{8}\.js$/.test(a))).toBe(true);
        expect(assets.some((a) => /^\/docs\/app-[A-Z0-9]{8}\.css$/.test(a))).toBe(true);
        for (const asset of assets) expect((await fetch(`${t.apiUrl}${asset}`)).status, asset).toBe(200);
        expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
        expect(html).not.toMatch(/<style|\sstyle=/);
        expect(html).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
        expect((await fetch(`${t.apiUrl}/docs/reference.json`)).status).toBe(200);
      }
      const off = await fetch(`${production.apiUrl}/docs`);
      expect(off.status).toBe(404);
      expectSecurityHeaders(off.headers);
      expect((await fetch(`${production.apiUrl}/docs/reference.json`)).status).toBe(404);
      // The console itself is served in production either way.
      expect((await fetch(`${production.apiUrl}/`)).status).toBe(200);
    },
  );
});
