/**
 * What a server says about its clock (docs/operations.md "Alert:
 * LeaseQueueClockOffset"): on SQLite a jump of the host's wall clock against
 * its monotonic clock is logged at warn with its size; on PostgreSQL a
 * server that cannot measure the database's clock says so and keeps going.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { HostClock } from "../../src/domain/clock.js";
import { logLines } from "../helpers/log-lines.js";
import { dropSchema, probePostgres, requirePostgres, skipWithoutPostgres, uniqueSchemaName } from "../helpers/postgres.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const probe = await probePostgres();

let server: TestServer | undefined;
let schema: string | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
  if (schema !== undefined) await dropSchema(schema, probe.url);
  schema = undefined;
});

describe("clock logs", () => {
  it("warns with its size when the host's wall clock jumps on SQLite", async () => {
    const { log, waitFor } = logLines();
    let stepMs = 0;
    const host: HostClock = { now: () => Date.now() + stepMs, monotonic: () => performance.now() };
    server = await startTestServer({}, { log, clock: host });
    stepMs = -45_000; // NTP steps the clock back 45 s
    const line = await waitFor((l) => l.msg === "host clock jumped");
    expect(line.level).toBe("warn");
    expect(line.jumpSeconds).toBeCloseTo(-45, 0);
    expect((await (await fetch(`${server.metricsUrl}/metrics`)).text()).split("\n")).toContain("leasequeue_clock_offset_seconds 0");
  });

  it.skipIf(skipWithoutPostgres(probe))(
    "warns when the database's clock cannot be measured on PostgreSQL, and serves on its last offset",
    async () => {
      requirePostgres(probe);
      const { log, waitFor } = logLines();
      const unreadable = {
        now(): number {
          throw new Error("clock_timestamp() failed");
        },
      };
      schema = uniqueSchemaName("clock_logs");
      server = await startTestServer({ "database-url": probe.url, "database-schema": schema }, { log, databaseClock: unreadable });
      const line = await waitFor((l) => l.msg === "database clock not measured; keeping the last offset");
      expect(line).toMatchObject({
        level: "warn",
        reason: "the database's time could not be read: clock_timestamp() failed",
        offsetSeconds: 0,
      });
      expect((await server.call("Submit", { queue: "q", task: "t", payload: {} })).status).toBe(200);
    },
  );
});
