/**
 * Several real `leasequeue serve` processes on one fresh PostgreSQL schema
 * (docs/postgresql.md "Running several servers"), for end-to-end tests:
 * registers beforeAll (start them together, so they migrate the empty
 * schema once, under the advisory lock) and afterAll (stop them, drop the
 * schema, and fail if a server did not exit cleanly: a server that crashed
 * during the tests shows there, whatever the tests saw).
 *
 * The outcome of a test is read back with SQL from the schema's own tables
 * (`db`, `table`), not through the servers under test.
 *
 * Needs the compiled server (`npm run build`) and PostgreSQL
 * (test/helpers/postgres.ts: call it inside describe.skipIf(skipWithoutPostgres(probe))).
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, expect } from "vitest";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { LeaseQueueClient } from "./claimers.js";
import { dropSchema, requirePostgres, uniqueSchemaName, type PostgresProbe } from "./postgres.js";
import { spawnPostgresServer, type SpawnedServer } from "./process.js";

export interface ServersOnOneSchema {
  readonly schema: string;
  /** A pool on the test database (4 connections), for reading the outcome. */
  readonly db: pg.Pool;
  readonly servers: SpawnedServer[];
  /** A gRPC client of each server, in the order of `servers`. */
  readonly clients: LeaseQueueClient[];
  /** `schema.name`, for SQL. */
  table: (name: string) => string;
  /**
   * ANALYZE on every table of the schema (docs/postgresql.md "Statistics":
   * where autovacuum is off, as it may be on a test database, run it after
   * loading many jobs), so the claims are planned as autovacuum would have
   * them planned.
   */
  analyze: () => Promise<void>;
  /**
   * The servers' warnings, errors and stderr so far, each line prefixed by
   * its server's index (the last `max`), for the message of a failed check.
   */
  problems(max?: number): string;
}

export function useServersOnOneSchema(
  probe: PostgresProbe,
  label: string,
  options: { servers?: number; args?: string[] } = {},
): ServersOnOneSchema {
  const schema = uniqueSchemaName(label);
  let db: pg.Pool | undefined;
  let servers: SpawnedServer[] = [];
  let clients: LeaseQueueClient[] = [];

  beforeAll(async () => {
    requirePostgres(probe);
    db = new pg.Pool({ connectionString: probe.url, max: 4 });
    const count = options.servers ?? 3;
    servers = await Promise.all(
      Array.from({ length: count }, () => spawnPostgresServer(probe.url, schema, options.args ?? ["--database-pool-size", "6"])),
    );
    clients = servers.map((s) => createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl })));
  }, 60_000);

  afterAll(async () => {
    const exits = await Promise.all(servers.map((s) => s.stop()));
    await db?.end();
    if (probe.available) await dropSchema(schema, probe.url);
    for (const [i, exit] of exits.entries()) {
      expect(exit, `server ${i} exit\n${servers[i].stderrLines.join("\n")}\n${servers[i].lines.join("\n")}`).toEqual({
        code: 0,
        signal: null,
      });
    }
  }, 60_000);

  return {
    schema,
    get db(): pg.Pool {
      if (db === undefined) throw new Error("the servers are not set up (PostgreSQL unreachable?)");
      return db;
    },
    get servers() {
      return servers;
    },
    get clients() {
      return clients;
    },
    table: (name) => `${schema}.${name}`,
    async analyze() {
      const { rows } = await db!.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, [
        schema,
      ]);
      for (const { tablename } of rows) await db!.query(`ANALYZE ${schema}.${tablename}`);
    },
    problems(max = 20) {
      const lines = servers.flatMap((s, i) => [
        ...s.lines.filter((l) => /"level":"(warn|error)"/.test(l)).map((l) => `server ${i}: ${l}`),
        ...s.stderrLines.map((l) => `server ${i} stderr: ${l}`),
      ]);
      return lines.length === 0 ? "(the servers logged no warning or error)" : lines.slice(-max).join("\n");
    },
  };
}
