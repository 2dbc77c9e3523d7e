/**
 * KEDA's external scaler on the API port (docs/operations.md "Autoscaling
 * workers"), over gRPC as KEDA calls it, against a real server: the metric
 * is the queue's pending jobs (queued and due retries, running ones with
 * includeRunning, none while paused), IsActive and StreamIsActive follow it,
 * the metadata is validated key by key, and with authentication on a call
 * needs the `reader` role, with its token in the Authorization header or in
 * scalerMetadata as KEDA passes it.
 *
 * Runs on both engines (vitest.config.ts); on PostgreSQL also across two
 * servers on one database.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpcJs from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExternalScaler } from "../../gen/ts/externalscaler/externalscaler_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { startTestServer, TEST_ENGINE, type TestServer } from "../helpers/server.js";

type ScalerClient = Client<typeof ExternalScaler>;
type LeaseQueueClient = Client<typeof LeaseQueueService>;

/**
 * The contract says StreamIsActive pushes a change within a second: that is
 * its pace on a machine that keeps up, not something a test on a loaded one
 * can hold it to. Each push is waited for as an event; this bound, far beyond
 * any machine's pace, only turns a stream that never pushes into a failure
 * naming the push it waited for.
 */
const PUSH_BOUND_MS = 30_000;

const seconds = (n: number) => ({ seconds: BigInt(n) });

function scalerClient(t: TestServer): ScalerClient {
  return createClient(ExternalScaler, createGrpcTransport({ baseUrl: t.apiUrl }));
}

function leaseQueueClient(t: TestServer): LeaseQueueClient {
  return createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }));
}

async function refusal(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

/** A StreamIsActive call whose messages the test reads one at a time, each within `PUSH_BOUND_MS`. */
function openActivity(scaler: ScalerClient, scalerMetadata: Record<string, string>, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const messages = scaler.streamIsActive({ name: "workers", namespace: "jobs", scalerMetadata }, { signal: abort.signal, headers });
  const iterator = messages[Symbol.asyncIterator]();
  return {
    async next(what: string): Promise<boolean> {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`StreamIsActive did not push ${what} within ${PUSH_BOUND_MS} ms`)), PUSH_BOUND_MS);
      });
      try {
        const result = await Promise.race([iterator.next(), late]);
        if (result.done === true) throw new Error(`StreamIsActive ended before ${what}`);
        return result.value.result;
      } finally {
        clearTimeout(timer);
      }
    },
    close() {
      abort.abort();
    },
  };
}

