/**
 * The composition's start and stop (src/app.ts): a start that fails part way
 * gives back what it took, and a stopped server leaves nothing behind.
 */
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../src/app.js";
import { resolveConfig } from "../src/config/config.js";
import { silentLogger } from "../src/testing/index.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Listens on a free port of 127.0.0.1; the server stays open until the test ends. */
async function takenPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

/** A port that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function databaseDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-app-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe("startServer", () => {
  it("refuses to start when the metrics port is taken, closing the API port and giving the database back", async () => {
    const db = join(databaseDir(), "jobs.db");
    const apiPort = await freePort();
    const config = resolveConfig({ db, port: String(apiPort), "metrics-port": String(await takenPort()) }, {});
    await expect(startServer(config, { log: silentLogger, databaseHoldWaitMs: 0 })).rejects.toMatchObject({ code: "EADDRINUSE" });

    // The API port is free again, and the next server opens the same database at once.
    const again = await startServer(resolveConfig({ db, port: String(apiPort), "metrics-port": "0" }, {}), {
      log: silentLogger,
      databaseHoldWaitMs: 0,
    });
    cleanups.push(() => again.close());
    expect(again.apiUrl).toBe(`http://127.0.0.1:${apiPort}`);
  });

  it("closes both ports and the database when stopped", async () => {
    const db = join(databaseDir(), "jobs.db");
    const server = await startServer(resolveConfig({ db, port: "0", "metrics-port": "0" }, {}), { log: silentLogger });
    const { apiUrl, metricsUrl } = server;
    expect((await fetch(`${metricsUrl}/health/ready`)).status).toBe(200);
    await server.close();
    await expect(fetch(`${apiUrl}/`)).rejects.toThrow();
    await expect(fetch(`${metricsUrl}/health/live`)).rejects.toThrow();
    const next = await startServer(resolveConfig({ db, port: "0", "metrics-port": "0" }, {}), { log: silentLogger, databaseHoldWaitMs: 0 });
    await next.close();
  });
});
