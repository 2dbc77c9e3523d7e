/**
 * The SDK against a server with authentication on, as README shows it: a
 * token added by an interceptor, limited to the worker's queue, works jobs
 * over the Work stream (gRPC) and over StreamClaims plus Acknowledge
 * (Connect HTTP/1.1); without a token the worker gets nothing done.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, type Interceptor } from "@connectrpc/connect";
import { afterEach, expect, it } from "vitest";
import { createLeaseQueueClient, createWorker, JobState, type Worker } from "../../src/worker/index.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { workerEventLog } from "../helpers/worker-events.js";

let t: TestServer | undefined;
let dir: string | undefined;
const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) await w.close();
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const withToken = (token: string): Interceptor => (next) => (req) => {
  req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

it.each([
  ["gRPC (Work)", { transport: "grpc" as const }],
  ["Connect over HTTP/1.1 (StreamClaims and Acknowledge)", { transport: "connect" as const, httpVersion: "1.1" as const }],
])("works jobs with a worker token limited to its queue, over %s", { timeout: 20_000 }, async (_name, protocol) => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-worker-auth-"));
  const file = writeAuthFile(dir, [
    { name: "producer", roles: ["producer"] },
    { name: "billing-workers", roles: ["worker", "reader"], queues: ["billing"] },
  ]);
  t = await startTestServer({ "auth-file": file.path });
  const res = await t.call("SubmitBatch", { jobs: Array.from({ length: 20 }, (_, i) => ({ queue: "billing", task: "t", payload: { i } })) }, bearer(file.tokens.producer!));
  expect(res.status).toBe(200);

  const log = workerEventLog();
  const client = createLeaseQueueClient({ url: t.apiUrl, ...protocol, interceptors: [withToken(file.tokens["billing-workers"]!)] });
  workers.push(createWorker({ client, queue: "billing", workerId: "billing-1", concurrency: 4, onEvent: log.onEvent, handler: async (job) => ({ done: job.id }) }));
  const completed = await log.waitFor("completed", 20);
  expect(completed.every((e) => e.job.state === JobState.COMPLETED)).toBe(true);
  expect(log.all("error")).toEqual([]);
});

it("reports the refusal when its token may not use the queue, and leases nothing", { timeout: 20_000 }, async () => {
  dir = mkdtempSync(join(tmpdir(), "leasequeue-worker-auth-"));
  const file = writeAuthFile(dir, [
    { name: "producer", roles: ["producer"] },
    { name: "emails-workers", roles: ["worker"], queues: ["emails"] },
  ]);
  t = await startTestServer({ "auth-file": file.path });
  const submitted = await t.call("Submit", { queue: "billing", task: "t" }, bearer(file.tokens.producer!));
  const log = workerEventLog();
  const client = createLeaseQueueClient({ url: t.apiUrl, interceptors: [withToken(file.tokens["emails-workers"]!)] });
  workers.push(createWorker({ client, queue: "billing", workerId: "intruder", onEvent: log.onEvent, handler: async () => null }));
  const [refused] = await log.waitFor("disconnected", 1);
  expect(refused!.error.code).toBe(Code.PermissionDenied);
  expect(refused!.error.rawMessage).toMatch(/^start\.queue: queue "billing" is not permitted; token "emails-workers"/);
  expect(log.all("completed")).toEqual([]);
  const job = await t.call("GetJob", { jobId: submitted.body.job.id }, bearer(file.tokens.producer!));
  expect(job.status).toBe(403); // the producer may not read either
});
