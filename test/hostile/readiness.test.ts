/**
 * Readiness that tells the truth (docs/api.md "Side port"): the store reports
 * the outcome of real write transactions, /health/ready and grpc.health.v1
 * follow it, a probe write answers when nothing was written recently (at most
 * once per interval), and everything recovers by itself once a write
 * succeeds. Failures are injected for real in SQLite: `max_page_count` makes
 * the database full, a second connection's write lock makes it busy, and
 * `query_only` makes it refuse writes as read-only. A running server is
 * reached only through its ports, so there a second connection's write
 * lock is what makes its writes fail.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { ManualClock } from "../../src/testing/index.js";
import { QueueError } from "../../src/domain/errors.js";
import { openSqliteStore, type SqliteStore, type SqliteStoreOptions } from "../../src/store/sqlite/sqlite-store.js";
import type { WriteOutcome } from "../../src/store/store.js";
import { newJob } from "../store/contract/helpers.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { claimLeases } from "../helpers/store.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A monotonic clock the test moves, for the probe interval. */
function manualMonotonic() {
  let now = 0;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

function openStore(options: Partial<SqliteStoreOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-ready-"));
  const path = join(dir, "jobs.db");
  const store = openSqliteStore({ path, clock: new ManualClock(), ...options });
  const outcomes: WriteOutcome[] = [];
  store.onWriteOutcome((o) => outcomes.push(o));
  cleanups.push(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { store, path, outcomes };
}

/** A payload large enough that a few jobs need new database pages. */
const bulky = () => newJob({ queue: "fill", payloadJson: JSON.stringify({ pad: "x".repeat(3000) }) });

async function refusal(p: Promise<unknown>): Promise<QueueError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof QueueError) return err;
    throw err;
  }
  throw new Error("expected the write to be refused");
}

function probes(store: SqliteStore): number {
  return probesIn(store.db);
}

function probesIn(db: Database.Database): number {
  return (db.prepare("SELECT probes FROM write_probe").get() as { probes: number }).probes;
}

/** A second connection to a running server's database file, closed when the test ends. */
function sideConnection(t: TestServer): Database.Database {
  const db = new Database(t.config.databasePath);
  cleanups.push(() => {
    if (db.inTransaction) db.exec("ROLLBACK");
    db.close();
  });
  return db;
}

describe("the store's write health", () => {
  it("reports a full database as disk_full, refuses writes as unavailable, and recovers once space returns", async () => {
    const mono = manualMonotonic();
    const { store, outcomes } = openStore({ monotonicNow: mono.now });
    await store.submit([newJob()]);
    expect(outcomes).toEqual([{ ok: true }]);

    const pages = store.db.pragma("page_count", { simple: true }) as number;
    store.db.pragma(`max_page_count = ${pages}`);
    const err = await refusal(store.submit(Array.from({ length: 20 }, bulky)));
    expect(err.reason).toBe("STORE_UNAVAILABLE");
    expect(err.message).toContain("SQLITE_FULL");
    expect(outcomes.at(-1)).toMatchObject({ ok: false, cause: "disk_full" });
    // The latest write failed a moment ago: readiness says so without writing.
    const probesBefore = probes(store);
    const notReady = await refusal(store.checkWritable());
    expect(notReady.message).toMatch(/disk_full.*SQLITE_FULL/);
    expect(probes(store)).toBe(probesBefore);

    store.db.pragma("max_page_count = 4294967294");
    const [ok] = await store.submit(Array.from({ length: 20 }, bulky));
    expect(ok.job.state).toBe("queued");
    expect(outcomes.at(-1)).toEqual({ ok: true });
    await store.checkWritable();
  });

  it("reports a write lock held elsewhere past the busy timeout as busy", async () => {
    const { store, path, outcomes } = openStore({ busyTimeoutMs: 20 });
    const other = new Database(path);
    cleanups.push(() => void other.close());
    other.exec("BEGIN IMMEDIATE");
    const err = await refusal(store.submit([newJob()]));
    expect(err.message).toContain("SQLITE_BUSY");
    expect(outcomes).toEqual([expect.objectContaining({ ok: false, cause: "busy" })]);
    other.exec("ROLLBACK");
    await store.submit([newJob()]);
    expect(outcomes.at(-1)).toEqual({ ok: true });
  });

  it("reports a database that refuses writes as readonly, also from the probe", async () => {
    const mono = manualMonotonic();
    const { store, outcomes } = openStore({ monotonicNow: mono.now });
    store.db.pragma("query_only = ON");
    const err = await refusal(store.checkWritable());
    expect(err.message).toContain("SQLITE_READONLY");
    expect(outcomes).toEqual([expect.objectContaining({ ok: false, cause: "readonly" })]);
    store.db.pragma("query_only = OFF");
    // Within the interval the failure stands; after it, the next check probes again.
    await expect(store.checkWritable()).rejects.toThrow(/readonly/);
    mono.advance(1000);
    await store.checkWritable();
    expect(outcomes.at(-1)).toEqual({ ok: true });
  });

  it("does not count a transaction that changed nothing as evidence", async () => {
    const { store, outcomes } = openStore();
    expect(await claimLeases(store, { queue: "empty", workerId: "w", leaseDurationMs: 1000, maxJobs: 1 })).toEqual([]);
    expect(await store.recoverExpiredLeases()).toBe(0);
    expect(outcomes).toEqual([]);
  });

  it("probes with one small durable write at most once per interval, however many ask", async () => {
    const mono = manualMonotonic();
    const { store, outcomes } = openStore({ monotonicNow: mono.now });
    expect(probes(store)).toBe(0);
    await Promise.all(Array.from({ length: 50 }, () => store.checkWritable()));
    expect(probes(store)).toBe(1);
    mono.advance(999);
    for (let i = 0; i < 50; i++) await store.checkWritable();
    expect(probes(store)).toBe(1);
    mono.advance(1);
    await store.checkWritable();
    expect(probes(store)).toBe(2);
    // Real writes are evidence too: no probe while they flow.
    mono.advance(5000);
    await store.submit([newJob()]);
    await store.checkWritable();
    expect(probes(store)).toBe(2);
    expect(outcomes.every((o) => o.ok)).toBe(true);
  });
});

