/**
 * WaitJob (docs/api.md "Workflows") against a real server: answered at once
 * for a job that has ended, woken by the commit that ends a job (complete,
 * permanent failure, cancel) while the call waits, answered at its timeout
 * with `finished: false`, every bound refused naming its field, and a
 * waiter the client leaves is gone. Each test waits on what the server
 * reports (the leasequeue_job_waiters gauge, the answer), never on time.
 */
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState, LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const UNKNOWN_ID = "0190b3c4-0000-7000-8000-000000000000";

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

async function waiters(): Promise<number> {
  const text = await (await fetch(`${s.metricsUrl}/metrics`)).text();
  return Number(/^leasequeue_job_waiters (\d+)$/m.exec(text)?.[1] ?? NaN);
}

/** Resolves once the server reports `n` WaitJob calls waiting (a state the server reports, not a time). */
async function untilWaiters(n: number): Promise<void> {
  while ((await waiters()) !== n) await new Promise((resolve) => setImmediate(resolve));
}

async function running(queue: string): Promise<{ id: string; token: string }> {
  const { job } = await ok("Submit", { queue, task: "t" });
  const { leases } = await ok("Claim", { queue, workerId: "w" });
  return { id: job.id, token: leases[0].leaseToken };
}

describe("WaitJob", () => {
  it("answers at once for a job that has ended, and with timeout 0s for one that has not", async () => {
    const { id, token } = await running("wait-now");
    const queued = await ok("Submit", { queue: "wait-now", task: "t" });
    expect(await ok("WaitJob", { jobId: queued.job.id, timeout: "0s" })).toEqual({
      job: expect.objectContaining({ state: "JOB_STATE_QUEUED" }),
    });
    await ok("Complete", { jobId: id, leaseToken: token, result: { pages: 3 } });
    const answer = await ok("WaitJob", { jobId: id });
    expect(answer.finished).toBe(true);
    expect(answer.job.state).toBe("JOB_STATE_COMPLETED");
    expect(answer.job.result).toEqual({ pages: 3 });
  });

  it("is woken by the commit that completes the job, with its result", async () => {
    const { id, token } = await running("wait-complete");
    const waiting = grpc.waitJob({ jobId: id, timeout: { seconds: 600n } });
    await untilWaiters(1);
    await ok("Complete", { jobId: id, leaseToken: token, result: "done" });
    const answer = await waiting;
    expect(answer.finished).toBe(true);
    expect(answer.job?.state).toBe(JobState.COMPLETED);
    expect(answer.job?.result?.kind).toEqual({ case: "stringValue", value: "done" });
    await untilWaiters(0);
  });

  it("is woken when the job is dead-lettered or cancelled, and several waiters on one job all are", async () => {
    const dead = await running("wait-ends");
    const cancelled = await ok("Submit", { queue: "wait-ends", task: "t", delay: "3600s" });
    const calls = [
      grpc.waitJob({ jobId: dead.id, timeout: { seconds: 600n } }),
      grpc.waitJob({ jobId: dead.id, timeout: { seconds: 600n } }),
      grpc.waitJob({ jobId: cancelled.job.id, timeout: { seconds: 600n } }),
    ];
    await untilWaiters(3);
    await ok("Fail", { jobId: dead.id, leaseToken: dead.token, error: "boom", permanent: true });
    await ok("Cancel", { jobId: cancelled.job.id, reason: "not needed" });
    const [a, b, c] = await Promise.all(calls);
    expect([a.job?.state, b.job?.state, c.job?.state]).toEqual([JobState.DEAD, JobState.DEAD, JobState.CANCELLED]);
    expect([a.finished, b.finished, c.finished]).toEqual([true, true, true]);
  });

  it("answers at the timeout with the job as it is then and finished false", async () => {
    const { id } = await running("wait-timeout");
    const answer = await grpc.waitJob({ jobId: id, timeout: { seconds: 0n, nanos: 200_000_000 } });
    expect(answer.finished).toBe(false);
    expect(answer.job?.state).toBe(JobState.RUNNING);
    await untilWaiters(0);
  });

  it("forgets a waiter whose client went away", async () => {
    const { id } = await running("wait-gone");
    const controller = new AbortController();
    const waiting = grpc.waitJob({ jobId: id, timeout: { seconds: 600n } }, { signal: controller.signal });
    await untilWaiters(1);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: Code.Canceled });
    await untilWaiters(0);
  });

  it("refuses a bad id, a timeout past 15 minutes and an unknown job, naming the field", async () => {
    const bad = await s.call("WaitJob", { jobId: "nope" });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain("job_id");
    const long = await s.call("WaitJob", { jobId: UNKNOWN_ID, timeout: "901s" });
    expect(long.status).toBe(400);
    expect(long.body.message).toContain("timeout");
    const negative = await s.call("WaitJob", { jobId: UNKNOWN_ID, timeout: "-1s" });
    expect(negative.status).toBe(400);
    const unknown = await s.call("WaitJob", { jobId: UNKNOWN_ID, timeout: "0s" });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    await expect(grpc.waitJob({ jobId: UNKNOWN_ID })).rejects.toSatisfy((e) => e instanceof ConnectError && e.code === Code.NotFound);
  });
});
