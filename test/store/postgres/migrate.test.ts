/**
 * PostgreSQL migrations (docs/postgresql.md "Schema and migrations"):
 * numbered, applied under an advisory lock so that servers starting at once
 * migrate a schema exactly once, tracked in schema_migrations, refusing a
 * schema newer than this release; functions replaced only by a newer revision
 * of them.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { DatabaseRefusal } from "../../../src/store/database/database-refusal.js";
import { schemaTooNewMessage } from "../../../src/store/database/schema-version.js";
import { DEFINITIONS_REVISION, definitionsHash } from "../../../src/store/postgres/definitions.js";
import { migratePostgres, schemaLabel } from "../../../src/store/postgres/migrate.js";
import { PG_MIGRATIONS, type PgMigration } from "../../../src/store/postgres/migrations.js";
import { probePostgres, skipWithoutPostgres, uniqueSchemaName, useTestSchema } from "../../helpers/postgres.js";

const probe = await probePostgres();
/** The schema version this release's migrations end at. */
const PG_LATEST_SCHEMA_VERSION = PG_MIGRATIONS[PG_MIGRATIONS.length - 1].version;

/**
 * The definitions' text for the schema "leasequeue", pinned to their
 * revision: a change to a function (or to a bound of domain/request-bounds.ts) must
 * come with a new DEFINITIONS_REVISION, and then a new pin here.
 */
const PINNED_DEFINITIONS: Record<number, string> = {
  1: "de4cf9a9e4eb5deed251f67547376251a4744a7056590e2e883c569767f9db6b",
  2: "e9232faaef4a490658c1028bf43c11c7266cff233227f561f242c5e035cddf95",
  3: "c59ecea0315c5e006baa1df2c70426eb34c128a195506341a8c286a935aae2e1",
  4: "cadba45a464b8efd37a879ff726ffbc1fabb984d8220b51d4fa60c8e44f43ddf",
  5: "234cde4d25a24c6ae2706050d04eaef50e77a5208e8849f4e871a8575eef6d57",
};

