/**
 * A real full disk under the real server: the database lives on a 2 MiB
 * tmpfs, a filler file takes the rest of the space, and the server must say
 * so (Submit `unavailable`, /health/ready 503, grpc health NOT_SERVING, the
 * write-failure metric counted), then recover by itself once the filler is
 * gone, without a restart and without losing any job it acknowledged.
 *
 * Mounting needs root. CI runs as root, so under CI=true this test runs (and
 * fails if it cannot mount); elsewhere it skips for non-root users.
 */
import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { callJson, listAllJobs, okJson, spawnServer, type SpawnedServer } from "../helpers/process.js";

const isRoot = process.getuid?.() === 0;
const skip = !isRoot && process.env.CI !== "true";

let dir = "";
let mounted = false;
let server: SpawnedServer | undefined;

beforeAll(() => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), "leasequeue-diskfull-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir]);
  mounted = true;
});

afterAll(async () => {
  await server?.stop("SIGKILL");
  if (mounted) execFileSync("umount", [dir]);
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

/** Writes to `path` until the file system says ENOSPC; returns the bytes written. */
function fillDisk(path: string): number {
  const fd = openSync(path, "w");
  let written = 0;
  try {
    for (const size of [64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x55);
      try {
        for (;;) written += writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
  return written;
}

async function writeFailures(metricsUrl: string, cause: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const m = new RegExp(`^leasequeue_store_write_failures_total\\{cause="${cause}"\\} (\\d+)$`, "m").exec(text);
  if (m === null) throw new Error(`no leasequeue_store_write_failures_total{cause="${cause}"} in /metrics`);
  return Number(m[1]);
}

const batch = (n: number, tag: string) => ({
  jobs: Array.from({ length: n }, (_, i) => ({ queue: "disk", task: "fill", payload: { tag, i, pad: "p".repeat(400) } })),
});

describe("a full disk", () => {
  it.skipIf(skip)(
    "makes the server unready and refuse writes, then recover by itself with every acknowledged job kept",
    async () => {
      const db = join(dir, "jobs.db");
      server = await spawnServer(db);
      const { apiUrl, metricsUrl } = server;
      const health = createClient(Health, createGrpcTransport({ baseUrl: apiUrl }));
      const watchAbort = new AbortController();
      const watch = health.watch({ service: "" }, { signal: watchAbort.signal })[Symbol.asyncIterator]();
      const nextStatus = async () => (await watch.next()).value?.status;
      expect(await nextStatus()).toBe(ServingStatus.SERVING);

      const acknowledged = new Set<string>();
      const accept = (body: any) => {
        for (const r of body.results) acknowledged.add(r.job.id);
      };
      for (let i = 0; i < 4; i++) accept(await okJson(apiUrl, "SubmitBatch", batch(50, `before-${i}`)));
      expect((await fetch(`${metricsUrl}/health/ready`)).status).toBe(200);
      expect(await writeFailures(metricsUrl, "disk_full")).toBe(0);

      const filler = join(dir, "filler");
      const filled = fillDisk(filler);
      console.log(`disk-full: ${acknowledged.size} jobs acknowledged, then a ${(filled / 1024).toFixed(0)} KiB filler filled the tmpfs`);

      // Writes that still fit in space the files already own may succeed; the
      // next ones must be refused with `unavailable`.
      let refused: { status: number; body: any } | undefined;
      for (let i = 0; i < 50 && refused === undefined; i++) {
        const reply = await callJson(apiUrl, "SubmitBatch", batch(50, `full-${i}`));
        if (reply.status === 200) accept(reply.body);
        else refused = reply;
      }
      expect(refused, "some SubmitBatch must be refused on a full disk").toBeDefined();
      expect(refused!.status).toBe(503);
      expect(refused!.body.code).toBe("unavailable");
      const single = await callJson(apiUrl, "Submit", { queue: "disk", task: "one", payload: { pad: "q".repeat(2000) } });
      expect(single.status).toBe(503);
      expect(single.body.code).toBe("unavailable");

      const ready = await fetch(`${metricsUrl}/health/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { reason: string }).reason).toMatch(/disk_full/);
      expect(await nextStatus()).toBe(ServingStatus.NOT_SERVING);
      expect((await health.check({ service: "" })).status).toBe(ServingStatus.NOT_SERVING);
      expect((await health.check({ service: "leasequeue.v1.LeaseQueueService" })).status).toBe(ServingStatus.NOT_SERVING);
      expect(await writeFailures(metricsUrl, "disk_full")).toBeGreaterThanOrEqual(1);
      expect(server.lines.some((l) => l.includes("database writes are failing"))).toBe(true);

      // Space returns; nobody writes: the server notices on its own.
      unlinkSync(filler);
      expect(await nextStatus()).toBe(ServingStatus.SERVING);
      watchAbort.abort();
      expect((await fetch(`${metricsUrl}/health/ready`)).status).toBe(200);
      accept(await okJson(apiUrl, "SubmitBatch", batch(50, "after")));

      // Nothing acknowledged was lost, even across a crash of the server.
      const seen = new Set((await listAllJobs(apiUrl, "disk")).map((j) => j.id as string));
      expect([...acknowledged].filter((id) => !seen.has(id))).toEqual([]);
      await server.stop("SIGKILL");
      server = await spawnServer(db);
      const afterCrash = new Set((await listAllJobs(server.apiUrl, "disk")).map((j) => j.id as string));
      expect([...acknowledged].filter((id) => !afterCrash.has(id))).toEqual([]);
      console.log(`disk-full: all ${acknowledged.size} acknowledged jobs present after recovery and after a crash`);
    },
    60_000,
  );
});
