/**
 * The SDK against a server with authentication on, as docs/writing-a-worker.md
 * "Authentication" shows it: the `token` option (or an interceptor of your
 * own) sends the bearer token on every call, so a worker limited to its
 * queue works jobs over the Work stream (gRPC, Connect HTTP/2) and over
 * StreamClaims plus Acknowledge (Connect HTTP/1.1). Without an accepted token the worker leases nothing,
 * says why in a `fatal` `error` event (and on the console without
 * `onEvent`) and stops: a retry cannot help until someone changes the token
 * or the auth file, so `worker.closed` rejects with the refusal instead of
 * the worker reconnecting forever.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { createLeaseQueueClient, createWorker, JobState, type LeaseQueueClientOptions, type Worker } from "../../src/worker/index.js";
import { bearer, writeAuthFile, type TestToken } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
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
  expect(log.all("error")).toEqual([]);
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

it.each<[string, Omit<LeaseQueueClientOptions, "url" | "token">]>([
  ["gRPC (Work)", { transport: "grpc" }],
  ["Connect over HTTP/1.1 (StreamClaims)", { transport: "connect", httpVersion: "1.1" }],
])(
  "stops on permission_denied when its token may not use the queue, over %s: a fatal error, then closed, and leases nothing",
  { timeout: 60_000 },
  async (_name, protocol) => {
    const file = await serverWithJobs([PRODUCER, { name: "emails-workers", roles: ["worker"], queues: ["emails"] }], 1);
    const log = workerEventLog();
    const client = createLeaseQueueClient({ url: t!.apiUrl, ...protocol, token: file.tokens["emails-workers"] });
    const worker = createWorker({ client, queue: "billing", workerId: "intruder", onEvent: log.onEvent, handler: () => null });
    workers.push(worker);
    const refusal = await worker.closed.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refusal).toBeInstanceOf(ConnectError);
    expect((refusal as ConnectError).code).toBe(Code.PermissionDenied);
    expect((refusal as ConnectError).rawMessage).toMatch(/^(start\.)?queue: queue "billing" is not permitted; token "emails-workers"/);
    // Said once, then closed; no reconnect, no lease.
    expect(log.events.map((e) => e.type)).toEqual(["error", "closed"]);
    expect(log.all("error")).toEqual([{ type: "error", error: refusal, fatal: true }]);
    const stats = await t!.call("GetStats", {}, bearer(file.tokens.producer));
    expect(stats.body.queues).toEqual([expect.objectContaining({ queue: "billing", queued: "1" })]);
    await worker.close(); // resolves: the stop is done
  },
);

it("without a token says so once on the console and stops, its `closed` rejecting with unauthenticated", { timeout: 60_000 }, async () => {
  await serverWithJobs([PRODUCER], 1);
  const lines: string[] = [];
  vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
  vi.spyOn(console, "warn").mockImplementation((line: string) => void lines.push(line));
  // No onEvent: the console is where a refusal must show.
  const worker = createWorker({ url: t!.apiUrl, queue: "billing", workerId: "no-token", handler: () => null });
  workers.push(worker);
  await expect(worker.closed).rejects.toMatchObject({ code: Code.Unauthenticated });
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(
    /^leasequeue worker no-token: the server refused the worker on queue billing \(\[unauthenticated\] this server requires "Authorization: Bearer <token>"\); give the worker a token .*; the worker stopped$/,
  );
  expect(console.warn).not.toHaveBeenCalled(); // not a passing "stream broke"
});

it("stops on a token revoked while it works: the stream that replaces a broken one is refused", { timeout: 60_000 }, async () => {
  const file = await serverWithJobs([PRODUCER, BILLING_WORKERS], 1);
  const log = workerEventLog();
  const worker = createWorker({
    url: t!.apiUrl,
    token: file.tokens["billing-workers"],
    queue: "billing",
    workerId: "revoked",
    reconnectBackoff: { initialMs: 50, maxMs: 200 },
    onEvent: log.onEvent,
    handler: () => "ok",
  });
  workers.push(worker);
  await log.waitFor("completed");
  // The open stream keeps the token it started with: a restart breaks it, and the server comes back with the worker role revoked.
  rewriteWithRoles(file.path, "billing-workers", ["reader"]);
  const port = new URL(t!.apiUrl).port;
  await t!.close();
  t = undefined;
  await log.waitFor("disconnected");
  t = await startTestServer({ "auth-file": file.path, port });
  await expect(worker.closed).rejects.toMatchObject({ code: Code.PermissionDenied });
  expect(log.events.at(-1)).toEqual({ type: "closed" });
  expect(log.all("error").filter((e) => e.fatal)).toHaveLength(1);
});

/** Gives the entry `name` of the auth file at `path` new roles, keeping its hash. */
function rewriteWithRoles(path: string, name: string, roles: string[]): void {
  const doc = JSON.parse(readFileSync(path, "utf8")) as { tokens: Array<{ name: string; roles: string[] }> };
  for (const entry of doc.tokens) if (entry.name === name) entry.roles = roles;
  writeFileSync(path, JSON.stringify(doc));
}
