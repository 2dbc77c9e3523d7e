/**
 * LeaseQueue driven by `buf curl` (the npm @bufbuild/buf binary), the way an
 * operator pokes at a server they have no proto files for: gRPC over h2c with
 * the schema from server reflection, Duration fields in proto3 JSON, the
 * Connect protocol over HTTP/1.1, and the standard health service.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { REPO_ROOT, requireTool, run, skipUnlessAvailable, works } from "./tools.js";

const BUF = join(REPO_ROOT, "node_modules", ".bin", "buf");
const bufAvailable = existsSync(BUF) && (await works(BUF, ["--version"]));
const skip = skipUnlessAvailable(bufAvailable);

const SERVICE = "leasequeue.v1.LeaseQueueService";
const METHODS = [
  "Submit",
  "SubmitBatch",
  "Claim",
  "StreamClaims",
  "Heartbeat",
  "Complete",
  "Fail",
  "Release",
  "Snooze",
  "Redrive",
  "Cancel",
  "GetJob",
  "WaitJob",
  "ListJobs",
  "ListJobEvents",
  "GetStats",
  "WatchEvents",
  "Acknowledge",
  "Work",
  "PauseQueue",
  "ResumeQueue",
  "RedriveAll",
  "PurgeQueue",
  "CreateSchedule",
  "ListSchedules",
  "DeleteSchedule",
  "UpdateQueue",
  "ListGroups",
  "GetQueueActivity",
];
/** gRPC over cleartext HTTP/2; the schema comes from server reflection. */
const GRPC = ["--protocol", "grpc", "--http2-prior-knowledge"];

let server: TestServer;

beforeAll(async () => {
  if (skip) return;
  server = await startTestServer();
});

afterAll(async () => {
  await server?.close();
});

/** `buf curl` with `args` (flags and URL); rejects on a non-zero exit, with buf's stderr. */
async function bufCurl(args: string[]): Promise<string> {
  const res = await run(BUF, ["curl", ...args], { cwd: REPO_ROOT });
  if (res.code !== 0) throw new Error(`buf curl ${args.join(" ")} exited ${res.code}:\n${res.stderr}${res.stdout}`);
  return res.stdout;
}

/** One unary gRPC call with a JSON request; returns the parsed JSON response. */
async function grpcCall(method: string, body: unknown, service = SERVICE): Promise<any> {
  const out = await bufCurl([...GRPC, "-d", JSON.stringify(body), `${server.apiUrl}/${service}/${method}`]);
  return JSON.parse(out);
}

/**
 * Runs `call` and checks that `timestampOf` its answer (RFC 3339) is `ms`
 * after the server's time during the call: the server runs in this process,
 * on its clock, so that time lies between a reading taken just before the
 * call and one just after, however long the call took.
 */
async function expectSetDuring<T>(call: () => Promise<T>, timestampOf: (answer: T) => string, ms: number): Promise<T> {
  const before = Date.now();
  const answer = await call();
  const after = Date.now();
  const t = Date.parse(timestampOf(answer));
  expect(Number.isNaN(t), `not a timestamp: ${timestampOf(answer)}`).toBe(false);
  expect(t).toBeGreaterThanOrEqual(before + ms);
  expect(t).toBeLessThanOrEqual(after + ms);
  return answer;
}

