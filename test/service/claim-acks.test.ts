/**
 * Claim carrying acknowledgements (docs/api.md "Claim with acks") against a
 * real server, over Connect JSON (HTTP/1.1) and gRPC (binary, whose
 * responses the server encodes by hand): the acks applied first and
 * answered in request order, a refusal that leaves its neighbours alone,
 * malformed acks refusing the whole Claim with nothing applied or leased, a
 * long-poll that never holds an acknowledgement back, and the roles and
 * queue limits of authentication.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRegistry, type MessageInitShape } from "@bufbuild/protobuf";
import { anyUnpack, durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorInfoSchema, file_google_rpc_error_details } from "../../gen/ts/google/rpc/error_details_pb.js";
import {
  EventKind,
  JobState,
  LeaseQueueService,
  type AcknowledgementResult,
  type ClaimRequestSchema,
  type Lease,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { bearer, writeAuthFile } from "../helpers/auth.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

type LeaseQueueClient = Client<typeof LeaseQueueService>;
type ClaimInit = MessageInitShape<typeof ClaimRequestSchema>;

const servers: TestServer[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The two protocols: Connect JSON over HTTP/1.1 (reading ErrorInfo in results), and gRPC on the same port. */
const PROTOCOLS: Array<[string, (t: TestServer) => LeaseQueueClient]> = [
  [
    "Connect JSON",
    (t) =>
      createClient(
        LeaseQueueService,
        createConnectTransport({
          baseUrl: t.apiUrl,
          httpVersion: "1.1",
          useBinaryFormat: false,
          jsonOptions: { registry: createRegistry(file_google_rpc_error_details) },
        }),
      ),
  ],
  ["gRPC", (t) => createClient(LeaseQueueService, createGrpcTransport({ baseUrl: t.apiUrl }))],
];

async function server(flags: Record<string, string> = {}): Promise<TestServer> {
  const t = await startTestServer(flags);
  servers.push(t);
  return t;
}

/** Submits `n` jobs to `queue` and claims them all (without acks); returns the leases. */
async function leased(client: LeaseQueueClient, queue: string, n: number, headers?: Record<string, string>): Promise<Lease[]> {
  await client.submitBatch(
    { jobs: Array.from({ length: n }, (_, i) => ({ queue, task: "t", payload: { kind: { case: "numberValue", value: i } } })) },
    { headers },
  );
  const { leases, results } = await client.claim({ queue, workerId: "w1", maxJobs: n }, { headers });
  expect(leases).toHaveLength(n);
  expect(results).toEqual([]);
  return leases;
}

const ack = (lease: Lease, outcome: NonNullable<ClaimInit["acks"]>[number]["outcome"]) => ({
  jobId: lease.job!.id,
  leaseToken: lease.leaseToken,
  outcome,
});
const complete = (lease: Lease) => ack(lease, { case: "complete", value: {} });

async function stateOf(client: LeaseQueueClient, jobId: string): Promise<JobState> {
  return (await client.getJob({ jobId })).job!.state;
}

function reasonOf(result: AcknowledgementResult): string | undefined {
  for (const any of result.status?.details ?? []) {
    const info = anyUnpack(any, ErrorInfoSchema);
    if (info !== undefined) return info.reason;
  }
  return undefined;
}

async function refusal(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to fail");
}

