/**
 * Both engines' indexes held to their one description
 * (src/store/database/indexes.ts): a database of each engine, migrated
 * from empty as a server does, has exactly the described secondary
 * indexes, each with the described columns, order, uniqueness, INCLUDE and
 * predicate, and an engine differs only where the description says why.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { INDEXES, indexSql } from "../../src/store/database/indexes.js";
import { migrate } from "../../src/store/sqlite/migrate.js";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../helpers/postgres.js";

const probe = await probePostgres();
const described = INDEXES.map((i) => i.name).sort();

describe("the index description", () => {
  it("names each index once, and says why wherever an engine differs", () => {
    expect(new Set(described).size).toBe(described.length);
    for (const spec of INDEXES) {
      expect(spec.serves, spec.name).not.toBe("");
      for (const difference of Object.values(spec.differs ?? {})) expect(difference.why, spec.name).not.toBe("");
    }
  });
});

describe("SQLite's migrated indexes", () => {
  const db = new Database(":memory:");
  migrate(db);
  // Indexes a constraint makes (PRIMARY KEY, UNIQUE) have no SQL of their own.
  const rows = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").all() as Array<{
    name: string;
    sql: string;
  }>;
  const sqlOf = new Map(rows.map((r) => [r.name, r.sql.replace(/\s+/g, " ").trim()]));

  it("are exactly the described ones", () => {
    expect([...sqlOf.keys()].sort()).toEqual(described);
  });

  it.each(INDEXES.map((spec) => [spec.name, spec] as const))("%s is as described", (_name, spec) => {
    expect(sqlOf.get(spec.name)).toBe(indexSql(spec, "sqlite"));
  });
});

describe.skipIf(skipWithoutPostgres(probe))("PostgreSQL's migrated indexes", () => {
  const pg = useTestSchema(probe, "indexes");

  /** Each secondary index of the schema (not one a constraint made) by name, as PostgreSQL writes its definition. */
  async function definitions(schema: string, client: { query: typeof pg.pool.query }): Promise<Map<string, string>> {
    const { rows } = await client.query<{ name: string; def: string }>(
      `SELECT c.relname AS name, pg_get_indexdef(c.oid) AS def
         FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)`,
      [schema],
    );
    return new Map(rows.map((r) => [r.name, r.def]));
  }

  it("are exactly the described ones, each as PostgreSQL writes the described statement", async () => {
    await pg.migrate();
    const migrated = await definitions(pg.schema, pg.pool);
    expect([...migrated.keys()].sort()).toEqual(described);

    // The described statements, run on the same tables under other names and
    // rolled back: PostgreSQL writes both definitions in its own words.
    const client = await pg.connect();
    try {
      await client.query("BEGIN");
      await client.query(`SET LOCAL search_path TO ${pg.schema}`);
      for (const spec of INDEXES) {
        await client.query(indexSql({ ...spec, name: `described_${spec.name}` }, "postgres"));
      }
      const fromDescription = await definitions(pg.schema, client);
      for (const spec of INDEXES) {
        const want = fromDescription.get(`described_${spec.name}`)?.replace(`described_${spec.name}`, spec.name);
        expect(migrated.get(spec.name), spec.name).toBe(want);
      }
    } finally {
      await client.query("ROLLBACK");
      await client.end();
    }
  });
});