describe("readiness of a running server", () => {
  async function server(): Promise<TestServer> {
    const t = await startTestServer({ "sqlite-synchronous": "normal" });
    cleanups.push(() => t.close());
    return t;
  }

  async function failuresOf(t: TestServer, cause: string): Promise<number> {
    const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    const m = new RegExp(`^leasequeue_store_write_failures_total\\{cause="${cause}"\\} (\\d+)$`, "m").exec(text);
    if (m === null) throw new Error(`no leasequeue_store_write_failures_total{cause="${cause}"} in /metrics`);
    return Number(m[1]);
  }

  it("is 503 and NOT_SERVING while writes fail, and 200 and SERVING again by itself", async () => {
    const t = await server();
    const side = sideConnection(t);
    const health = createClient(Health, createGrpcTransport({ baseUrl: t.apiUrl }));
    const abort = new AbortController();
    cleanups.push(() => abort.abort());
    const watch = health.watch({ service: "" }, { signal: abort.signal })[Symbol.asyncIterator]();
    const nextStatus = async () => (await watch.next()).value?.status;
    expect(await nextStatus()).toBe(ServingStatus.SERVING);
    expect((await fetch(`${t.metricsUrl}/health/ready`)).status).toBe(200);
    expect(await failuresOf(t, "busy")).toBe(0);

    // Another process holds the write lock past the server's busy timeout (5 s).
    side.exec("BEGIN IMMEDIATE");
    const refused = await t.call("Submit", { queue: "q", task: "t" });
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe("unavailable");
    expect(await nextStatus()).toBe(ServingStatus.NOT_SERVING);
    const ready = await fetch(`${t.metricsUrl}/health/ready`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { reason: string }).reason).toMatch(/busy.*SQLITE_BUSY/);
    expect((await health.check({ service: "" })).status).toBe(ServingStatus.NOT_SERVING);
    expect((await health.check({ service: "leasequeue.v1.LeaseQueueService" })).status).toBe(ServingStatus.NOT_SERVING);
    expect(await failuresOf(t, "busy")).toBeGreaterThanOrEqual(1);
    expect(await failuresOf(t, "disk_full")).toBe(0);

    // No client writes from here on: the server's own probe finds the recovery.
    side.exec("ROLLBACK");
    await expect.poll(nextStatus, { timeout: 20_000 }).toBe(ServingStatus.SERVING);
    expect((await fetch(`${t.metricsUrl}/health/ready`)).status).toBe(200);
    expect((await t.call("Submit", { queue: "q", task: "t" })).status).toBe(200);
  }, 60_000);

  it("answers a storm of readiness scrapes with at most one probe write", async () => {
    const t = await server();
    const side = sideConnection(t);
    const before = probesIn(side);
    const started = performance.now();
    const statuses = await Promise.all(Array.from({ length: 100 }, async () => (await fetch(`${t.metricsUrl}/health/ready`)).status));
    const elapsedMs = performance.now() - started;
    expect(new Set(statuses)).toEqual(new Set([200]));
    // One probe per interval (1 s on the server's monotonic clock, this process's): one, unless the storm
    // itself outlasted an interval on a loaded machine, when the next interval may probe once more.
    expect(probesIn(side) - before).toBeLessThanOrEqual(1 + Math.floor(elapsedMs / 1000));
  });
});
