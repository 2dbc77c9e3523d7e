/**
 * The SQLite store on its own thread (src/store/sqlite/threaded-store.ts),
 * as the server opens it: the whole store contract unchanged, the main
 * thread running no SQL, errors crossing with their class and reason, the
 * injected clock, close draining the thread, and a failed thread failing
 * the store.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { recordSqlOnThisThread } from "../../helpers/sql-on-this-thread.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../../src/domain/clock.js";
import { QueueError } from "../../../src/domain/errors.js";
import {
  openThreadedSqliteStore,
  type ThreadedSqliteStore,
  type ThreadedSqliteStoreOptions,
} from "../../../src/store/sqlite/threaded-store.js";
import { newJob } from "../contract/helpers.js";
import { describeStoreContract } from "../contract/index.js";

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "leasequeue-thread-"));
}

describeStoreContract("sqlite (store thread)", async (clock) => {
  const dir = tempDir();
  const path = join(dir, "jobs.db");
  const open = () => openThreadedSqliteStore({ path, clock, otherWritersPollMs: 10 });
  const stores = [await open()];
  return {
    store: stores[0],
    async openInstance() {
      const store = await open();
      stores.push(store);
      return store;
    },
    async dispose() {
      for (const store of stores) await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe("SQLite store thread", () => {
  const dirs: string[] = [];
  const stores: ThreadedSqliteStore[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  async function open(options: Partial<ThreadedSqliteStoreOptions> = {}) {
    const dir = tempDir();
    dirs.push(dir);
    const store = await openThreadedSqliteStore({ path: join(dir, "jobs.db"), clock: new ManualClock(1_700_000_000_000), ...options });
    stores.push(store);
    return store;
  }

  it("runs no SQL on the main thread", async () => {
    const { used: calls } = recordSqlOnThisThread(); // restored by afterEach
    const store = await open();
    const [submitted] = await store.submit([newJob({ queue: "q" })]);
    const claimed = await store.claimOutcome({ queue: "q", workerId: "w", leaseDurationMs: 30_000, maxJobs: 1 });
    await store.complete(claimed.leases[0].job.id, claimed.leases[0].leaseToken, null);
    expect((await store.getJob(submitted.job.id))?.state).toBe("completed");
    await store.queueCounts();
    await store.listEvents({ afterSequence: 0, limit: 10 });
    await store.checkWritable();
    expect(calls).toEqual([]);
  });

  it("answers refusals with their class, reason and details", async () => {
    const store = await open();
    const [submitted] = await store.submit([newJob({ queue: "q" })]);
    await store.claimOutcome({ queue: "q", workerId: "w", leaseDurationMs: 30_000, maxJobs: 1 });
    const refused = await store.complete(submitted.job.id, "not-the-token", null).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(QueueError);
    expect(refused).toMatchObject({ reason: "LEASE_REJECTED", metadata: { jobId: submitted.job.id } });
    expect(await store.getJob("0190a2b4-0000-7000-8000-000000000000")).toBeUndefined();
  });

  it("writes the main thread's injected time, turn by turn", async () => {
    const clock = new ManualClock(1_800_000_000_000);
    const store = await open({ clock });
    const [first] = await store.submit([newJob({ queue: "q" })]);
    clock.advance(5_000);
    const [second] = await store.submit([newJob({ queue: "q", schedule: { delayMs: 1_000 } })]);
    expect(first.job.createTime).toBe(1_800_000_000_000);
    expect(second.job.createTime).toBe(1_800_000_005_000);
    expect(second.job.scheduleTime).toBe(1_800_000_006_000);
    // The claim runs at the main thread's time too: the delayed job is not due yet, then it is.
    const claim = () => store.claimOutcome({ queue: "q", workerId: "w", leaseDurationMs: 30_000, maxJobs: 10 });
    expect((await claim()).leases.map((l) => l.job.id)).toEqual([first.job.id]);
    clock.advance(1_000);
    expect((await claim()).leases.map((l) => l.job.id)).toEqual([second.job.id]);
  });

  it("commits and answers every call made before close, then refuses", async () => {
    const store = await open();
    const calls = Array.from({ length: 50 }, (_, i) => store.submit([newJob({ queue: "q", payloadJson: `{"i":${i}}` })]));
    const closed = store.close();
    await expect(Promise.all(calls)).resolves.toHaveLength(50);
    await closed;
    await expect(store.getJob("x")).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE" });
    await expect(store.checkWritable()).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE" });
  });

  it("refuses to open a file that is not a database, and its thread ends", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const path = join(dir, "not-a.db");
    writeFileSync(path, "this is not an SQLite database, only some text that is long enough to look like a header".repeat(20));
    const failures: Error[] = [];
    const opening = openThreadedSqliteStore({ path, clock: new ManualClock(), onThreadFailure: (e) => failures.push(e) });
    await expect(opening).rejects.toThrow(/not a database|file is not/i);
    expect(failures).toEqual([]);
  });

  it("fails as a whole when its thread dies: calls in flight and after are refused, and it says so once", async () => {
    const failures: Error[] = [];
    const store = await open({ onThreadFailure: (e) => failures.push(e) });
    await store.submit([newJob({ queue: "q" })]);
    const inFlight = store.queueCounts();
    await store.thread.terminate();
    await expect(inFlight).rejects.toBeInstanceOf(QueueError);
    await expect(inFlight).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE", message: /store thread failed/ });
    await expect(store.submit([newJob({ queue: "q" })])).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE" });
    await expect(store.checkWritable()).rejects.toMatchObject({ reason: "STORE_UNAVAILABLE" });
    expect(failures).toHaveLength(1);
    expect(failures[0].message).toMatch(/store thread ended/);
    await store.close();
  });
});
