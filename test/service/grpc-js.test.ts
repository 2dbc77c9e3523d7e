/**
 * The same API from an independent gRPC implementation: @grpc/grpc-js with
 * stubs loaded at run time from proto/ (no generated TypeScript involved),
 * over HTTP/2 cleartext on the shared API port.
 */
import { createRegistry, fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema, file_google_rpc_error_details } from "../../gen/ts/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/ts/google/rpc/status_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const protoDir = fileURLToPath(new URL("../../proto", import.meta.url));

type Unary = (req: object, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: any) => void) => void;

let t: TestServer;
let client: Record<string, Unary> & grpc.Client;
let health: Record<string, Unary> & grpc.Client;

function call(c: Record<string, Unary>, method: string, req: object, md = new grpc.Metadata()): Promise<any> {
  return new Promise((resolve, reject) => c[method].call(c, req, md, (err, res) => (err ? reject(err) : resolve(res))));
}

async function refusal(promise: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await promise;
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error("expected the call to fail");
}

function richStatus(err: grpc.ServiceError) {
  const [bin] = err.metadata.get("grpc-status-details-bin") as Buffer[];
  expect(bin, "grpc-status-details-bin trailer").toBeDefined();
  const status = fromBinary(StatusSchema, bin);
  const registry = createRegistry(file_google_rpc_error_details);
  return { status, details: status.details.map((d) => anyUnpack(d, registry)) };
}