describe("the external scaler without authentication", () => {
  let t: TestServer;
  let scaler: ScalerClient;
  let lq: LeaseQueueClient;

  beforeAll(async () => {
    t = await startTestServer();
    scaler = scalerClient(t);
    lq = leaseQueueClient(t);
  });

  afterAll(async () => {
    await t?.close();
  });

  const ref = (scalerMetadata: Record<string, string>) => ({ name: "workers", namespace: "jobs", scalerMetadata });

  /** Claims the only eligible job of `queue`. */
  async function claimOnly(queue: string) {
    const { leases } = await lq.claim({ queue, workerId: "w1", leaseDuration: seconds(60) });
    expect(leases).toHaveLength(1);
    return leases[0];
  }

  it("is inactive for an empty queue and active after a submit", async () => {
    expect(await scaler.isActive(ref({ queue: "is-active" }))).toMatchObject({ result: false });
    await lq.submit({ queue: "is-active", task: "t" });
    expect(await scaler.isActive(ref({ queue: "is-active" }))).toMatchObject({ result: true });
    // Every other key (KEDA sends scalerAddress too) is ignored.
    expect(await scaler.isActive(ref({ queue: "is-active", scalerAddress: "leasequeue:8080" }))).toMatchObject({ result: true });
  });

  it("asks for targetPendingPerReplica jobs per replica (10 unless set)", async () => {
    expect(await scaler.getMetricSpec(ref({ queue: "billing.eu:v2" }))).toMatchObject({
      metricSpecs: [{ metricName: "leasequeue-pending-billing-eu-v2", targetSize: 10n, targetSizeFloat: 10 }],
    });
    expect(await scaler.getMetricSpec(ref({ queue: "billing", targetPendingPerReplica: "25" }))).toMatchObject({
      metricSpecs: [{ metricName: "leasequeue-pending-billing", targetSize: 25n, targetSizeFloat: 25 }],
    });
  });

  it("counts queued jobs and retries that are due, running jobs only with includeRunning, and nothing that waits for its time", async () => {
    const queue = "metrics";
    await lq.submit({ queue, task: "runs" });
    await claimOnly(queue);
    await lq.submit({ queue, task: "backs-off" });
    const backingOff = await claimOnly(queue);
    await lq.fail({ jobId: backingOff.job!.id, leaseToken: backingOff.leaseToken, error: "boom", retryDelay: seconds(3600) });
    await lq.submit({ queue, task: "due-again" });
    const dueAgain = await claimOnly(queue);
    await lq.fail({ jobId: dueAgain.job!.id, leaseToken: dueAgain.leaseToken, error: "boom", retryDelay: seconds(0) });
    await lq.submit({ queue, task: "queued" });
    await lq.submit({ queue, task: "delayed", schedule: { case: "delay", value: seconds(3600) } });

    const metric = async (metadata: Record<string, string>) =>
      (await scaler.getMetrics({ scaledObjectRef: ref(metadata), metricName: "leasequeue-pending-metrics" })).metricValues;
    expect(await metric({ queue })).toMatchObject([{ metricName: "leasequeue-pending-metrics", metricValue: 2n, metricValueFloat: 2 }]);
    expect(await metric({ queue, includeRunning: "true" })).toMatchObject([{ metricValue: 3n, metricValueFloat: 3 }]);
    expect(await metric({ queue, includeRunning: "false" })).toMatchObject([{ metricValue: 2n }]);
  });

  it("counts nothing pending while the queue is paused, and is active again once it is resumed", async () => {
    const queue = "paused";
    await lq.submit({ queue, task: "t" });
    await lq.pauseQueue({ queue });
    expect(await scaler.isActive(ref({ queue }))).toMatchObject({ result: false });
    expect((await scaler.getMetrics({ scaledObjectRef: ref({ queue }) })).metricValues).toMatchObject([{ metricValue: 0n }]);
    await lq.resumeQueue({ queue });
    expect(await scaler.isActive(ref({ queue }))).toMatchObject({ result: true });
  });

  it("refuses metadata it cannot use with invalid_argument naming the key", async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{}, "scalerMetadata.queue: is required"],
      [{ queue: "" }, "scalerMetadata.queue: is required"],
      [{ queue: "no spaces" }, "scalerMetadata.queue: must be 1-64 characters"],
      [{ queue: "q", targetPendingPerReplica: "0" }, "scalerMetadata.targetPendingPerReplica: must be a whole number from 1 to 1000000"],
      [{ queue: "q", targetPendingPerReplica: "ten" }, "scalerMetadata.targetPendingPerReplica: must be a whole number"],
      [{ queue: "q", targetPendingPerReplica: "2.5" }, "scalerMetadata.targetPendingPerReplica: must be a whole number"],
      [{ queue: "q", includeRunning: "yes" }, 'scalerMetadata.includeRunning: must be "true" or "false"'],
    ];
    for (const [metadata, message] of cases) {
      for (const call of [() => scaler.isActive(ref(metadata)), () => scaler.getMetricSpec(ref(metadata))]) {
        const err = await refusal(call());
        expect([err.code, err.rawMessage], JSON.stringify(metadata)).toEqual([Code.InvalidArgument, expect.stringContaining(message)]);
      }
    }
    const inMetrics = await refusal(scaler.getMetrics({ scaledObjectRef: ref({ queue: "q", targetPendingPerReplica: "-1" }) }));
    expect([inMetrics.code, inMetrics.rawMessage]).toEqual([
      Code.InvalidArgument,
      "scaledObjectRef.scalerMetadata.targetPendingPerReplica: must be a whole number from 1 to 1000000",
    ]);
    const noRef = await refusal(scaler.getMetrics({ metricName: "leasequeue-pending-q" }));
    expect([noRef.code, noRef.rawMessage]).toEqual([Code.InvalidArgument, "scaledObjectRef.scalerMetadata.queue: is required"]);
    const stream = openActivity(scaler, { queue: "q", includeRunning: "1" });
    const streamErr = await refusal(stream.next("an answer"));
    expect([streamErr.code, streamErr.rawMessage]).toEqual([
      Code.InvalidArgument,
      'scalerMetadata.includeRunning: must be "true" or "false"',
    ]);
  });

  it("pushes true on StreamIsActive soon after a submit to an empty queue, and false once the queue is empty again", async () => {
    const queue = "streamed";
    const stream = openActivity(scaler, { queue });
    try {
      expect(await stream.next("the queue's first activity")).toBe(false);
      await lq.submit({ queue, task: "t" });
      expect(await stream.next("true after the submit")).toBe(true);
      const lease = await claimOnly(queue);
      expect(await stream.next("false once the job was leased")).toBe(false);
      await lq.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken });
    } finally {
      stream.close();
    }
  });

  it("counts the running job on StreamIsActive with includeRunning until it finishes", async () => {
    const queue = "streamed-running";
    const stream = openActivity(scaler, { queue, includeRunning: "true" });
    try {
      expect(await stream.next("the queue's first activity")).toBe(false);
      await lq.submit({ queue, task: "t" });
      expect(await stream.next("true after the submit")).toBe(true);
      const lease = await claimOnly(queue);
      await lq.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken });
      expect(await stream.next("false once the job completed")).toBe(false);
    } finally {
      stream.close();
    }
  });

  it("pushes true on StreamIsActive when a delayed job's time comes, with no commit to announce it", async () => {
    const queue = "streamed-delayed";
    await lq.submit({ queue, task: "t", schedule: { case: "delay", value: seconds(1) } });
    const stream = openActivity(scaler, { queue });
    try {
      expect(await stream.next("the queue's first activity")).toBe(false);
      // Due one second after the submit: pushed when the server's timer for that moment fires.
      expect(await stream.next("true once the delayed job is due")).toBe(true);
    } finally {
      stream.close();
    }
  });

  it("pushes a pause and a resume on StreamIsActive", async () => {
    const queue = "streamed-paused";
    await lq.submit({ queue, task: "t" });
    const stream = openActivity(scaler, { queue });
    try {
      expect(await stream.next("the queue's first activity")).toBe(true);
      await lq.pauseQueue({ queue });
      expect(await stream.next("false once paused")).toBe(false);
      await lq.resumeQueue({ queue });
      expect(await stream.next("true once resumed")).toBe(true);
    } finally {
      stream.close();
    }
  });

  it("leaves StreamMetricSpec unimplemented, so that KEDA keeps to GetMetricSpec", async () => {
    const stream = scaler.streamMetricSpec(ref({ queue: "q" }));
    const err = await refusal(
      (async () => {
        for await (const _ of stream) return;
      })(),
    );
    expect(err.code).toBe(Code.Unimplemented);
  });

  it("answers an independent gRPC client loaded from the vendored proto (as KEDA's generated client would call it)", async () => {
    const protoDir = fileURLToPath(new URL("../../proto", import.meta.url));
    const def = protoLoader.loadSync("externalscaler/externalscaler.proto", { includeDirs: [protoDir], longs: String });
    const pkg = grpcJs.loadPackageDefinition(def) as any;
    const client = new pkg.externalscaler.ExternalScaler(new URL(t.apiUrl).host, grpcJs.credentials.createInsecure());
    try {
      await lq.submit({ queue: "grpc-js", task: "t" });
      const response = await new Promise<any>((resolve, reject) =>
        client.getMetrics(
          { scaledObjectRef: { name: "workers", namespace: "jobs", scalerMetadata: { queue: "grpc-js" } }, metricName: "x" },
          (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res)),
        ),
      );
      expect(response.metricValues).toEqual([{ metricName: "x", metricValue: "1", metricValueFloat: 1 }]);
    } finally {
      client.close();
    }
  });
});