describe.each(PROTOCOLS)("Claim with acks over %s", (_name, clientOf) => {
  it("applies the acks in request order, answers each, then leases as any Claim does", async () => {
    const t = await server();
    const client = clientOf(t);
    const [a, b, c] = await leased(client, "claim-acks", 3);
    // A job of another queue: acks may name any queue the caller works on.
    const [other] = await leased(client, "elsewhere", 1);
    await client.submit({ queue: "claim-acks", task: "next" });

    const res = await client.claim({
      queue: "claim-acks",
      workerId: "w1",
      acks: [
        ack(a, { case: "complete", value: { result: { kind: { case: "stringValue", value: "done" } } } }),
        ack(b, { case: "fail", value: { error: "boom", retryDelay: durationFromMs(60_000) } }),
        ack(c, { case: "heartbeat", value: { leaseDuration: durationFromMs(120_000) } }),
        complete(other),
      ],
    });
    expect(res.results.map((r) => r.jobId)).toEqual([a.job!.id, b.job!.id, c.job!.id, other.job!.id]);
    expect(res.results.map((r) => r.status?.code)).toEqual([0, 0, 0, 0]);
    expect(res.results[2].leaseExpireTime).toBeDefined();
    expect(res.results[0].leaseExpireTime).toBeUndefined();
    expect(res.leases.map((l) => l.job!.task)).toEqual(["next"]);

    expect((await client.getJob({ jobId: a.job!.id })).job).toMatchObject({
      state: JobState.COMPLETED,
      result: { kind: { case: "stringValue", value: "done" } },
    });
    expect((await client.getJob({ jobId: b.job!.id })).job).toMatchObject({ state: JobState.RETRY, lastError: "boom" });
    expect(await stateOf(client, c.job!.id)).toBe(JobState.RUNNING);
    expect(await stateOf(client, other.job!.id)).toBe(JobState.COMPLETED);
  });

  it("answers a refused ack on its own, with the single RPC's code and reason, and applies its neighbours", async () => {
    const t = await server();
    const client = clientOf(t);
    const [a, b] = await leased(client, "refusal", 2);
    const unknown = "01900000-0000-7000-8000-000000000000";
    const single = await refusal(client.complete({ jobId: b.job!.id, leaseToken: "not-the-token" }));
    const res = await client.claim({
      queue: "refusal",
      workerId: "w1",
      acks: [
        complete(a),
        { jobId: b.job!.id, leaseToken: "not-the-token", outcome: { case: "complete", value: {} } },
        { jobId: unknown, leaseToken: "x", outcome: { case: "release", value: {} } },
        complete(b),
      ],
    });
    expect(res.results.map((r) => r.status?.code)).toEqual([0, Code.Aborted, Code.NotFound, 0]);
    expect(res.results[1].status?.message).toBe(single.rawMessage);
    expect(reasonOf(res.results[1])).toBe("LEASE_REJECTED");
    expect(reasonOf(res.results[2])).toBe("JOB_NOT_FOUND");
    expect(await stateOf(client, a.job!.id)).toBe(JobState.COMPLETED);
    expect(await stateOf(client, b.job!.id)).toBe(JobState.COMPLETED);
    expect(res.leases).toEqual([]);
  });

  it("refuses a malformed ack as a whole, naming acks[i], and neither applies nor leases anything", async () => {
    const t = await server();
    const client = clientOf(t);
    const [lease] = await leased(client, "malformed", 1);
    await client.submit({ queue: "malformed", task: "waiting" });
    const good = complete(lease);
    const cases: Array<[ClaimInit["acks"], string]> = [
      [[good, { jobId: "nope", leaseToken: "t", outcome: { case: "complete", value: {} } }], "acks[1].job_id"],
      [[good, { jobId: lease.job!.id, outcome: { case: "complete", value: {} } }], "acks[1].lease_token"],
      [[good, { jobId: lease.job!.id, leaseToken: lease.leaseToken }], "acks[1].outcome"],
      [
        [good, { jobId: lease.job!.id, leaseToken: "t", outcome: { case: "fail", value: { error: "x".repeat(4097) } } }],
        "acks[1].fail.error",
      ],
      [Array.from({ length: 1001 }, () => good), "acks"],
    ];
    for (const [acks, field] of cases) {
      const error = await refusal(client.claim({ queue: "malformed", workerId: "w1", acks }));
      expect(error.code, field).toBe(Code.InvalidArgument);
      expect(error.rawMessage.startsWith(`${field}:`), `${field} in ${error.rawMessage}`).toBe(true);
    }
    expect(await stateOf(client, lease.job!.id)).toBe(JobState.RUNNING);
    const waiting = await client.listJobs({ queue: "malformed", states: [JobState.QUEUED] });
    expect(waiting.jobs.map((j) => j.task)).toEqual(["waiting"]);
  });

  it("commits the acks before a long-poll waits: another client sees them while the wait is pending", async () => {
    const t = await server();
    const client = clientOf(t);
    const [lease] = await leased(client, "long-poll", 1);

    // Another client follows the job's events.
    const watch = new AbortController();
    const completedEvent = (async () => {
      for await (const m of t.client.watchEvents({ jobId: lease.job!.id, afterSequence: 0n }, { signal: watch.signal })) {
        if (m.event?.kind === EventKind.COMPLETED) return m.event;
      }
      return undefined;
    })().catch(() => undefined);

    let settled = false;
    const claim = client
      .claim({ queue: "long-poll", workerId: "w1", wait: durationFromMs(30_000), acks: [complete(lease)] })
      .finally(() => (settled = true));
    try {
      expect(await completedEvent).toBeDefined();
      expect(await stateOf(t.client, lease.job!.id)).toBe(JobState.COMPLETED);
      expect(settled, "the Claim is still waiting for work").toBe(false);

      // Work arrives: the long-poll answers with it and with the ack's result.
      const next = await client.submit({ queue: "long-poll", task: "next" });
      const res = await claim;
      expect(res.leases.map((l) => l.job!.id)).toEqual([next.job!.id]);
      expect(res.results.map((r) => [r.jobId, r.status?.code])).toEqual([[lease.job!.id, 0]]);
    } finally {
      watch.abort();
    }
  });

  it("answers a Claim without acks with no results, as before", async () => {
    const t = await server();
    const client = clientOf(t);
    await client.submit({ queue: "plain", task: "t" });
    const res = await client.claim({ queue: "plain", workerId: "w1" });
    expect(res.leases).toHaveLength(1);
    expect(res.results).toEqual([]);
  });
});

