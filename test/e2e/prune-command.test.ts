/**
 * `leasequeue prune` on a database file: one retention pass over the whole
 * backlog with the settings' policy, what it prints, its refusals, and the
 * same beside a running server (which then hands out the freed keys anew).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { openSqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { newJob } from "../store/contract/helpers.js";
import { callJson, okJson, runCli, spawnServer, type SpawnedServer } from "../helpers/process.js";
import { claimLeases } from "../helpers/store.js";

const DAY = 86_400_000;

const dirs: string[] = [];
const servers: SpawnedServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop("SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A database holding, finished ten days ago: 30 completed billing jobs (one
 * under the idempotency key "old-key"), 5 cancelled email jobs and 3 dead
 * billing jobs; and 2 billing jobs completed an hour ago.
 */
async function databaseWithHistory(): Promise<{ path: string; oldIds: string[]; recentIds: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "leasequeue-prune-cli-"));
  dirs.push(dir);
  const path = join(dir, "jobs.db");
  const clock = new ManualClock(Date.now() - 10 * DAY);
  const store = openSqliteStore({ path, clock });
  const complete = async (n: number, key?: string) => {
    const submitted = await store.submit(Array.from({ length: n }, (_, i) => newJob({ idempotencyKey: i === 0 ? (key ?? null) : null })));
    const leases = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: n });
    await Promise.all(leases.map((l) => store.complete(l.job.id, l.leaseToken, null)));
    return submitted.map((o) => o.job.id);
  };
  const oldIds = await complete(30, "old-key");
  const emails = await store.submit(Array.from({ length: 5 }, () => newJob({ queue: "emails" })));
  await Promise.all(emails.map((o) => store.cancel(o.job.id, "")));
  oldIds.push(...emails.map((o) => o.job.id));
  await store.submit(Array.from({ length: 3 }, () => newJob({ task: "doomed", maxAttempts: 1 })));
  const doomed = await claimLeases(store, { queue: "billing", workerId: "w", leaseDurationMs: 60_000, maxJobs: 3 });
  await Promise.all(doomed.map((l) => store.fail(l.job.id, l.leaseToken, { error: "bad", permanent: true })));
  clock.set(Date.now() - 3_600_000);
  const recentIds = await complete(2);
  await store.close();
  return { path, oldIds, recentIds };
}

async function countsIn(path: string) {
  const store = openSqliteStore({ path, clock: new ManualClock() });
  try {
    return Object.fromEntries((await store.queueCounts()).map((q) => [q.queue, q.counts]));
  } finally {
    await store.close();
  }
}

describe("leasequeue prune", () => {
  it("deletes what the retention settings let go, prints it by queue and state, and keeps dead jobs by default", async () => {
    const { path } = await databaseWithHistory();
    const r = await runCli(["prune", "--db", path]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("retention prunes completed and cancelled jobs finished more than 168h ago; no dead jobs");
    expect(r.stdout).toContain("pruned 35 jobs and 100 events"); // 30 x 3 + 5 x 2
    expect(r.stdout).toMatch(/^billing\s+completed\s+30$/m);
    expect(r.stdout).toMatch(/^emails\s+cancelled\s+5$/m);
    const counts = await countsIn(path);
    expect(counts.billing).toMatchObject({ completed: 2, dead: 3 });
    expect(counts.emails?.cancelled ?? 0).toBe(0);
    // `check` compares job_counts with the jobs themselves: they still agree.
    const check = await runCli(["check", "--db", path]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain("job_counts:     match the jobs");

    // With a dead retention (flag or environment) the dead jobs go too.
    const dead = await runCli(["prune", "--db", path], { LEASEQUEUE_DEAD_RETENTION: "24h" });
    expect(dead.code).toBe(0);
    expect(dead.stdout).toMatch(/^billing\s+dead\s+3$/m);
    expect((await countsIn(path)).billing).toMatchObject({ completed: 2, dead: 0 });

    // A shorter retention from the flag reaches the recent ones; the second run finds nothing more.
    const short = await runCli(["prune", "--db", path, "--retention", "30m"]);
    expect(short.stdout).toContain("pruned 2 jobs and 6 events");
    const again = await runCli(["prune", "--db", path, "--retention", "30m"]);
    expect(again.stdout).toContain("pruned 0 jobs and 0 events");
  });

  it("says so and deletes nothing when the policy keeps everything", async () => {
    const { path } = await databaseWithHistory();
    const r = await runCli(["prune", "--db", path, "--retention", "0s"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("nothing to prune: this policy keeps every job");
    expect((await countsIn(path)).billing).toMatchObject({ completed: 32, dead: 3 });
  });

  it("refuses a missing database (creating none) and a bad duration, naming the setting", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-prune-cli-"));
    dirs.push(dir);
    const missing = join(dir, "typo.db");
    const r = await runCli(["prune", "--db", missing]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no database at ${missing}`);
    expect(existsSync(missing)).toBe(false);

    const bad = await runCli(["prune", "--db", missing, "--retention", "7 days"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--retention "7 days" is not a duration');
    const unitless = await runCli(["prune", "--db", missing], { LEASEQUEUE_DEAD_RETENTION: "30" });
    expect(unitless.stderr).toContain('LEASEQUEUE_DEAD_RETENTION "30" has no unit');
  });

  it("runs beside a live server, which then answers for the pruned jobs as gone and accepts their keys anew", async () => {
    const { path, oldIds, recentIds } = await databaseWithHistory();
    // The server itself keeps everything (--retention 0s); the command prunes with the default.
    const server = await spawnServer(path, ["--retention", "0s"]);
    servers.push(server);
    const before = await okJson(server.apiUrl, "GetStats", {});
    expect(before.total).toMatchObject({ completed: "32", cancelled: "5", dead: "3" });
    const dedup = await okJson(server.apiUrl, "Submit", {
      queue: "billing",
      task: "invoice.generate",
      idempotencyKey: "old-key",
      payload: { other: true },
    }).catch((err: Error) => err.message);
    expect(String(dedup)).toContain("IDEMPOTENCY_MISMATCH");

    const r = await runCli(["prune", "--db", path]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("pruned 35 jobs");

    const after = await okJson(server.apiUrl, "GetStats", {});
    expect(after.total).toMatchObject({ completed: "2", dead: "3" });
    expect(after.total.cancelled).toBeUndefined();
    expect((await callJson(server.apiUrl, "GetJob", { jobId: oldIds[0] })).status).toBe(404);
    expect((await okJson(server.apiUrl, "GetJob", { jobId: recentIds[0] })).job.state).toBe("JOB_STATE_COMPLETED");
    expect((await callJson(server.apiUrl, "ListJobEvents", { jobId: oldIds[0] })).status).toBe(404);
    const fresh = await okJson(server.apiUrl, "Submit", {
      queue: "billing",
      task: "invoice.generate",
      idempotencyKey: "old-key",
      payload: { other: true },
    });
    expect(fresh.deduplicated ?? false).toBe(false);
    expect(oldIds).not.toContain(fresh.job.id);
  });
});
