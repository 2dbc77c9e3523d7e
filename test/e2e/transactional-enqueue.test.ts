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
import { until } from "../helpers/until.js";

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

  it("leases the job only once the application's transaction commits, and never after a rollback", { timeout: 90_000 }, async () => {
    await app.query("BEGIN");
    await app.query(`INSERT INTO ${schema}.orders (id, total) VALUES ('o-1', 12.5)`);
    const { rows } = await app.query<{ job_id: string }>(
      `SELECT ${schema}.submit(queue => 'billing', task => 'invoice.generate', payload => $1::jsonb, idempotency_key => 'invoice-o-1') AS job_id`,
      [JSON.stringify({ orderId: "o-1" })],
    );
    const jobId = rows[0].job_id;
    // Not visible while the transaction is open: a short claim finds nothing.
    expect((await t.call("Claim", { queue: "billing", workerId: "w", wait: "300ms" })).body.leases ?? []).toEqual([]);
    // The longest wait a Claim takes: parked (the server counts it) before the commit, so the commit has to wake it.
    const waiting = t.call("Claim", { queue: "billing", workerId: "w", wait: "60s" });
    await until(
      "the Claim parked",
      async () => /^leasequeue_claim_waiters 1$/m.test(await (await fetch(`${t.metricsUrl}/metrics`)).text()),
      {
        pollMs: 20,
      },
    );
    const committedAt = performance.now();
    await app.query("COMMIT");
    const { body } = await waiting;
    const wokenAfterMs = performance.now() - committedAt;
    expect(body.leases).toHaveLength(1);
    expect(body.leases[0].job).toMatchObject({ id: jobId, queue: "billing", task: "invoice.generate", payload: { orderId: "o-1" } });
    // Woken by the commit (docs/postgresql.md "Transactional enqueue": at once), not by the 60 s wait running out.
    expect(wokenAfterMs).toBeLessThan(30_000);
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