describe.each(PROTOCOLS)("Claim with acks and authentication over %s", (_name, clientOf) => {
  async function authServer() {
    const dir = mkdtempSync(join(tmpdir(), "leasequeue-claim-acks-"));
    dirs.push(dir);
    const { path, tokens } = writeAuthFile(dir, [
      { name: "admin", roles: ["producer", "worker", "operator", "reader"] },
      { name: "reader", roles: ["reader"] },
      { name: "worker-mine", roles: ["worker"], queues: ["mine"] },
    ]);
    const t = await server({ "auth-file": path });
    return { client: clientOf(t), tokens };
  }

  it("refuses a reader-only token, applying nothing", async () => {
    const { client, tokens } = await authServer();
    const admin = bearer(tokens.admin);
    const [lease] = await leased(client, "mine", 1, admin);
    const error = await refusal(
      client.claim({ queue: "mine", workerId: "w1", acks: [complete(lease)] }, { headers: bearer(tokens.reader) }),
    );
    expect(error.code).toBe(Code.PermissionDenied);
    expect(error.rawMessage).toMatch(/Claim needs the role "worker"/);
    expect((await client.getJob({ jobId: lease.job!.id }, { headers: admin })).job!.state).toBe(JobState.RUNNING);
  });

  it("checks each ack's queue as Acknowledge does: one of a job outside the token's queues is answered as no job, alone", async () => {
    const { client, tokens } = await authServer();
    const admin = bearer(tokens.admin);
    const [mine] = await leased(client, "mine", 1, admin);
    const [theirs] = await leased(client, "theirs", 1, admin);
    const res = await client.claim(
      { queue: "mine", workerId: "w1", acks: [complete(theirs), complete(mine)] },
      { headers: bearer(tokens["worker-mine"]) },
    );
    expect(res.results.map((r) => r.status?.code)).toEqual([Code.NotFound, 0]);
    expect(res.results[0].status?.message).toBe(`job ${theirs.job!.id} does not exist`);
    const state = async (l: Lease) => (await client.getJob({ jobId: l.job!.id }, { headers: admin })).job!.state;
    expect(await state(theirs)).toBe(JobState.RUNNING);
    expect(await state(mine)).toBe(JobState.COMPLETED);
  });

  it("refuses a Claim on a queue outside the token's queues whole, applying none of its acks", async () => {
    const { client, tokens } = await authServer();
    const admin = bearer(tokens.admin);
    const [mine] = await leased(client, "mine", 1, admin);
    const error = await refusal(
      client.claim({ queue: "theirs", workerId: "w1", acks: [complete(mine)] }, { headers: bearer(tokens["worker-mine"]) }),
    );
    expect(error.code).toBe(Code.PermissionDenied);
    expect((await client.getJob({ jobId: mine.job!.id }, { headers: admin })).job!.state).toBe(JobState.RUNNING);
  });
});