describe.skipIf(skip)("buf curl (npm @bufbuild/buf) against a running server", () => {
  it("lists the services and every LeaseQueueService method through reflection", async () => {
    requireTool(bufAvailable, "node_modules/.bin/buf (npm ci)");

    const services = (await bufCurl([...GRPC, "--list-services", server.apiUrl])).trim().split("\n");
    expect(services).toEqual(expect.arrayContaining([SERVICE, "grpc.health.v1.Health"]));

    const methods = (await bufCurl([...GRPC, "--list-methods", server.apiUrl])).trim().split("\n");
    const ours = methods.filter((m) => m.startsWith(`${SERVICE}/`)).sort();
    expect(ours).toEqual(METHODS.map((m) => `${SERVICE}/${m}`).sort());
  }, 60_000);

  it("runs Submit -> Claim -> Heartbeat -> Complete over gRPC, with Duration fields as JSON strings", async () => {
    requireTool(bufAvailable, "node_modules/.bin/buf (npm ci)");
    const queue = "buf-curl";

    const request = {
      queue,
      task: "report.build",
      payload: { reportId: "r_17", pages: [1, 2, 3] },
      priority: 5,
      maxAttempts: 2,
      retryBaseDelay: "2.5s",
      idempotencyKey: "buf-curl-1",
    };
    const submitted = await grpcCall("Submit", request);
    const job = submitted.job;
    expect(job.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(job).toMatchObject({
      queue,
      task: "report.build",
      payload: { reportId: "r_17", pages: [1, 2, 3] },
      priority: 5,
      state: "JOB_STATE_QUEUED",
      maxAttempts: 2,
      retryBaseDelay: "2.500s",
    });
    expect(submitted.deduplicated ?? false).toBe(false);

    // The same key and request again: the original job, deduplicated.
    const replay = await grpcCall("Submit", request);
    expect(replay).toMatchObject({ job: { id: job.id }, deduplicated: true });

    // "30s" was read as 30 seconds: the lease ends 30 s after the claim.
    const claimed = await expectSetDuring(
      () => grpcCall("Claim", { queue, workerId: "buf-worker-1", leaseDuration: "30s", maxJobs: 5 }),
      (c) => c.leases?.[0]?.job?.leaseExpireTime,
      30_000,
    );
    expect(claimed.leases).toHaveLength(1);
    const lease = claimed.leases[0];
    expect(lease.leaseToken).toEqual(expect.any(String));
    expect(lease.job).toMatchObject({ id: job.id, state: "JOB_STATE_RUNNING", workerId: "buf-worker-1", attempts: 1 });

    const beat = await expectSetDuring(
      () => grpcCall("Heartbeat", { jobId: job.id, leaseToken: lease.leaseToken, leaseDuration: "120s" }),
      (b) => b.job?.leaseExpireTime,
      120_000,
    );
    expect(beat.job).toMatchObject({ id: job.id, state: "JOB_STATE_RUNNING" });

    const done = await grpcCall("Complete", { jobId: job.id, leaseToken: lease.leaseToken, result: { url: "s3://reports/r_17.pdf" } });
    expect(done.job).toMatchObject({ id: job.id, state: "JOB_STATE_COMPLETED", result: { url: "s3://reports/r_17.pdf" } });
    expect(done.job.finishTime).toEqual(expect.any(String));
    expect(done.job.leaseToken).toBeUndefined();

    const events = await grpcCall("ListJobEvents", { jobId: job.id });
    expect(events.events.map((e: any) => e.kind)).toEqual([
      "EVENT_KIND_SUBMITTED",
      "EVENT_KIND_CLAIMED",
      "EVENT_KIND_HEARTBEAT",
      "EVENT_KIND_COMPLETED",
    ]);

    // The lease is used up: buf reports the gRPC error and exits non-zero.
    const again = await run(
      BUF,
      ["curl", ...GRPC, "-d", JSON.stringify({ jobId: job.id, leaseToken: lease.leaseToken }), `${server.apiUrl}/${SERVICE}/Complete`],
      { cwd: REPO_ROOT },
    );
    expect(again.code).not.toBe(0);
    const error = JSON.parse(again.stderr);
    expect(error.code).toBe("aborted");
    // buf prints each detail as its type and base64 bytes (reflection does not
    // serve google.rpc, so it cannot render them as JSON).
    const info = (error.details as { type: string; value: string }[]).find((d) => d.type === "google.rpc.ErrorInfo");
    expect(info, again.stderr).toBeDefined();
    expect(fromBinary(ErrorInfoSchema, Buffer.from(info!.value, "base64"))).toMatchObject({
      reason: "LEASE_REJECTED",
      domain: "leasequeue",
    });
  }, 60_000);

  it("speaks the Connect protocol over HTTP/1.1 (schema from the repository's protos)", async () => {
    requireTool(bufAvailable, "node_modules/.bin/buf (npm ci)");
    // Reflection is a bidi stream, which needs HTTP/2, so over HTTP/1.1 the
    // schema comes from the proto files instead.
    const before = Date.now();
    const res = await run(
      BUF,
      [
        "curl",
        "--verbose",
        "--protocol",
        "connect",
        "--schema",
        "proto",
        "-d",
        JSON.stringify({ queue: "buf-connect", task: "mail.send", delay: "90s", payload: "hello" }),
        `${server.apiUrl}/${SERVICE}/Submit`,
      ],
      { cwd: REPO_ROOT },
    );
    const after = Date.now();
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/HTTP\/1\.1 200/);
    expect(res.stderr).not.toMatch(/h2c|HTTP\/2/);
    const submitted = JSON.parse(res.stdout);
    expect(submitted.job).toMatchObject({ queue: "buf-connect", task: "mail.send", payload: "hello", state: "JOB_STATE_QUEUED" });
    // "90s" delay: eligible 90 s after the call, which ran while buf curl did.
    const due = Date.parse(submitted.job.scheduleTime);
    expect(due).toBeGreaterThanOrEqual(before + 90_000);
    expect(due).toBeLessThanOrEqual(after + 90_000);
  }, 60_000);

  it("answers grpc.health.v1.Health/Check with SERVING", async () => {
    requireTool(bufAvailable, "node_modules/.bin/buf (npm ci)");
    expect(await grpcCall("Check", {}, "grpc.health.v1.Health")).toEqual({ status: "SERVING" });
    expect(await grpcCall("Check", { service: SERVICE }, "grpc.health.v1.Health")).toEqual({ status: "SERVING" });
  }, 60_000);
});
