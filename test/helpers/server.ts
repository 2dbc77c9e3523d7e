/**
 * Starts a real LeaseQueue server on free ports with a fresh database, for tests.
 *
 * The engine is SQLite (a file in a temporary directory), or PostgreSQL when
 * LEASEQUEUE_TEST_ENGINE=postgres (a fresh schema on the test database,
 * dropped at close): vitest.config.ts runs the service tests both ways.
 */
import { expect } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { startServer, type RunningServer, type StartOptions } from "../../src/app.js";
import { resolveConfig, type Config } from "../../src/config/config.js";
import { silentLogger } from "../../src/testing/index.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { PgStore } from "../../src/store/postgres/pg-store.js";
import { dropSchema, TEST_DATABASE_URL, uniqueSchemaName } from "./postgres.js";

export interface TestServer {
  server: RunningServer;
  config: Config;
  apiUrl: string;
  metricsUrl: string;
  dir: string;
  /** The flags that name this server's database, to start another server on it. */
  databaseFlags: Record<string, string>;
  /** Typed Connect client (JSON over HTTP/1.1). */
  client: Client<typeof LeaseQueueService>;
  /** POST a Connect JSON call the way curl does; returns the status and parsed body. */
  call(method: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** `call` that expects 200 (the test fails with the answer otherwise) and returns the body. */
  ok(method: string, body: unknown): Promise<any>;
  close(): Promise<void>;
}

/** The engine the service tests run on (LEASEQUEUE_TEST_ENGINE). */
export const TEST_ENGINE: "sqlite" | "postgres" = process.env.LEASEQUEUE_TEST_ENGINE === "postgres" ? "postgres" : "sqlite";

export async function startTestServer(flags: Record<string, string> = {}, options: Partial<StartOptions> = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-test-"));
  const named = flags.db !== undefined || flags["database-url"] !== undefined;
  const schema = TEST_ENGINE === "postgres" && !named ? uniqueSchemaName("service") : undefined;
  const databaseFlags: Record<string, string> =
    schema !== undefined
      ? { "database-url": TEST_DATABASE_URL, "database-schema": schema, "database-pool-size": "6" }
      : named
        ? Object.fromEntries(Object.entries(flags).filter(([k]) => k === "db" || k.startsWith("database-")))
        : { db: join(dir, "jobs.db") };
  // The wire paths under test (vitest.config.ts: the "library" project runs connect-es's own).
  const wire = process.env.LEASEQUEUE_TEST_WIRE === undefined ? {} : { wire: process.env.LEASEQUEUE_TEST_WIRE };
  const config = resolveConfig({ ...databaseFlags, port: "0", "metrics-port": "0", ...wire, ...flags }, {});
  let server: RunningServer;
  try {
    // A test's manual clock is the database's too (on PostgreSQL the server follows the database's clock).
    const databaseClock = options.databaseClock ?? options.clock;
    server = await startServer(config, { log: silentLogger, ...options, ...(databaseClock !== undefined ? { databaseClock } : {}) });
  } catch (err) {
    if (schema !== undefined) await dropSchema(schema);
    throw err;
  }
  const transport = createConnectTransport({ baseUrl: server.apiUrl, httpVersion: "1.1", useBinaryFormat: false });
  const call: TestServer["call"] = async (method, body, headers = {}) => {
    const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text === "" ? undefined : JSON.parse(text) };
  };
  return {
    server,
    config,
    apiUrl: server.apiUrl,
    metricsUrl: server.metricsUrl,
    dir,
    databaseFlags,
    client: createClient(LeaseQueueService, transport),
    call,
    async ok(method, body) {
      const res = await call(method, body);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body;
    },
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
      if (schema !== undefined) await dropSchema(schema);
    },
  };
}

/** Deletes the stored events up to a sequence behind the store's back, as pruning leaves holes (either engine). */
export async function deleteEventsThrough(t: TestServer, sequence: number): Promise<void> {
  const store = t.server.store;
  if (store instanceof PgStore) await store.pool.query(`DELETE FROM ${store.schema}.job_events WHERE sequence <= $1`, [sequence]);
  else {
    // Through a second connection, as `leasequeue prune` would: the server's store announces it as another writer's commit.
    const db = new Database(t.config.databasePath);
    try {
      db.prepare("DELETE FROM job_events WHERE sequence <= ?").run(sequence);
    } finally {
      db.close();
    }
  }
}
