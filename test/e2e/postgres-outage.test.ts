/**
 * A server on PostgreSQL when the database goes away and comes back
 * (issue 10, "Operations on PostgreSQL"): while it is down, calls are
 * answered `unavailable` and /health/ready says 503; when it returns, the
 * server recovers by itself, with no restart: writes succeed, readiness is
 * back, and the LISTEN connection is re-established, so a job submitted
 * with SQL wakes a waiting claim again. The outage is a TCP proxy between
 * the server and the shared test database (test/helpers/tcp-proxy.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PgStore } from "../../src/store/postgres/pg-store.js";
import { logLines } from "../helpers/log-lines.js";
import { dropSchema, probePostgres, skipWithoutPostgres, TEST_DATABASE_URL, uniqueSchemaName } from "../helpers/postgres.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.js";
import { until } from "../helpers/until.js";
import pg from "pg";

const probe = await probePostgres();

describe.skipIf(skipWithoutPostgres(probe))("PostgreSQL outage", () => {
  const schema = uniqueSchemaName("outage");
  let proxy: TcpProxy;
  let t: TestServer;
  const logs = logLines("info");

  beforeAll(async () => {
    const target = new URL(TEST_DATABASE_URL);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    target.port = String(proxy.port);
    t = await startTestServer(
      { "database-url": target.toString(), "database-schema": schema, "database-pool-size": "4" },
      { log: logs.log },
    );
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
    await dropSchema(schema);
  });

  const ready = async () => (await fetch(`${t.metricsUrl}/health/ready`)).status;

  it(
    "answers unavailable and is not ready while the database is down, and recovers by itself when it returns",
    { timeout: 60_000 },
    async () => {
      expect(await ready()).toBe(200);
      expect((await t.call("Submit", { queue: "outage", task: "before" })).status).toBe(200);

      await proxy.stop();
      const refused = await t.call("Submit", { queue: "outage", task: "during" });
      expect(refused.status).toBe(503);
      expect(refused.body.code).toBe("unavailable");
      await until("/health/ready to say 503", async () => (await ready()) === 503, { pollMs: 50 });
      const body = await (await fetch(`${t.metricsUrl}/health/ready`)).text();
      expect(body).toMatch(/unavailable|database/i);

      await proxy.start();
      await until("/health/ready to say 200 again", async () => (await ready()) === 200, { pollMs: 50 });
      expect((await t.call("Submit", { queue: "outage", task: "after" })).status).toBe(200);
      const claimed = await t.call("Claim", { queue: "outage", workerId: "w", maxJobs: 10 });
      expect(claimed.status).toBe(200);
      expect(claimed.body.leases.map((l: { job: { task: string } }) => l.job.task).sort()).toEqual(["after", "before"]);
    },
  );

  it("listens again after its connections were cut: a job submitted with SQL wakes a waiting claim", { timeout: 60_000 }, async () => {
    const from = logs.lines.length;
    proxy.reset();
    // The LISTEN connection was lost (the server says so), and is back.
    await logs.waitFor((l) => l.msg === "database notifications lost; reconnecting", from);
    await (t.server.store as PgStore).whenListening();
    const waiting = t.call("Claim", { queue: "woken", workerId: "w", wait: "20s" });
    const app = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await app.connect();
    try {
      // The claim is parked before the job exists: the job's notification has to wake it.
      await until(
        "the Claim parked",
        async () => /^leasequeue_claim_waiters 1$/m.test(await (await fetch(`${t.metricsUrl}/metrics`)).text()),
        {
          pollMs: 20,
        },
      );
      // Straight to the database, not through the proxy: as an application would.
      await app.query(`SELECT ${schema}.submit('woken', 'by-sql', '{"n": 1}'::jsonb)`);
    } finally {
      await app.end();
    }
    const { status, body } = await waiting;
    expect(status).toBe(200);
    expect(body.leases).toHaveLength(1);
    expect(body.leases[0].job).toMatchObject({ queue: "woken", task: "by-sql", payload: { n: 1 } });
  });
});
