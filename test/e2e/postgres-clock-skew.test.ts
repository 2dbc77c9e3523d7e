/**
 * Three real servers on one PostgreSQL schema, two of them on hosts whose
 * clocks are 30 s ahead and 30 s behind (libfaketime preloaded into their
 * processes): ownership, delays and rate windows follow the database's
 * clock, whichever server a worker talks to, and each server exports how
 * far its host clock is from the database's (docs/postgresql.md "Which
 * clock decides"). Under CI=true a missing libfaketime fails the test.
 */
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropSchema, probePostgres, requirePostgres, skipWithoutPostgres, uniqueSchemaName } from "../helpers/postgres.js";
import { spawnPostgresServer, type SpawnedServer } from "../helpers/process.js";

const probe = await probePostgres();

/** Debian's libfaketime (package faketime); the multi-threaded variant, as node runs threads. */
const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
const haveFaketime = existsSync(LIBFAKETIME);
if (process.env.CI === "true" && !haveFaketime) {
  throw new Error(`${LIBFAKETIME} is missing: install Debian's faketime package (.ci/run does)`);
}

/** How far apart the test's clock and the database's may read, both on this host (the servers' own clocks are 30 s off). */
const SAME_HOST_MS = 1000;

const skewed = (offset: string) => ({ env: { ...process.env, LD_PRELOAD: LIBFAKETIME, FAKETIME: offset, FAKETIME_NO_CACHE: "1" } });

describe.skipIf(skipWithoutPostgres(probe) || !haveFaketime)("three servers whose host clocks disagree, on one PostgreSQL schema", () => {
  const schema = uniqueSchemaName("clock_skew");
  let plain: SpawnedServer;
  let ahead: SpawnedServer;
  let behind: SpawnedServer;

  beforeAll(async () => {
    requirePostgres(probe);
    plain = await spawnPostgresServer(probe.url, schema, ["--database-pool-size", "4"]);
    [ahead, behind] = await Promise.all([
      spawnPostgresServer(probe.url, schema, ["--database-pool-size", "4"], skewed("+30s")),
      spawnPostgresServer(probe.url, schema, ["--database-pool-size", "4"], skewed("-30s")),
    ]);
  }, 60_000);

  afterAll(async () => {
    const servers = [plain, ahead, behind].filter((s) => s !== undefined);
    const exits = await Promise.all(servers.map((s) => s.stop()));
    if (probe.available) await dropSchema(schema, probe.url);
    for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null });
  }, 60_000);

  async function call(server: SpawnedServer, method: string, body: unknown): Promise<any> {
    const res = await fetch(`${server.apiUrl}/leasequeue.v1.LeaseQueueService/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = await res.json();
    if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }
  const claim = async (server: SpawnedServer, queue: string, leaseDuration = "20s") =>
    ((await call(server, "Claim", { queue, workerId: "w", leaseDuration, maxJobs: 10 })).leases ?? []) as any[];

  async function clockOffset(server: SpawnedServer): Promise<number> {
    const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith("leasequeue_clock_offset_seconds "));
    expect(line, text).toBeDefined();
    return Number(line!.split(" ")[1]);
  }

  it("exports each host clock's distance from the database's", async () => {
    expect(Math.abs(await clockOffset(plain))).toBeLessThan(1);
    expect(await clockOffset(ahead)).toBeGreaterThan(-31);
    expect(await clockOffset(ahead)).toBeLessThan(-29);
    expect(await clockOffset(behind)).toBeGreaterThan(29);
    expect(await clockOffset(behind)).toBeLessThan(31);
  });

  it("never hands out a lease another server's worker still holds; the holder's heartbeat and completion go through", async () => {
    await call(plain, "Submit", { queue: "owned", task: "t", payload: {} });
    const beforeClaim = Date.now();
    const [lease] = await claim(plain, "owned", "20s");
    const afterClaim = Date.now();
    expect(lease).toBeDefined();
    expect(await claim(ahead, "owned")).toEqual([]);
    expect(await claim(behind, "owned")).toEqual([]);
    // Every server writes the database's time: the lease ends 20 s after the claim, as the plain host (and the
    // database, on the same host) sees it; the claim ran between the two readings, however long it took.
    const expires = Date.parse(lease.job.leaseExpireTime);
    expect(expires).toBeGreaterThanOrEqual(beforeClaim + 20_000 - SAME_HOST_MS);
    expect(expires).toBeLessThanOrEqual(afterClaim + 20_000 + SAME_HOST_MS);
    await call(ahead, "Heartbeat", { jobId: lease.job.id, leaseToken: lease.leaseToken, leaseDuration: "20s" });
    const done = await call(behind, "Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken, result: "ok" });
    expect(done.job).toMatchObject({ state: "JOB_STATE_COMPLETED", attempts: 1 });
  });

  it("never leases a delayed job early through the server whose clock is ahead", async () => {
    const beforeSubmit = Date.now();
    const submitted = await call(behind, "Submit", { queue: "delayed", task: "t", payload: {}, delay: "15s" });
    const afterSubmit = Date.now();
    const due = Date.parse(submitted.job.scheduleTime);
    expect(due).toBeGreaterThanOrEqual(beforeSubmit + 15_000 - SAME_HOST_MS);
    expect(due).toBeLessThanOrEqual(afterSubmit + 15_000 + SAME_HOST_MS);
    await call(plain, "Submit", { queue: "delayed", task: "t", payload: {}, delay: "15s" });
    expect(await claim(ahead, "delayed")).toEqual([]);
    expect(await claim(plain, "delayed")).toEqual([]);
  });

  it("holds a rate limit across the three servers", async () => {
    await call(plain, "UpdateQueue", { queue: "limited", config: { rateLimit: 1, ratePeriod: "10s" }, updateMask: "rateLimit,ratePeriod" });
    await call(plain, "SubmitBatch", { jobs: [1, 2, 3].map(() => ({ queue: "limited", task: "t", payload: {} })) });
    expect(await claim(plain, "limited")).toHaveLength(1);
    expect(await claim(ahead, "limited")).toEqual([]);
    expect(await claim(behind, "limited")).toEqual([]);
  });
});
