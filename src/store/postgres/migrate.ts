/**
 * Applies the PostgreSQL migrations (migrations.ts) and functions
 * (definitions.ts) to a schema, safely when several servers start at once:
 * everything runs under a session advisory lock of that schema, so one
 * migrator works while the others wait and then find nothing left to do.
 * Each migration commits in its own transaction with its row in
 * `schema_migrations`; a crash between two leaves a schema at the earlier
 * version, which the next start continues from.
 *
 * A schema migrated past this release's last migration is refused
 * (DatabaseRefusal SCHEMA_TOO_NEW, store/database/schema-version.ts), before anything
 * is written.
 */
import type pg from "pg";
import { DatabaseRefusal } from "../database/database-refusal.js";
import { assertSchemaNotNewer } from "../database/schema-version.js";
import { DEFINITIONS_REVISION, definitionsHash, definitionsSql } from "./definitions.js";
import { advisoryLockKey, quoteIdentifier } from "./identifiers.js";
import { PG_MIGRATIONS, type PgMigration } from "./migrations.js";

export interface PgMigrateOutcome {
  /** Versions applied by this call, in order (empty when another migrator got there first). */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
  /** Whether this call (re)created the functions. */
  definitionsApplied: boolean;
}

/** How the database is described in messages: `PostgreSQL schema "leasequeue"`. */
export function schemaLabel(schema: string): string {
  return `PostgreSQL schema "${schema}"`;
}

/**
 * Migrates `schema` through `client`, a connection of its own that is not
 * in a transaction (the advisory lock belongs to its session). Creates the
 * schema when it does not exist.
 */
export async function migratePostgres(
  client: pg.ClientBase,
  schema: string,
  migrations: readonly PgMigration[] = PG_MIGRATIONS,
): Promise<PgMigrateOutcome> {
  const s = quoteIdentifier(schema);
  const lock = advisoryLockKey(schema, "migrate");
  await client.query(`SELECT pg_advisory_lock(${lock})`);
  try {
    await assertUtf8(client);
    // Created only when missing: a role without CREATE on the database can
    // still migrate a schema that an administrator created for it.
    const { rows: found } = await client.query<{ exists: boolean }>("SELECT to_regnamespace($1) IS NOT NULL AS exists", [s]);
    if (!found[0].exists) await client.query(`CREATE SCHEMA ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (
      version     integer PRIMARY KEY,
      name        text NOT NULL,
      applied_at  timestamptz NOT NULL DEFAULT now()
    )`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_definitions (
      id          integer PRIMARY KEY CHECK (id = 1),
      revision    integer NOT NULL,
      sha256      text NOT NULL,
      applied_at  timestamptz NOT NULL DEFAULT now()
    )`);
    const latest = migrations.length === 0 ? 0 : migrations[migrations.length - 1].version;
    let version = await schemaVersion(client, schema);
    assertSchemaNotNewer(schemaLabel(schema), version, latest);
    const applied: number[] = [];
    for (const m of migrations) {
      if (m.version <= version) continue;
      await inTransaction(client, schema, async () => {
        await client.query(m.sql);
        await client.query(`INSERT INTO ${s}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      });
      applied.push(m.version);
      version = m.version;
    }
    const definitionsApplied = await applyDefinitions(client, schema);
    return { applied, version, definitionsApplied };
  } finally {
    await client.query(`SELECT pg_advisory_unlock(${lock})`);
  }
}

/** The highest applied migration of `schema`, 0 when none (or no such schema). */
export async function schemaVersion(client: pg.ClientBase, schema: string): Promise<number> {
  const { rows } = await client.query<{ version: number | null }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 ELSE NULL END AS version`,
    [`${quoteIdentifier(schema)}.schema_migrations`],
  );
  if (rows[0].version === 0) return 0;
  const max = await client.query<{ version: number | null }>(
    `SELECT max(version) AS version FROM ${quoteIdentifier(schema)}.schema_migrations`,
  );
  return max.rows[0].version ?? 0;
}

async function applyDefinitions(client: pg.ClientBase, schema: string): Promise<boolean> {
  const s = quoteIdentifier(schema);
  const hash = definitionsHash(schema);
  const { rows } = await client.query<{ revision: number; sha256: string }>(
    `SELECT revision, sha256 FROM ${s}.schema_definitions WHERE id = 1`,
  );
  const stored = rows[0];
  if (
    stored !== undefined &&
    (stored.revision > DEFINITIONS_REVISION || (stored.revision === DEFINITIONS_REVISION && stored.sha256 === hash))
  ) {
    return false;
  }
  await inTransaction(client, schema, async () => {
    await client.query(definitionsSql(schema));
    await client.query(
      `INSERT INTO ${s}.schema_definitions (id, revision, sha256) VALUES (1, $1, $2)
       ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, sha256 = excluded.sha256, applied_at = now()`,
      [DEFINITIONS_REVISION, hash],
    );
  });
  return true;
}

/** Runs `work` in a transaction whose search_path is the schema alone (DDL there names no schema). */
async function inTransaction(client: pg.ClientBase, schema: string, work: () => Promise<void>): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query(`SET LOCAL search_path TO ${quoteIdentifier(schema)}, pg_temp`);
    await work();
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  }
}

/** Payload text and names are UTF-8 on the wire; a database in another encoding would store something else. */
async function assertUtf8(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ encoding: string }>("SELECT current_setting('server_encoding') AS encoding");
  const encoding = rows[0].encoding;
  if (encoding !== "UTF8") {
    throw new DatabaseRefusal(
      "BAD_FILE",
      `the PostgreSQL database's encoding is ${encoding}; LeaseQueue needs a UTF8 database (CREATE DATABASE ... ENCODING 'UTF8')`,
    );
  }
}
