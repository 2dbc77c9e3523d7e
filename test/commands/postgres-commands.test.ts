/**
 * The command line on PostgreSQL (issue 10, "Operations on PostgreSQL"):
 * `migrate` migrates the schema named by --database-url/--database-schema
 * (and again is a no-op); `prune` runs a retention pass on it; the file
 * commands (backup, restore, check, import-litequeue) refuse with exit 1
 * and say what to use instead; an unreachable database is a clear message
 * with exit 1 that never shows the password.
 */
import { afterAll, describe, expect, it } from "vitest";
import { dropSchema, probePostgres, skipWithoutPostgres, TEST_DATABASE_URL, uniqueSchemaName } from "../helpers/postgres.js";
import { runCli } from "../helpers/process.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("leasequeue commands on PostgreSQL", () => {
  const schema = uniqueSchemaName("commands");
  const database = ["--database-url", TEST_DATABASE_URL, "--database-schema", schema];
  afterAll(() => dropSchema(schema));

  it("migrates the schema, and again finds nothing to do", async () => {
    const first = await runCli(["migrate", ...database]);
    expect(first.code, first.stderr).toBe(0);
    const logged = JSON.parse(first.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
    expect(logged).toMatchObject({ msg: "migrations applied", engine: "postgres", schema });
    expect((logged.applied as number[]).length).toBeGreaterThan(0);
    const again = await runCli(["migrate", ...database]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout.trim().split("\n").at(-1)!)).toMatchObject({ applied: [] });
  });

  it("prunes on PostgreSQL", async () => {
    const pruned = await runCli(["prune", ...database]);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toMatch(/pruned|deleted|nothing/i);
  });

  it.each([
    [["backup", "/tmp/x.db"], /pg_dump --schema=/],
    [["restore", "/tmp/x.db"], /pg_restore/],
    [["check"], /amcheck/],
    [["import-litequeue", "/tmp/x.db", "--queue", "q", "--task", "t"], /submit\(\)/],
  ])("refuses %j as SQLite-only, saying what to use instead", async (args, instead) => {
    const r = await runCli([...args, ...database]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("works on the SQLite store only");
    expect(r.stderr).toMatch(instead);
  });

  it("says clearly when the database cannot be reached, without the password", async () => {
    const r = await runCli(["migrate", "--database-url", "postgres://lq:s3cret-pw@127.0.0.1:1/none", "--database-schema", schema]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("cannot use the PostgreSQL database at postgres://lq:");
    expect(r.stderr).toContain("ECONNREFUSED");
    expect(r.stderr + r.stdout).not.toContain("s3cret-pw");
  });
});
