/**
 * The composition's start and stop (src/app.ts): a start that fails part way
 * gives back what it took, and a stopped server leaves nothing behind.
 */
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { recordSqlOnThisThread } from "./helpers/sql-on-this-thread.js";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../src/app.js";
import { resolveConfig } from "../src/config.js";
import { silentLogger } from "../src/logger.js";
import { systemClock } from "../src/domain/clock.js";
import { openSqliteStore } from "../src/store/sqlite/sqlite-store.js";
import type { ThreadedSqliteStore } from "../src/store/sqlite/threaded-store.js";

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

  it("stops when its store thread fails: the error is logged and onFatal told (by default the process exits 70)", async () => {
    const db = join(databaseDir(), "jobs.db");
    const logged: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
    const log = { ...silentLogger, error: (msg: string, fields?: Record<string, unknown>) => logged.push({ msg, fields }) };
    const fatal: Error[] = [];
    let told!: () => void;
    const firstFatal = new Promise<void>((resolve) => (told = resolve));
    const server = await startServer(resolveConfig({ db, port: "0", "metrics-port": "0" }, {}), {
      log,
      onFatal: (error) => {
        fatal.push(error);
        told();
      },
    });
    cleanups.push(() => server.close());
    await (server.store as ThreadedSqliteStore).thread.terminate();
    await firstFatal;
    expect(fatal).toHaveLength(1);
    expect(logged).toContainEqual({ msg: "the store thread failed; the server stops", fields: { error: fatal[0].message } });
    const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/GetStats`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect((await res.json()) as { code: string }).toMatchObject({ code: "unavailable" });
  });

  it("runs no SQL on its main thread on SQLite while it serves: a job's life, stats, metrics and readiness all go through the store thread", async () => {
    const db = join(databaseDir(), "jobs.db");
    const server = await startServer(resolveConfig({ db, port: "0", "metrics-port": "0" }, {}), { log: silentLogger });
    cleanups.push(() => server.close());
    // From here on (the one-server lock on <db>.lock was taken at start, on its own file), nothing.
    const { used, restore } = recordSqlOnThisThread();
    cleanups.push(restore);
    const call = async (method: string, body: unknown) =>
      (await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then((r) => r.json())) as any;
    const { job } = await call("Submit", { queue: "q", task: "t", payload: { n: 1 } });
    const { leases } = await call("Claim", { queue: "q", workerId: "w" });
    await call("Complete", { jobId: job.id, leaseToken: leases[0].leaseToken, result: { ok: true } });
    expect((await call("GetJob", { jobId: job.id })).job.state).toBe("JOB_STATE_COMPLETED");
    await call("ListJobs", { queue: "q" });
    await call("GetStats", {});
    expect((await fetch(`${server.metricsUrl}/metrics`)).status).toBe(200);
    expect((await fetch(`${server.metricsUrl}/health/ready`)).status).toBe(200);
    expect(used).toEqual([]);
    // The spies see SQL run in this thread: a store opened here is caught.
    const inThread = openSqliteStore({ path: ":memory:", clock: systemClock });
    await inThread.close();
    expect(used).toContain("prepare");
  });
});
