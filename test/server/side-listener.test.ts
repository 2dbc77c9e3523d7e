import { afterEach, describe, expect, it } from "vitest";
import { startSideListener, type SideListener, type SideListenerOptions } from "../../src/server/side-listener.js";

const METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8";
const METRICS_BODY = "# HELP leasequeue_up 1 while the server runs\n# TYPE leasequeue_up gauge\nleasequeue_up 1\n";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function listen(overrides: Partial<SideListenerOptions> = {}): Promise<SideListener> {
  const listener = await startSideListener({
    host: "127.0.0.1",
    port: 0,
    metrics: () => Promise.resolve({ contentType: METRICS_TYPE, body: METRICS_BODY }),
    ready: () => Promise.resolve(true),
    ...overrides,
  });
  cleanups.push(() => listener.close(0));
  return listener;
}

describe("side listener", () => {
  it("reports its real address when asked for port 0", async () => {
    const listener = await listen();
    expect(listener.address.port).toBeGreaterThan(0);
    expect(listener.address.url).toBe(`http://127.0.0.1:${listener.address.port}`);
  });

  it("rejects when the port is taken", async () => {
    const first = await listen();
    await expect(
      startSideListener({
        host: "127.0.0.1",
        port: first.address.port,
        metrics: () => Promise.resolve({ contentType: "", body: "" }),
        ready: () => Promise.resolve(true),
      }),
    ).rejects.toMatchObject({ code: "EADDRINUSE" });
  });

  it("serves the metrics exposition with its own content type", async () => {
    const listener = await listen();
    const res = await fetch(`${listener.address.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(METRICS_TYPE);
    expect(await res.text()).toBe(METRICS_BODY);
  });

  it("answers 500 when the metrics cannot be rendered", async () => {
    const listener = await listen({
      metrics: () => Promise.reject(new Error("registry broken")),
    });
    const res = await fetch(`${listener.address.url}/metrics`);
    expect(res.status).toBe(500);
    expect(await res.json()).toMatchObject({ reason: "registry broken" });
  });

  it("says live while the process runs, even when not ready", async () => {
    const listener = await listen({ ready: () => Promise.resolve(false) });
    const res = await fetch(`${listener.address.url}/health/live`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({ status: "live" });
  });

  it("says ready (200) once ready() is true", async () => {
    const listener = await listen({ ready: () => Promise.resolve(true) });
    const res = await fetch(`${listener.address.url}/health/ready`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ready" });
  });

  it("says not ready (503) while ready() is false, and says why", async () => {
    const listener = await listen({ ready: () => Promise.resolve(false) });
    const res = await fetch(`${listener.address.url}/health/ready`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      status: "not_ready",
      reason: "the database is not open, migrated and writable yet",
    });
  });

  it("says not ready (503) when ready() throws, with the error", async () => {
    const listener = await listen({
      ready: () => Promise.reject(new Error("SQLITE_READONLY: attempt to write a readonly database")),
    });
    const res = await fetch(`${listener.address.url}/health/ready`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      status: "not_ready",
      reason: "readiness check failed: SQLITE_READONLY: attempt to write a readonly database",
    });
  });

  it("follows ready() as it changes", async () => {
    let ready = false;
    const listener = await listen({ ready: () => Promise.resolve(ready) });
    expect((await fetch(`${listener.address.url}/health/ready`)).status).toBe(503);
    ready = true;
    expect((await fetch(`${listener.address.url}/health/ready`)).status).toBe(200);
  });

  it("ignores a query string", async () => {
    const listener = await listen();
    expect((await fetch(`${listener.address.url}/health/live?probe=k8s`)).status).toBe(200);
  });

  it.each(["/metrics", "/health/live", "/health/ready"])("answers HEAD %s with the GET headers and no body", async (path) => {
    const listener = await listen();
    const get = await fetch(listener.address.url + path);
    const getBody = await get.arrayBuffer();
    const head = await fetch(listener.address.url + path, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
    expect(head.headers.get("content-length")).toBe(String(getBody.byteLength));
    expect((await head.arrayBuffer()).byteLength).toBe(0);
  });

  it.each(["/", "/health", "/metrics/", "/grpc.health.v1.Health/Check", "/__proto__", "/constructor"])(
    "answers 404 for %s",
    async (path) => {
      const listener = await listen();
      const res = await fetch(listener.address.url + path);
      expect(res.status).toBe(404);
      await res.arrayBuffer();
    },
  );

  it.each(["POST", "PUT", "DELETE", "OPTIONS"])("answers 405 with an Allow header to %s", async (method) => {
    const listener = await listen();
    const res = await fetch(`${listener.address.url}/health/ready`, { method });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    await res.arrayBuffer();
  });

  it("closes promptly with idle keep-alive connections open", async () => {
    const listener = await listen();
    await (await fetch(`${listener.address.url}/health/live`)).arrayBuffer(); // leaves a keep-alive connection
    // Its grace outlasts the test's time limit: a close that waited it out would fail the test, whatever the machine's pace.
    await listener.close(10 * 60_000);
  });
});