beforeAll(async () => {
  t = await startTestServer();
  const def = protoLoader.loadSync(["leasequeue/v1/leasequeue.proto", "grpc/health/v1/health.proto"], {
    includeDirs: [protoDir],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const target = new URL(t.apiUrl).host;
  client = new pkg.leasequeue.v1.LeaseQueueService(target, grpc.credentials.createInsecure());
  health = new pkg.grpc.health.v1.Health(target, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  health?.close();
  await t?.close();
});

describe("over gRPC with @grpc/grpc-js", () => {
  it("runs a full job cycle with the idempotency key as metadata", async () => {
    const md = new grpc.Metadata();
    md.set("idempotency-key", "grpc-inv-1");
    const payload = { structValue: { fields: { invoiceId: { stringValue: "inv_481" } } } };
    const submitted = await call(client, "submit", { queue: "grpc", task: "invoice.generate", payload }, md);
    expect(submitted.job.state).toBe("JOB_STATE_QUEUED");
    const again = await call(client, "submit", { queue: "grpc", task: "invoice.generate", payload, idempotencyKey: "grpc-inv-1" });
    expect(again).toMatchObject({ deduplicated: true, job: { id: submitted.job.id } });

    const claimed = await call(client, "claim", { queue: "grpc", workerId: "py-worker", leaseDuration: { seconds: 30 } });
    const lease = claimed.leases[0];
    expect(lease.job.id).toBe(submitted.job.id);
    expect(lease.leaseToken.length).toBeGreaterThan(20);

    const beat = await call(client, "heartbeat", { jobId: lease.job.id, leaseToken: lease.leaseToken });
    expect(beat.job.state).toBe("JOB_STATE_RUNNING");
    const done = await call(client, "complete", {
      jobId: lease.job.id,
      leaseToken: lease.leaseToken,
      result: { numberValue: 3 },
    });
    expect(done.job).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { numberValue: 3 } });
  });

  it("reports a wrong token as ABORTED with google.rpc.ErrorInfo in the status details", async () => {
    const submitted = await call(client, "submit", { queue: "grpc2", task: "t" });
    await call(client, "claim", { queue: "grpc2", workerId: "w" });
    const err = await refusal(call(client, "complete", { jobId: submitted.job.id, leaseToken: "forged" }));
    expect(err.code).toBe(grpc.status.ABORTED);
    const { status, details } = richStatus(err);
    expect(status.code).toBe(grpc.status.ABORTED);
    const info = details.find((d) => d?.$typeName === ErrorInfoSchema.typeName);
    expect(info).toMatchObject({ reason: "LEASE_REJECTED", domain: "leasequeue" });
  });

  it("reports an out-of-bounds field as INVALID_ARGUMENT with a BadRequest naming it", async () => {
    const err = await refusal(call(client, "claim", { queue: "grpc", workerId: "w", maxJobs: 101 }));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("max_jobs");
    const { details } = richStatus(err);
    const bad = details.find((d) => d?.$typeName === BadRequestSchema.typeName) as any;
    expect(bad.fieldViolations[0].field).toBe("max_jobs");
  });

  it("snoozes a job and stores a heartbeat's progress, refusing a delay past 30 days with a BadRequest naming it", async () => {
    const submitted = await call(client, "submit", { queue: "grpc-snooze", task: "t" });
    const { leases } = await call(client, "claim", { queue: "grpc-snooze", workerId: "w" });
    const beat = await call(client, "heartbeat", {
      jobId: submitted.job.id,
      leaseToken: leases[0].leaseToken,
      progress: { structValue: { fields: { pct: { numberValue: 40 } } } },
    });
    expect(beat.job.progress).toMatchObject({ structValue: { fields: { pct: { numberValue: 40 } } } });
    const err = await refusal(
      call(client, "snooze", { jobId: submitted.job.id, leaseToken: leases[0].leaseToken, delay: { seconds: 30 * 86400 + 1 } }),
    );
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    const bad = richStatus(err).details.find((d) => d?.$typeName === BadRequestSchema.typeName) as any;
    expect(bad.fieldViolations[0].field).toBe("delay");
    const snoozed = await call(client, "snooze", { jobId: submitted.job.id, leaseToken: leases[0].leaseToken, delay: { seconds: 30 } });
    // defaults: false in proto-loader: a zero attempts count is simply absent.
    expect(snoozed.job).toMatchObject({ state: "JOB_STATE_QUEUED", deliveries: 1 });
    expect(snoozed.job.attempts ?? 0).toBe(0);
    const events = await call(client, "listJobEvents", { jobId: submitted.job.id });
    expect(events.events.map((e: any) => e.kind)).toEqual([
      "EVENT_KIND_SUBMITTED",
      "EVENT_KIND_CLAIMED",
      "EVENT_KIND_HEARTBEAT",
      "EVENT_KIND_PROGRESS",
      "EVENT_KIND_SNOOZED",
    ]);
  });

  it("reports an unknown job as NOT_FOUND", async () => {
    const err = await refusal(call(client, "getJob", { jobId: "01890000-0000-7000-8000-000000000000" }));
    expect(err.code).toBe(grpc.status.NOT_FOUND);
  });

  it("answers the standard health check", async () => {
    expect(await call(health, "check", { service: "" })).toEqual({ status: "SERVING" });
    expect(await call(health, "check", { service: "leasequeue.v1.LeaseQueueService" })).toEqual({ status: "SERVING" });
  });

  it("answers SubmitBatch with every result in request order, whole or JOB_VIEW_BASIC, and marks replays deduplicated", async () => {
    const later = String(Math.floor(Date.now() / 1000) + 86_400);
    const jobs = [
      { queue: "grpc-batch", task: "a", payload: { structValue: { fields: { i: { numberValue: 1 } } } }, idempotencyKey: "k1" },
      { queue: "grpc-batch", task: "b", payload: { listValue: { values: [{ stringValue: "x" }, { boolValue: true }] } }, priority: -3 },
      { queue: "grpc-batch", task: "c", scheduleTime: { seconds: later, nanos: 5_000_000 } },
    ];
    const whole = await call(client, "submitBatch", { jobs });
    expect(whole.results.map((r: any) => r.job.task)).toEqual(["a", "b", "c"]);
    expect(whole.results[0].job.payload).toEqual({
      structValue: { fields: { i: { numberValue: 1, kind: "numberValue" } } },
      kind: "structValue",
    });
    expect(whole.results[1].job).toMatchObject({ priority: -3, state: "JOB_STATE_QUEUED", queue: "grpc-batch" });
    expect(whole.results[2].job).toMatchObject({ state: "JOB_STATE_QUEUED", scheduleTime: { seconds: later, nanos: 5_000_000 } });
    expect(whole.results.map((r: any) => r.deduplicated ?? false)).toEqual([false, false, false]);

    const basic = await call(client, "submitBatch", { jobs: [jobs[0], { queue: "grpc-batch", task: "d" }], view: "JOB_VIEW_BASIC" });
    expect(basic.results[0]).toMatchObject({ deduplicated: true, job: { id: whole.results[0].job.id, task: "a" } });
    expect(basic.results[0].job.payload).toBeUndefined();
    expect(basic.results[1].job).toMatchObject({ task: "d", state: "JOB_STATE_QUEUED" });
    expect(basic.results[1].deduplicated ?? false).toBe(false);
  });

  it("acknowledges a batch with Acknowledge, answering each with its status", async () => {
    await call(client, "submitBatch", {
      jobs: [
        { queue: "grpc-ack", task: "t" },
        { queue: "grpc-ack", task: "t" },
      ],
      view: "JOB_VIEW_BASIC",
    });
    const { leases } = await call(client, "claim", { queue: "grpc-ack", workerId: "w", maxJobs: 2 });
    const res = await call(client, "acknowledge", {
      acks: [
        { jobId: leases[0].job.id, leaseToken: leases[0].leaseToken, complete: { result: { numberValue: 1 } } },
        { jobId: leases[1].job.id, leaseToken: "forged", fail: { error: "x" } },
      ],
    });
    expect(res.results.map((r: any) => r.status.code ?? 0)).toEqual([0, grpc.status.ABORTED]);
    expect(res.results[1].status.message).toMatch(/lease_token/);
    // proto-loader keeps google.protobuf.Any's field names as they are in the proto.
    const [detail] = res.results[1].status.details;
    expect(detail.type_url).toBe("type.googleapis.com/google.rpc.ErrorInfo");
    expect(fromBinary(ErrorInfoSchema, detail.value)).toMatchObject({ reason: "LEASE_REJECTED", domain: "leasequeue" });
  });

  it("claims with acks: the results in request order beside the next leases", async () => {
    await call(client, "submitBatch", { jobs: Array.from({ length: 3 }, (_, i) => ({ queue: "grpc-claim-acks", task: `t${i}` })) });
    const first = await call(client, "claim", { queue: "grpc-claim-acks", workerId: "w", maxJobs: 2 });
    const [a, b] = first.leases;
    const res = await call(client, "claim", {
      queue: "grpc-claim-acks",
      workerId: "w",
      maxJobs: 2,
      acks: [
        { jobId: a.job.id, leaseToken: "forged", complete: {} },
        { jobId: a.job.id, leaseToken: a.leaseToken, complete: { result: { numberValue: 1 } } },
        { jobId: b.job.id, leaseToken: b.leaseToken, heartbeat: {} },
      ],
    });
    expect(res.results.map((r: any) => [r.jobId, r.status.code ?? 0])).toEqual([
      [a.job.id, grpc.status.ABORTED],
      [a.job.id, 0],
      [b.job.id, 0],
    ]);
    expect(res.results[2].leaseExpireTime).toBeDefined();
    expect(res.leases.map((l: any) => l.job.task)).toEqual(["t2"]);
  });

  it("works a queue over the Work bidi stream", async () => {
    await call(client, "submitBatch", { jobs: Array.from({ length: 5 }, () => ({ queue: "grpc-work", task: "t" })) });
    const stream = (client as any).work() as grpc.ClientDuplexStream<any, any>;
    const seen: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on("data", (m: any) => {
        seen.push(m);
        const leases = m.leases ?? [];
        if (leases.length > 0) {
          stream.write({ acks: leases.map((l: any) => ({ jobId: l.job.id, leaseToken: l.leaseToken, complete: {} })) });
        }
        if (seen.flatMap((x) => x.results ?? []).length === 5) stream.end();
      });
      stream.on("error", reject);
      stream.on("end", resolve);
    });
    stream.write({ start: { queue: "grpc-work", workerId: "grpc-js", maxInFlight: 10 } });
    await done;
    const results = seen.flatMap((m) => m.results ?? []);
    expect(results.every((r: any) => (r.status.code ?? 0) === 0)).toBe(true);
    const stats = await call(client, "getStats", {});
    expect(stats.queues.find((q: any) => q.queue === "grpc-work").completed).toBe("5");
  });
});