describe.runIf(TEST_ENGINE === "postgres")("the external scaler with two servers on one PostgreSQL database", () => {
  let first: TestServer;
  let second: TestServer;

  beforeAll(async () => {
    first = await startTestServer();
    second = await startTestServer(first.databaseFlags);
  });

  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("pushes on one server what was committed through the other", async () => {
    const queue = "two-servers";
    const other = leaseQueueClient(second);
    const stream = openActivity(scalerClient(first), { queue });
    try {
      expect(await stream.next("the queue's first activity")).toBe(false);
      await other.submit({ queue, task: "t" });
      expect(await stream.next("true after a submit through the other server")).toBe(true);
      const { leases } = await other.claim({ queue, workerId: "w1", leaseDuration: seconds(60) });
      expect(leases).toHaveLength(1);
      expect(await stream.next("false after a claim through the other server")).toBe(false);
    } finally {
      stream.close();
    }
  });
});

describe("the external scaler with authentication", () => {
  let dir: string;
  let t: TestServer;
  let tokens: Record<string, string>;
  let scaler: ScalerClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "leasequeue-scaler-auth-"));
    const file = writeAuthFile(dir, [
      { name: "keda", roles: ["reader"] },
      { name: "producer", roles: ["producer"] },
      { name: "keda-billing", roles: ["reader"], queues: ["billing"] },
    ]);
    tokens = file.tokens;
    t = await startTestServer({ "auth-file": file.path });
    scaler = scalerClient(t);
    await leaseQueueClient(t).submit({ queue: "billing", task: "t" }, { headers: bearer(tokens.producer) });
  });

  afterAll(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ref = (scalerMetadata: Record<string, string>) => ({ name: "workers", namespace: "jobs", scalerMetadata });

  it("refuses a call without a token as unauthenticated", async () => {
    const err = await refusal(scaler.isActive(ref({ queue: "billing" })));
    expect([err.code, err.rawMessage]).toEqual([
      Code.Unauthenticated,
      'this server requires "Authorization: Bearer <token>" or a token in scalerMetadata.tokenFromEnv',
    ]);
    const inMetrics = await refusal(scaler.getMetrics({ scaledObjectRef: ref({ queue: "billing" }) }));
    expect(inMetrics.rawMessage).toContain("scaledObjectRef.scalerMetadata.tokenFromEnv");
    const stream = openActivity(scaler, { queue: "billing" });
    expect((await refusal(stream.next("an answer"))).code).toBe(Code.Unauthenticated);
  });

  it("refuses an unknown or malformed token as unauthenticated, never repeating it", async () => {
    const unknown = "lq_" + "x".repeat(43);
    for (const [call, message] of [
      [() => scaler.isActive(ref({ queue: "billing", tokenFromEnv: unknown })), "the bearer token is not known to this server"],
      [() => scaler.isActive(ref({ queue: "billing", tokenFromEnv: "not a token" })), "scalerMetadata.tokenFromEnv is not a bearer token"],
      [() => scaler.isActive(ref({ queue: "billing" }), { headers: bearer(unknown) }), "the bearer token is not known to this server"],
    ] as const) {
      const err = await refusal(call());
      expect(err.rawMessage).not.toContain(unknown);
      expect([err.code, err.rawMessage]).toEqual([Code.Unauthenticated, message]);
    }
  });

  it("refuses a token without the reader role as permission_denied, in the header or in scalerMetadata", async () => {
    for (const call of [
      () => scaler.isActive(ref({ queue: "billing" }), { headers: bearer(tokens.producer) }),
      () => scaler.getMetricSpec(ref({ queue: "billing", tokenFromEnv: tokens.producer })),
    ]) {
      const err = await refusal(call());
      expect(err.code).toBe(Code.PermissionDenied);
      expect(err.rawMessage).toMatch(/^(IsActive|GetMetricSpec) needs the role "reader"; token "producer" has producer$/);
    }
  });

  it("answers a reader token in scalerMetadata, as KEDA passes it, or in the Authorization header", async () => {
    expect(await scaler.isActive(ref({ queue: "billing", tokenFromEnv: tokens.keda }))).toMatchObject({ result: true });
    expect(await scaler.isActive(ref({ queue: "billing" }), { headers: bearer(tokens.keda) })).toMatchObject({ result: true });
    const metrics = await scaler.getMetrics({ scaledObjectRef: ref({ queue: "billing", tokenFromEnv: tokens.keda }) });
    expect(metrics.metricValues).toMatchObject([{ metricValue: 1n }]);
    const stream = openActivity(scaler, { queue: "billing", tokenFromEnv: tokens.keda });
    try {
      expect(await stream.next("the queue's activity")).toBe(true);
    } finally {
      stream.close();
    }
  });

  it("keeps a token limited to queues to its queues", async () => {
    expect(await scaler.isActive(ref({ queue: "billing", tokenFromEnv: tokens["keda-billing"] }))).toMatchObject({ result: true });
    const err = await refusal(scaler.isActive(ref({ queue: "emails", tokenFromEnv: tokens["keda-billing"] })));
    expect([err.code, err.rawMessage]).toEqual([
      Code.PermissionDenied,
      'scalerMetadata.queue: queue "emails" is not permitted; token "keda-billing" may use only the queues billing',
    ]);
  });
});