describe.skipIf(skipWithoutPostgres(probe))("PostgreSQL migrations", () => {
  const db = useTestSchema(probe, "migrate");

  /** A fresh schema name, dropped with the file's schema at the end. */
  const schemas: string[] = [];
  function freshSchema(): string {
    const name = uniqueSchemaName("m");
    schemas.push(name);
    return name;
  }

  async function withClient<T>(work: (c: pg.Client) => Promise<T>): Promise<T> {
    const client = await db.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }

  async function dropAll(): Promise<void> {
    for (const s of schemas.splice(0)) await db.pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  }

  it("creates the schema and its tables, records the version, and does nothing the second time", async () => {
    const s = db.schema;
    const first = await withClient((c) => migratePostgres(c, s));
    expect(first).toEqual({ applied: PG_MIGRATIONS.map((m) => m.version), version: PG_LATEST_SCHEMA_VERSION, definitionsApplied: true });
    const { rows } = await db.pool.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [
      s,
    ]);
    expect(rows.map((r) => r.table_name)).toEqual([
      "event_retention",
      "event_sequence",
      "job_count_deltas",
      "job_counts",
      "job_dependencies",
      "job_events",
      "jobs",
      "paused_queues",
      "queue_activity",
      "queue_activity_deltas",
      "queue_configs",
      "queue_group_lease_grants",
      "queue_groups",
      "queue_lease_grants",
      "schedules",
      "schema_definitions",
      "schema_migrations",
      "unsequenced_events",
      "write_probe",
    ]);
    const second = await withClient((c) => migratePostgres(c, s));
    expect(second).toEqual({ applied: [], version: PG_LATEST_SCHEMA_VERSION, definitionsApplied: false });
    const versions = await db.pool.query(`SELECT version, name FROM ${s}.schema_migrations ORDER BY version`);
    expect(versions.rows).toEqual(PG_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
  });

  it("upgrades a schema of version 4 holding jobs: the jobs stay, and a queue's listing has no index of its own", async () => {
    const s = freshSchema();
    try {
      await withClient((c) => migratePostgres(c, s, PG_MIGRATIONS.slice(0, 4)));
      await db.pool.query(
        `INSERT INTO ${s}.jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
           schedule_time, create_time, update_time, deliveries)
         VALUES (gen_random_uuid(), 'q', 't', 'null', 0, 'queued', 0, 3, 1000, 1, 1, 1, 0)`,
      );
      const upgraded = await withClient((c) => migratePostgres(c, s));
      expect(upgraded.applied).toEqual(PG_MIGRATIONS.filter((m) => m.version > 4).map((m) => m.version));
      const { rows } = await db.pool.query(
        `SELECT (SELECT count(*)::int FROM ${s}.jobs) AS jobs, to_regclass($1)::text AS queue_index, to_regclass($2)::text AS queue_state_index`,
        [`${s}.jobs_queue_recent`, `${s}.jobs_queue_state_recent`],
      );
      expect(rows[0]).toEqual({ jobs: 1, queue_index: null, queue_state_index: `${s}.jobs_queue_state_recent` });
    } finally {
      await dropAll();
    }
  });

  it("migrates a schema once when several servers start at the same moment", async () => {
    const s = freshSchema();
    try {
      const clients = await Promise.all(Array.from({ length: 8 }, () => db.connect()));
      try {
        const outcomes = await Promise.all(clients.map((c) => migratePostgres(c, s)));
        const applied = outcomes.flatMap((o) => o.applied);
        expect(applied.sort()).toEqual(PG_MIGRATIONS.map((m) => m.version));
        expect(outcomes.filter((o) => o.definitionsApplied)).toHaveLength(1);
        expect(outcomes.every((o) => o.version === PG_LATEST_SCHEMA_VERSION)).toBe(true);
      } finally {
        await Promise.all(clients.map((c) => c.end()));
      }
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${s}.schema_migrations`);
      expect(rows[0].n).toBe(PG_MIGRATIONS.length);
    } finally {
      await dropAll();
    }
  });

  it("keeps one schema's migrations from waiting for another's", async () => {
    const [a, b] = [freshSchema(), freshSchema()];
    try {
      const holder = await db.connect();
      const other = await db.connect();
      try {
        // Hold a's migration lock as a migrator in progress would; b migrates meanwhile.
        await holder.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [`leasequeue:${a}:migrate`]);
        expect((await migratePostgres(other, b)).version).toBe(PG_LATEST_SCHEMA_VERSION);
        const waiting = migratePostgres(other, a);
        await holder.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [`leasequeue:${a}:migrate`]);
        expect((await waiting).version).toBe(PG_LATEST_SCHEMA_VERSION);
      } finally {
        await holder.end();
        await other.end();
      }
    } finally {
      await dropAll();
    }
  });

  it("commits each migration on its own: a failing one leaves the earlier ones applied and is retried next time", async () => {
    const s = freshSchema();
    try {
      const second: PgMigration = { version: 2, name: "second", sql: "CREATE TABLE second_table (id integer); SELECT 1 / 0;" };
      await expect(withClient((c) => migratePostgres(c, s, [PG_MIGRATIONS[0], second]))).rejects.toThrow(/division by zero/);
      const { rows } = await db.pool.query(`SELECT max(version) AS v, to_regclass($1) AS t FROM ${s}.schema_migrations`, [
        `${s}.second_table`,
      ]);
      expect(rows[0]).toEqual({ v: 1, t: null });
      const fixed: PgMigration = { ...second, sql: "CREATE TABLE second_table (id integer);" };
      expect(await withClient((c) => migratePostgres(c, s, [PG_MIGRATIONS[0], fixed]))).toMatchObject({ applied: [2], version: 2 });
      // The lock was released after the failure: an unrelated session can take it at once.
      const { rows: free } = await db.pool.query(`SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok`, [`leasequeue:${s}:migrate`]);
      expect(free[0].ok).toBe(true);
    } finally {
      await db.pool.query(`SELECT pg_advisory_unlock_all()`);
      await dropAll();
    }
  });

  it("migrates a schema an administrator created for a role that may not create schemas", async () => {
    const s = freshSchema();
    const role = `${s}_owner`;
    await db.pool.query(`CREATE ROLE ${role} LOGIN`);
    try {
      const url = new URL(db.url);
      url.username = role;
      const asRole = async <T>(work: (c: pg.Client) => Promise<T>) => {
        const client = new pg.Client({ connectionString: url.toString() });
        await client.connect();
        try {
          return await work(client);
        } finally {
          await client.end();
        }
      };
      await expect(asRole((c) => migratePostgres(c, s))).rejects.toThrow(/permission denied/);
      await db.pool.query(`CREATE SCHEMA ${s} AUTHORIZATION ${role}`);
      expect((await asRole((c) => migratePostgres(c, s))).version).toBe(PG_LATEST_SCHEMA_VERSION);
    } finally {
      await dropAll();
      await db.pool.query(`DROP ROLE ${role}`);
    }
  });

  it("refuses a schema that a newer release migrated, with the SQLite store's message, and changes nothing", async () => {
    const s = freshSchema();
    try {
      await withClient((c) => migratePostgres(c, s));
      const newer = PG_LATEST_SCHEMA_VERSION + 1;
      await db.pool.query(`INSERT INTO ${s}.schema_migrations (version, name) VALUES ($1, 'from the future')`, [newer]);
      await db.pool.query(`UPDATE ${s}.schema_definitions SET sha256 = 'future'`);
      let refusal: unknown;
      await withClient((c) => migratePostgres(c, s)).catch((err: unknown) => (refusal = err));
      expect(refusal).toBeInstanceOf(DatabaseRefusal);
      expect((refusal as DatabaseRefusal).reason).toBe("SCHEMA_TOO_NEW");
      expect((refusal as DatabaseRefusal).message).toBe(schemaTooNewMessage(schemaLabel(s), newer, PG_LATEST_SCHEMA_VERSION));
      expect((refusal as DatabaseRefusal).message).toContain(
        `PostgreSQL schema "${s}" has schema version ${newer}, newer than this LeaseQueue release knows`,
      );
      const { rows } = await db.pool.query(`SELECT sha256 FROM ${s}.schema_definitions`);
      expect(rows[0].sha256).toBe("future");
    } finally {
      await dropAll();
    }
  });

  it("replaces the functions for an older revision of them, and leaves a newer revision alone", async () => {
    const s = freshSchema();
    try {
      await withClient((c) => migratePostgres(c, s));
      await db.pool.query(`UPDATE ${s}.schema_definitions SET revision = revision - 1, sha256 = 'old'`);
      expect((await withClient((c) => migratePostgres(c, s))).definitionsApplied).toBe(true);
      const { rows } = await db.pool.query(`SELECT revision, sha256 FROM ${s}.schema_definitions`);
      expect(rows[0]).toEqual({ revision: DEFINITIONS_REVISION, sha256: definitionsHash(s) });
      await db.pool.query(`UPDATE ${s}.schema_definitions SET revision = revision + 1, sha256 = 'newer'`);
      expect((await withClient((c) => migratePostgres(c, s))).definitionsApplied).toBe(false);
    } finally {
      await dropAll();
    }
  });

  it("pins the functions' text to their revision (bump DEFINITIONS_REVISION when they change)", () => {
    expect(PINNED_DEFINITIONS[DEFINITIONS_REVISION], `no pin for revision ${DEFINITIONS_REVISION}`).toBeDefined();
    expect(definitionsHash("leasequeue")).toBe(PINNED_DEFINITIONS[DEFINITIONS_REVISION]);
  });

  it("claims in index order: the claim query walks jobs_claim_order with no sort, skipping locked rows", async () => {
    const s = db.schema;
    const client = await db.connect();
    try {
      await client.query("BEGIN");
      // Enough rows of other queues and states that a plan ignoring the index would show.
      await client.query(
        `INSERT INTO ${s}.jobs (id, queue, task, payload, priority, state, attempts, max_attempts, retry_base_delay_ms,
           schedule_time, create_time, update_time, deliveries)
         SELECT gen_random_uuid(), 'q' || (i % 50), 't', 'null', i % 7, (ARRAY['queued','retry','completed','running'])[1 + i % 4],
           0, 3, 1000, i, i, i, 0
         FROM generate_series(1, 20000) AS i`,
      );
      await client.query(`ANALYZE ${s}.jobs`);
      const { rows } = await client.query(
        `EXPLAIN SELECT id FROM ${s}.jobs WHERE queue = $1 AND state IN ('queued','retry') AND schedule_time <= $2
           ORDER BY priority DESC, schedule_time, id LIMIT $3 FOR UPDATE SKIP LOCKED`,
        ["q7", 1_000_000, 10],
      );
      const plan = rows.map((r) => r["QUERY PLAN"] as string).join("\n");
      expect(plan).toContain("Index Scan using jobs_claim_order");
      expect(plan).not.toMatch(/Sort/);
      expect(plan).toContain("LockRows");
    } finally {
      await client.query("ROLLBACK");
      await client.end();
    }
  });
});
