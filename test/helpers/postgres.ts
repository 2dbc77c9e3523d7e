/**
 * PostgreSQL for tests: every test file gets a schema of its own, created
 * before its first test and dropped (with everything in it) after its last,
 * so files run in parallel on one database without seeing each other.
 *
 * The database is LEASEQUEUE_TEST_DATABASE_URL, by default the one the
 * development and CI machines run (postgres@127.0.0.1:5432/test, trust
 * auth). When it is unreachable the tests are skipped outside CI; under
 * CI=true they run and fail, naming the URL, like the tests that need an
 * outside tool (test/external/tools.ts).
 *
 *   const pg = await probePostgres();
 *   describe.skipIf(skipWithoutPostgres(pg))("...", () => {
 *     const db = useTestSchema(pg, "submit");
 *     it("...", async () => { await db.pool.query(`SELECT ${db.schema}.submit(...)`); });
 *   });
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import type { Clock } from "../../src/domain/clock.js";
import { migratePostgres } from "../../src/store/postgres/migrate.js";
import { openPgStore, type PgStore } from "../../src/store/postgres/pg-store.js";
import { IN_CI } from "../external/tools.js";

export const TEST_DATABASE_URL = process.env.LEASEQUEUE_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface PostgresProbe {
  available: boolean;
  url: string;
  /** Why it is unavailable (the connection error), or "" */
  why: string;
}

/** Tries one connection (2 s at most). */
export async function probePostgres(url = TEST_DATABASE_URL): Promise<PostgresProbe> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return { available: true, url, why: "" };
  } catch (err) {
    return { available: false, url, why: (err as Error).message };
  } finally {
    await client.end().catch(() => {});
  }
}

/** Fails (with the URL and why) unless PostgreSQL answered the probe: under CI=true an unreachable database is a failure. */
export function requirePostgres(probe: PostgresProbe): void {
  if (!probe.available) throw new Error(`PostgreSQL is unreachable at ${probe.url} (${probe.why}); CI=true turns this into a failure`);
}

/** For describe.skipIf: skip when PostgreSQL is unreachable, except under CI=true. */
export function skipWithoutPostgres(probe: PostgresProbe): boolean {
  return !probe.available && !IN_CI;
}

export interface TestSchema {
  /** The schema's name (unique to this file and run). */
  readonly schema: string;
  readonly url: string;
  /** A pool on the test database (search_path is not set: name the schema). */
  readonly pool: pg.Pool;
  /** A new client, connected; the caller ends it. */
  connect(): Promise<pg.Client>;
  /** Migrates the schema (creating it) as a server would, on a connection of its own. */
  migrate(): Promise<void>;
}

/** A schema name of lower-case letters, digits and _: `lq_<label>_<random>`. */
export function uniqueSchemaName(label: string): string {
  const clean = label
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, "_")
    .slice(0, 24);
  return `lq_${clean}_${randomBytes(5).toString("hex")}`;
}

/**
 * Registers beforeAll/afterAll for a fresh schema (not created: the code
 * under test may create it, as migrate does; `create: true` creates it empty).
 * Under CI an unreachable database fails every test of the file here.
 */
export function useTestSchema(probe: PostgresProbe, label: string, options: { create?: boolean } = {}): TestSchema {
  const schema = uniqueSchemaName(label);
  let pool: pg.Pool | undefined;
  beforeAll(async () => {
    requirePostgres(probe);
    pool = new pg.Pool({ connectionString: probe.url, max: 8 });
    if (options.create === true) await pool.query(`CREATE SCHEMA ${schema}`);
  });
  afterAll(async () => {
    if (pool === undefined) return;
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
  });
  return {
    schema,
    url: probe.url,
    get pool(): pg.Pool {
      if (pool === undefined) throw new Error("the test schema is not set up (PostgreSQL unreachable?)");
      return pool;
    },
    async connect(): Promise<pg.Client> {
      const client = new pg.Client({ connectionString: probe.url });
      await client.connect();
      return client;
    },
    async migrate(): Promise<void> {
      const client = await this.connect();
      try {
        await migratePostgres(client, schema);
      } finally {
        await client.end();
      }
    },
  };
}

/** Drops a schema and everything in it (a test server's, at its close). */
export async function dropSchema(schema: string, url = TEST_DATABASE_URL): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * A PostgreSQL store on the test database for a store-level test: `schema`
 * (uniqueSchemaName), the test's clock as both the host's and the
 * database's unless `databaseClock` is given, no statement timeout, a
 * catch-up every 50 ms. `migrate`: false for a second instance on a schema
 * another already created.
 */
export function openTestPgStore(
  schema: string,
  clock: Clock,
  options: { databaseClock?: Clock; migrate?: boolean; poolSize?: number } = {},
): Promise<PgStore> {
  return openPgStore({
    url: TEST_DATABASE_URL,
    schema,
    clock,
    databaseClock: options.databaseClock ?? clock,
    poolSize: options.poolSize ?? 6,
    statementTimeoutMs: 0,
    migrate: options.migrate ?? true,
    catchUpIntervalMs: 50,
  });
}
