/**
 * Cancelling a running job (docs/api.md "Cancelling a running job") against
 * a real server: without include_running a RUNNING job is refused as
 * before; with it the job is CANCELLED at once with its reason, its lease
 * revoked (the holder's token is then LEASE_REJECTED, saying the job was
 * cancelled, on every path), and the stream that holds the lease is told:
 * `cancelled_job_ids` on Work, a `cancelled_job_id` message on
 * StreamClaims, its place in max_in_flight freed. Tests wait on messages
 * and answers, never on time.
 */
import { create } from "@bufbuild/protobuf";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseQueueService, WorkRequestSchema, type WorkRequest, type WorkResponse } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { requestQueue } from "../helpers/request-queue.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let s: TestServer;
let grpc: Client<typeof LeaseQueueService>;

beforeAll(async () => {
  s = await startTestServer();
  grpc = createClient(LeaseQueueService, createGrpcTransport({ baseUrl: s.apiUrl }));
});
afterAll(async () => {
  await s?.close();
});

const ok = (method: string, body: unknown): Promise<any> => s.ok(method, body);

async function running(queue: string): Promise<{ id: string; token: string }> {
  const { job } = await ok("Submit", { queue, task: "t" });
  const { leases } = await ok("Claim", { queue, workerId: "w" });
  return { id: job.id, token: leases[0].leaseToken };
}

describe("Cancel with include_running", () => {
  it("refuses a running job without it, as before", async () => {
    const { id } = await running("cr-refused");
    const res = await s.call("Cancel", { jobId: id, reason: "stop" });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("failed_precondition");
    expect(res.body.message).toContain("include_running");
    expect((await ok("GetJob", { jobId: id })).job.state).toBe("JOB_STATE_RUNNING");
  });

  it("cancels a running job at once, and its token is refused on every path, saying why", async () => {
    const { id, token } = await running("cr-token");
    const { job } = await ok("Cancel", { jobId: id, reason: "customer left", includeRunning: true });
    expect(job).toMatchObject({ state: "JOB_STATE_CANCELLED" });
    expect(job.leaseExpireTime).toBeUndefined();
    const events = (await ok("ListJobEvents", { jobId: id })).events;
    expect(events.at(-1)).toMatchObject({
      kind: "EVENT_KIND_CANCELLED",
      fromState: "JOB_STATE_RUNNING",
      toState: "JOB_STATE_CANCELLED",
      message: "customer left",
      workerId: "w",
    });
    for (const [method, body] of [
      ["Complete", { jobId: id, leaseToken: token, result: 1 }],
      ["Fail", { jobId: id, leaseToken: token, error: "late" }],
      ["Heartbeat", { jobId: id, leaseToken: token }],
    ] as const) {
      const res = await s.call(method, body);
      expect(res.status, method).toBe(409);
      expect(res.body.code).toBe("aborted");
      expect(res.body.message).toContain("was cancelled while running");
      expect(res.body.details[0]).toMatchObject({ type: "google.rpc.ErrorInfo", debug: { reason: "LEASE_REJECTED" } });
    }
    const acked = await ok("Acknowledge", { acks: [{ jobId: id, leaseToken: token, complete: {} }] });
    expect(acked.results[0].status.code).toBe(Code.Aborted);
    expect((await ok("GetJob", { jobId: id })).job.state).toBe("JOB_STATE_CANCELLED");
  });

  it("tells the Work stream holding the lease, frees its place, and refuses the late outcome", async () => {
    const queue = "cr-work";
    const done = new AbortController();
    const requests = requestQueue<WorkRequest>(done.signal);
    requests.push(create(WorkRequestSchema, { start: { queue, workerId: "work-w", maxInFlight: 1 } }));
    const responses = grpc.work(requests.stream, { signal: done.signal })[Symbol.asyncIterator]();
    const next = async (want: (r: WorkResponse) => boolean): Promise<WorkResponse> => {
      for (;;) {
        const r = await responses.next();
        if (r.done === true) throw new Error("the Work stream ended");
        if (want(r.value)) return r.value;
      }
    };
    try {
      const first = await ok("Submit", { queue, task: "t" });
      const second = await ok("Submit", { queue, task: "t" });
      const leased = await next((r) => r.leases.length > 0);
      expect(leased.leases.map((l) => l.job?.id)).toEqual([first.job.id]);
      await ok("Cancel", { jobId: first.job.id, includeRunning: true });
      const told = await next((r) => r.cancelledJobIds.length > 0 || r.leases.length > 0);
      expect(told.cancelledJobIds).toEqual([first.job.id]);
      // Its place in max_in_flight is free: the second job comes.
      const again = told.leases.length > 0 ? told : await next((r) => r.leases.length > 0);
      expect(again.leases.map((l) => l.job?.id)).toEqual([second.job.id]);
      requests.push(
        create(WorkRequestSchema, {
          acks: [{ jobId: first.job.id, leaseToken: leased.leases[0].leaseToken, outcome: { case: "complete", value: {} } }],
        }),
      );
      const result = await next((r) => r.results.length > 0);
      expect(result.results[0].status?.code).toBe(Code.Aborted);
    } finally {
      done.abort();
      await responses.return?.().catch(() => {});
    }
  });

  it("tells the StreamClaims stream holding the lease with a message that has no lease", async () => {
    const queue = "cr-stream";
    const done = new AbortController();
    const messages = grpc.streamClaims({ queue, workerId: "stream-w", maxInFlight: 1 }, { signal: done.signal })[Symbol.asyncIterator]();
    try {
      const { job } = await ok("Submit", { queue, task: "t" });
      let m = await messages.next();
      while (m.done !== true && m.value.lease === undefined) m = await messages.next();
      expect(m.value?.lease?.job?.id).toBe(job.id);
      await ok("Cancel", { jobId: job.id, includeRunning: true });
      m = await messages.next();
      while (m.done !== true && m.value.cancelledJobId === "") m = await messages.next();
      expect(m.value).toMatchObject({ cancelledJobId: job.id });
      expect(m.value?.lease).toBeUndefined();
    } finally {
      done.abort();
      await messages.return?.().catch(() => {});
    }
  });
});
