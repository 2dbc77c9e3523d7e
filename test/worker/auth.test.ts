/**
 * The SDK against a server with authentication on, as docs/writing-a-worker.md
 * "Authentication" shows it: the `token` option (or an interceptor of your
 * own) sends the bearer token on every call, so a worker limited to its
 * queue works jobs over the Work stream (gRPC, Connect HTTP/2) and over
 * StreamClaims plus Acknowledge (Connect HTTP/1.1). Without an accepted token the worker leases nothing
 * and says why in a `refused` event (and on the console without
 * `onEvent`), keeps trying, and gets through once the auth file is fixed
 * and reloaded, without a restart.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, type Interceptor } from "@connectrpc/connect";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { createLeaseQueueClient, createWorker, JobState, type LeaseQueueClientOptions, type Worker } from "../../src/worker/index.js";
import { bearer, writeAuthFile, type TestToken } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { workerEventLog } from "../helpers/worker-events.js";

let t: TestServer | undefined;
let dir: string;
const workers: Worker[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-worker-auth-"));
});
afterEach(async () => {
  vi.restoreAllMocks();
  for (const w of workers.splice(0)) await w.close();
  await t?.close();
  t = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const PRODUCER: TestToken = { name: "producer", roles: ["producer", "reader"] };
const BILLING_WORKERS: TestToken = { name: "billing-workers", roles: ["worker", "reader"], queues: ["billing"] };

/** A server with `entries` in its auth file, and `count` billing jobs submitted with the producer's token. */
async function serverWithJobs(entries: TestToken[], count: number) {
  const file = writeAuthFile(dir, entries);
  t = await startTestServer({ "auth-file": file.path });
  if (count > 0) {
    const jobs = Array.from({ length: count }, (_, i) => ({ queue: "billing", task: "t", payload: { i } }));
    const res = await t.call("SubmitBatch", { jobs }, bearer(file.tokens.producer));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
  return file;
}

it.each<[string, Omit<LeaseQueueClientOptions, "url">]>([
  ["gRPC (Work)", { transport: "grpc" }],
  ["Connect over HTTP/2 (Work)", { transport: "connect", httpVersion: "2" }],
  ["Connect over HTTP/1.1 (StreamClaims and Acknowledge)", { transport: "connect", httpVersion: "1.1" }],
])("works jobs with the token option and a worker token limited to its queue, over %s", { timeout: 20_000 }, async (_name, protocol) => {
  const file = await serverWithJobs([PRODUCER, BILLING_WORKERS], 20);
  const log = workerEventLog();
  const client = createLeaseQueueClient({ url: t!.apiUrl, ...protocol, token: file.tokens["billing-workers"] });
  workers.push(
    createWorker({
      client,
      queue: "billing",
      workerId: "billing-1",
      concurrency: 4,
      onEvent: log.onEvent,
      handler: (job) => ({ done: job.id }),
    }),
  );
  const completed = await log.waitFor("completed", 20);
  expect(completed.every((e) => e.job.state === JobState.COMPLETED)).toBe(true);
  expect(log.all("error")).toEqual([]);
  expect(log.all("refused")).toEqual([]);
  // Unary calls carry it too (the worker role may read with "reader").
  const stats = await client.getStats({});
  expect(stats.queues.map((q) => [q.queue, q.completed])).toEqual([["billing", 20n]]);
});

it("takes the token with `url` in createWorker, and refuses it beside `client`", { timeout: 60_000 }, async () => {
  const file = await serverWithJobs([PRODUCER, BILLING_WORKERS], 3);
  const token = file.tokens["billing-workers"];
  const log = workerEventLog();
  workers.push(
    createWorker({ url: t!.apiUrl, token, queue: "billing", workerId: "billing-url", onEvent: log.onEvent, handler: () => null }),
  );
  await log.waitFor("completed", 3);
  const client = createLeaseQueueClient({ url: t!.apiUrl, token });
  expect(() => createWorker({ client, token, queue: "billing", workerId: "w", handler: () => null })).toThrow(/`token` goes with `url`/);
});

it("still works with an interceptor of your own that adds the header", { timeout: 60_000 }, async () => {
  const file = await serverWithJobs([PRODUCER, BILLING_WORKERS], 5);
  const withToken =
    (token: string): Interceptor =>
    (next) =>
    (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
  const log = workerEventLog();
  const client = createLeaseQueueClient({ url: t!.apiUrl, interceptors: [withToken(file.tokens["billing-workers"])] });
  workers.push(createWorker({ client, queue: "billing", workerId: "billing-2", onEvent: log.onEvent, handler: () => null }));
  await log.waitFor("completed", 5);
  expect(log.all("refused")).toEqual([]);
});

it("refuses a token it could not send, without quoting it", () => {
  const secret = "lq_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG\n";
  let thrown: unknown;
  try {
    createLeaseQueueClient({ url: "http://127.0.0.1:1", token: secret });
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(TypeError);
  expect((thrown as Error).message).toMatch(/token \(47 characters\) is not a bearer token/);
  expect((thrown as Error).message).not.toContain("lq_0123");
  expect(() => createLeaseQueueClient({ url: "http://127.0.0.1:1", token: "Bearer abc" })).toThrow(TypeError);
  expect(() => createLeaseQueueClient({ url: "http://127.0.0.1:1", token: "" })).toThrow(TypeError);
});

it("reports permission_denied as `refused` when its token may not use the queue, and leases nothing", { timeout: 60_000 }, async () => {
  const file = await serverWithJobs([PRODUCER, { name: "emails-workers", roles: ["worker"], queues: ["emails"] }], 1);
  const log = workerEventLog();
  const client = createLeaseQueueClient({ url: t!.apiUrl, token: file.tokens["emails-workers"] });
  workers.push(createWorker({ client, queue: "billing", workerId: "intruder", onEvent: log.onEvent, handler: () => null }));
  const [refused] = await log.waitFor("refused", 2);
  expect(refused.error.code).toBe(Code.PermissionDenied);
  expect(refused.error.rawMessage).toMatch(/^start\.queue: queue "billing" is not permitted; token "emails-workers"/);
  expect(refused.retryInMs).toBeGreaterThan(0);
  expect(log.all("disconnected")).toEqual([]);
  expect(log.all("lease")).toEqual([]);
  const stats = await t!.call("GetStats", {}, bearer(file.tokens.producer));
  expect(stats.body.queues).toEqual([expect.objectContaining({ queue: "billing", queued: "1" })]);
});

it("without a token says so on the console, keeps trying, and works once the auth file is reloaded", { timeout: 60_000 }, async () => {
  const file = await serverWithJobs([PRODUCER], 2);
  const lines: string[] = [];
  vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
  vi.spyOn(console, "warn").mockImplementation((line: string) => void lines.push(line));
  // No onEvent: the console is where a refusal must show.
  workers.push(
    createWorker({
      url: t!.apiUrl,
      queue: "billing",
      workerId: "no-token",
      reconnectBackoff: { initialMs: 50, maxMs: 200 },
      handler: () => null,
    }),
  );
  await until("the refusal said twice on the console (once per attempt)", () => lines.length >= 2, { timeoutMs: 20_000 });
  expect(lines[0]).toMatch(
    /^leasequeue worker no-token: the server refused the worker on queue billing \(\[unauthenticated\] this server requires "Authorization: Bearer <token>"\); give the worker a token/,
  );
  expect(
    lines.every((l) => /the server refused the worker/.test(l)),
    lines.join("\n"),
  ).toBe(true);
  expect(console.warn).not.toHaveBeenCalled(); // not a passing "stream broke"

  // A worker token whose entry is fixed later: refused until the reload, then it works.
  const log = workerEventLog();
  const token = file.tokens.producer; // in the file, but without the worker role
  workers.push(
    createWorker({
      url: t!.apiUrl,
      token,
      queue: "billing",
      workerId: "fixed-later",
      onEvent: log.onEvent,
      reconnectBackoff: { initialMs: 50, maxMs: 200 },
      handler: () => "ok",
    }),
  );
  const [refused] = await log.waitFor("refused");
  expect(refused.error.code).toBe(Code.PermissionDenied);
  rewriteWithRoles(file.path, "producer", ["producer", "reader", "worker"]);
  expect(t!.server.reloadAuth()).toBe(true);
  await log.waitFor("completed", 2);
  expect(log.all("connected").length).toBeGreaterThanOrEqual(1);
});

/** Gives the entry `name` of the auth file at `path` new roles, keeping its hash. */
function rewriteWithRoles(path: string, name: string, roles: string[]): void {
  const doc = JSON.parse(readFileSync(path, "utf8")) as { tokens: Array<{ name: string; roles: string[] }> };
  for (const entry of doc.tokens) if (entry.name === name) entry.roles = roles;
  writeFileSync(path, JSON.stringify(doc));
}
