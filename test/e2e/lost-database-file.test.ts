/**
 * The database file removed, renamed or replaced while a server runs on it
 * (docs/operations.md "The database file removed while serving"): the
 * server refuses writes and turns unready as soon as it notices, saves what
 * its connection still holds beside the database, and that copy restores
 * every acknowledged job. Real servers, a real `rm` / `mv` under load.
 */
import { existsSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { callJson, okJson, runCli, serversInTempDirs, type SpawnedServer } from "../helpers/process.js";

const sandbox = serversInTempDirs("lost-file");

const LOOPS = 6;

interface Load {
  /** Idempotency key -> job id of every Submit answered 200. */
  acked: Map<string, string>;
  /** Settles once every loop met its first refusal; with the refusals. */
  ended: Promise<Array<{ status: number; body: any }>>;
}

/**
 * Submits in LOOPS parallel loops until each is refused; `afterAcks` runs
 * once, when `after` submits were acknowledged (the loops go on meanwhile).
 */
function submitUntilRefused(server: SpawnedServer, after: number, afterAcks: () => void): Load {
  const acked = new Map<string, string>();
  let fired = false;
  const ended = Promise.all(
    Array.from({ length: LOOPS }, async (_, loop) => {
      for (let i = 0; ; i++) {
        const key = `lost-${loop}-${i}`;
        const reply = await callJson(server.apiUrl, "Submit", { queue: "lost", task: "t", payload: { key }, idempotencyKey: key });
        if (reply.status !== 200) return reply;
        acked.set(key, reply.body.job.id);
        if (!fired && acked.size >= after) {
          fired = true;
          afterAcks();
        }
      }
    }),
  );
  return { acked, ended };
}

async function readiness(server: SpawnedServer): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.metricsUrl}/health/ready`);
  return { status: res.status, body: await res.json() };
}

function savedCopyFrom(server: SpawnedServer): Promise<any> {
  return server.waitForLine((_, json) => json?.msg?.startsWith("saved what the server holds of the lost database file")).then(JSON.parse);
}

describe("the database file removed while the server runs", () => {
  it(
    "refuses writes, turns unready, saves every acknowledged job beside the database, and will not start empty over the copy",
    { timeout: 120_000 },
    async () => {
      const dbPath = join(sandbox.dir(), "lq.db");
      const server = await sandbox.start(dbPath);
      const load = submitUntilRefused(server, 200, () => rmSync(dbPath));
      const refusals = await load.ended;

      // Every loop ended on `unavailable`, naming the cause, and the log names the path.
      for (const refusal of refusals) {
        expect(refusal.status, JSON.stringify(refusal.body)).toBe(503);
        expect(refusal.body.code).toBe("unavailable");
        expect(refusal.body.message).toContain("file_lost");
        expect(refusal.body.message).toContain(`${dbPath} no longer exists`);
      }
      const lost = JSON.parse(await server.waitForLine((_, json) => json?.msg?.startsWith("the database file is gone")));
      expect(lost).toMatchObject({ level: "error", path: dbPath, reason: `${dbPath} no longer exists (removed or renamed)` });
      const ready = await readiness(server);
      expect(ready.status).toBe(503);
      expect(JSON.stringify(ready.body)).toContain("file_lost");

      const saved = await savedCopyFrom(server);
      expect(saved.savedTo).toBe(lost.savingTo);
      expect(saved.savedTo).toMatch(/lq\.db\.saved-\d{8}T\d{6}Z$/);
      expect(saved.jobs).toBeGreaterThanOrEqual(load.acked.size);
      expect(saved.restore).toBe(`leasequeue restore ${saved.savedTo} --db ${dbPath}`);

      // Still refused after the copy; reads go on from what the server holds.
      const later = await callJson(server.apiUrl, "Submit", { queue: "lost", task: "t" });
      expect(later.status).toBe(503);
      const someId = load.acked.values().next().value as string;
      expect((await okJson(server.apiUrl, "GetJob", { jobId: someId })).job.id).toBe(someId);
      await server.stop();

      // A new server does not quietly start on an empty database beside the copy.
      const refused = await runCli(["serve", "--db", dbPath, "--port", "0", "--metrics-port", "0"]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`${saved.savedTo} does`);
      expect(refused.stderr).toContain(`leasequeue restore ${saved.savedTo} --db ${dbPath}`);
      expect(existsSync(dbPath)).toBe(false);

      // The runbook: restore the copy, start again; every acknowledged job is there.
      const restored = await runCli(["restore", saved.savedTo, "--db", dbPath]);
      expect(restored.code, restored.stderr).toBe(0);
      const again = await sandbox.start(dbPath);
      for (const [key, id] of load.acked) {
        const { job } = await okJson(again.apiUrl, "GetJob", { jobId: id });
        expect(job).toMatchObject({ id, queue: "lost", payload: { key } });
      }
      expect((await okJson(again.apiUrl, "Submit", { queue: "lost", task: "t" })).job.id).toBeTruthy();
    },
  );

  it("notices a file replaced under its name and saves the one it has open", { timeout: 60_000 }, async () => {
    const dbPath = join(sandbox.dir(), "lq.db");
    const server = await sandbox.start(dbPath);
    const { job } = await okJson(server.apiUrl, "Submit", { queue: "lost", task: "t", payload: { n: 1 } });
    const other = join(sandbox.dir(), "other.db");
    writeFileSync(other, "not this server's database");
    renameSync(other, dbPath);

    const lost = JSON.parse(await server.waitForLine((_, json) => json?.msg?.startsWith("the database file is gone")));
    expect(lost.reason).toBe(`${dbPath} is now another file (replaced)`);
    const refusal = await callJson(server.apiUrl, "Submit", { queue: "lost", task: "t" });
    expect(refusal.status).toBe(503);
    expect(refusal.body.message).toContain("is now another file (replaced)");

    const saved = await savedCopyFrom(server);
    await server.stop();
    rmSync(dbPath);
    expect((await runCli(["restore", saved.savedTo, "--db", dbPath])).code).toBe(0);
    const again = await sandbox.start(dbPath);
    expect((await okJson(again.apiUrl, "GetJob", { jobId: job.id })).job.payload).toEqual({ n: 1 });
  });

  it("takes writes again when the file is renamed back", { timeout: 60_000 }, async () => {
    const dbPath = join(sandbox.dir(), "lq.db");
    const server = await sandbox.start(dbPath);
    await okJson(server.apiUrl, "Submit", { queue: "lost", task: "t" });
    renameSync(dbPath, `${dbPath}.moved`);
    await server.waitForLine((_, json) => json?.msg?.startsWith("the database file is gone"));
    expect((await callJson(server.apiUrl, "Submit", { queue: "lost", task: "t" })).status).toBe(503);

    renameSync(`${dbPath}.moved`, dbPath);
    await server.waitForLine((_, json) => json?.msg === "the database file is back: writes resume once one succeeds");
    await server.waitForLine((_, json) => json?.msg === "database writes succeed again; ready");
    expect((await readiness(server)).status).toBe(200);
    const { job } = await okJson(server.apiUrl, "Submit", { queue: "lost", task: "t", payload: { after: true } });
    await server.stop();
    const again = await sandbox.start(dbPath);
    expect((await okJson(again.apiUrl, "GetJob", { jobId: job.id })).job.payload).toEqual({ after: true });
  });
});
