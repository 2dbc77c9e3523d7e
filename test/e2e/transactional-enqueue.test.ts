/**
 * Transactional enqueue against a running server
 * (docs/postgresql.md "Transactional enqueue"): an application's transaction
 * writes its own row and calls `<schema>.submit(...)`; a claim waiting on the
 * server gets nothing while the transaction is open or when it rolls back,
 * and gets the job as soon as it commits (the `submitted` notification wakes
 * it; no polling).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropSchema, probePostgres, skipWithoutPostgres, TEST_DATABASE_URL, uniqueSchemaName } from "../helpers/postgres.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("transactional enqueue with a running server", () => {
  const schema = uniqueSchemaName("txenqueue");
  let t: TestServer;
  let app: pg.Client;

  beforeAll(async () => {
    t = await startTestServer({ "database-url": TEST_DATABASE_URL, "database-schema": schema });
    app = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await app.connect();
    await app.query(`CREATE TABLE ${schema}.orders (id text PRIMARY KEY, total numeric NOT NULL)`);
  });
  afterAll(async () => {
    await app?.end();
    await t?.close();
    await dropSchema(schema);
  });

  it("leases the job only once the application's transaction commits, and never after a rollback", async () => {
    await app.query("BEGIN");
    await app.query(`INSERT INTO ${schema}.orders (id, total) VALUES ('o-1', 12.5)`);
    const { rows } = await app.query<{ job_id: string }>(
      `SELECT ${schema}.submit(queue => 'billing', task => 'invoice.generate', payload => $1::jsonb, idempotency_key => 'invoice-o-1') AS job_id`,
      [JSON.stringify({ orderId: "o-1" })],
    );
    const jobId = rows[0].job_id;
    // Not visible while the transaction is open: a short claim finds nothing.
    expect((await t.call("Claim", { queue: "billing", workerId: "w", wait: "300ms" })).body.leases ?? []).toEqual([]);
    const waiting = t.call("Claim", { queue: "billing", workerId: "w", wait: "20s" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const committedAt = performance.now();
    await app.query("COMMIT");
    const { body } = await waiting;
    const wokenAfterMs = performance.now() - committedAt;
    expect(body.leases).toHaveLength(1);
    expect(body.leases[0].job).toMatchObject({ id: jobId, queue: "billing", task: "invoice.generate", payload: { orderId: "o-1" } });
    // Woken by the commit's notification, not by the 20 s wait running out (docs/postgresql.md "Transactional enqueue": at once).
    expect(wokenAfterMs).toBeLessThan(10_000);
    const events = await t.call("ListJobEvents", { jobId });
    expect(events.body.events.map((e: { kind: string }) => e.kind)).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED"]);

    await app.query("BEGIN");
    await app.query(`INSERT INTO ${schema}.orders (id, total) VALUES ('o-2', 3)`);
    await app.query(`SELECT ${schema}.submit(queue => 'billing', task => 'invoice.generate', payload => '{"orderId":"o-2"}'::jsonb)`);
    await app.query("ROLLBACK");
    expect((await t.call("Claim", { queue: "billing", workerId: "w", wait: "1s" })).body.leases ?? []).toEqual([]);
    expect((await t.call("ListJobs", { queue: "billing" })).body.jobs).toHaveLength(1);
  });
});
