/**
 * Transactional enqueue from Python (docs/postgresql.md): psycopg 3 calls
 * `<schema>.submit(...)` inside its own transaction with named arguments
 * and a Jsonb payload; the job exists only after the commit, and a refusal
 * is a psycopg error whose diag names the field.
 *
 * Debian package: python3-psycopg. Also needs PostgreSQL (test/helpers/postgres.ts).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { probePostgres, skipWithoutPostgres, useTestSchema } from "../helpers/postgres.js";
import { requireTool, run, skipUnlessAvailable, works } from "./tools.js";

/** Debian's interpreter: another python3 earlier on PATH may lack the module. */
const PYTHON = "/usr/bin/python3";
const available = await works(PYTHON, ["-c", "import psycopg"]);
const probe = await probePostgres();

const SCRIPT = `
import json, sys
import psycopg
from psycopg.types.json import Jsonb

url, schema = sys.argv[1], sys.argv[2]
out = {}
with psycopg.connect(url) as conn:
    job_id = conn.execute(
        f"SELECT {schema}.submit(queue => 'billing', task => 'invoice.generate', payload => %s,"
        " delay => %s::interval, idempotency_key => %s)",
        (Jsonb({"orderId": "o-1", "lines": [1, 2.5]}), "5 minutes", "invoice-o-1"),
    ).fetchone()[0]
    with psycopg.connect(url) as other:
        out["visible_before_commit"] = other.execute(f"SELECT count(*) FROM {schema}.jobs WHERE id = %s", (job_id,)).fetchone()[0]
out["job_id"] = str(job_id)
with psycopg.connect(url) as conn:
    out["visible_after_commit"] = conn.execute(f"SELECT count(*) FROM {schema}.jobs WHERE id = %s", (job_id,)).fetchone()[0]
    out["again"] = str(conn.execute(
        f"SELECT {schema}.submit(queue => 'billing', task => 'invoice.generate', payload => %s,"
        " delay => %s::interval, idempotency_key => %s)",
        (Jsonb({"lines": [1, 2.5], "orderId": "o-1"}), "5 minutes", "invoice-o-1"),
    ).fetchone()[0])
try:
    with psycopg.connect(url) as conn:
        conn.execute(f"SELECT {schema}.submit(queue => 'billing', task => 'x', priority => 500)")
except psycopg.errors.InvalidParameterValue as e:
    out["error"] = {"sqlstate": e.sqlstate, "column": e.diag.column_name, "message": e.diag.message_primary}
print(json.dumps(out))
`;

describe.skipIf(skipUnlessAvailable(available) || skipWithoutPostgres(probe))("psycopg calls <schema>.submit()", () => {
  const db = useTestSchema(probe, "psycopg");

  beforeAll(async () => {
    if (!available) return;
    await db.migrate();
  });

  it("creates the job at commit, returns it again for the same key, and names the bad field", async () => {
    requireTool(available, "python3-psycopg");
    const result = await run(PYTHON, ["-c", SCRIPT, db.url, db.schema]);
    expect(result.stderr).toBe("");
    const out = JSON.parse(result.stdout);
    expect(out).toMatchObject({
      visible_before_commit: 0,
      visible_after_commit: 1,
      error: { sqlstate: "22023", column: "priority", message: "priority: must be between -100 and 100" },
    });
    expect(out.again).toBe(out.job_id);
    const { rows } = await db.pool.query(`SELECT payload, schedule_time - create_time AS delay FROM ${db.schema}.jobs WHERE id = $1`, [
      out.job_id,
    ]);
    expect(rows[0]).toEqual({ payload: '{"lines":[1,2.5],"orderId":"o-1"}', delay: "300000" });
  });
});
