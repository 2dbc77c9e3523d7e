/**
 * The job lifecycle against a real server on port 0, over Connect JSON (as
 * curl and browsers call it) and over the typed Connect client.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/ts/google/rpc/error_details_pb.js";
import { JobState } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

async function submit(body: Record<string, unknown>, headers?: Record<string, string>) {
  const res = await t.call("Submit", body, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { job: any; deduplicated?: boolean };
}

async function claim(queue: string, extra: Record<string, unknown> = {}) {
  const res = await t.call("Claim", { queue, workerId: "worker-01", ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.leases ?? []) as Array<{ job: any; leaseToken: string }>;
}

async function claimWaiters(): Promise<number> {
  const text = await (await fetch(`${t.metricsUrl}/metrics`)).text();
  return Number(/^leasequeue_claim_waiters (\d+)$/m.exec(text)?.[1] ?? NaN);
}

/** Waits until the server reports `n` parked long-poll claims (it parks them before any submit is sent). */
async function untilClaimWaiters(n: number): Promise<void> {
  await until(`${n} parked long-poll claims`, async () => (await claimWaiters()) === n);
}

describe("over Connect JSON", () => {
  it("runs submit -> claim -> heartbeat -> complete and records each transition", async () => {
    const { job } = await submit({ queue: "billing", task: "invoice.generate", payload: { invoiceId: "inv_481" }, priority: 10 });
    expect(job).toMatchObject({
      queue: "billing",
      task: "invoice.generate",
      payload: { invoiceId: "inv_481" },
      state: "JOB_STATE_QUEUED",
      priority: 10,
      maxAttempts: 3,
      retryBaseDelay: "15s",
    });
    expect(job).not.toHaveProperty("leaseToken");

    const [lease] = await claim("billing", { leaseDuration: "30s" });
    expect(lease.job).toMatchObject({ id: job.id, state: "JOB_STATE_RUNNING", attempts: 1, deliveries: 1, workerId: "worker-01" });
    expect(Date.parse(lease.job.leaseExpireTime) - Date.parse(lease.job.updateTime)).toBe(30_000);

    const beat = await t.call("Heartbeat", { jobId: job.id, leaseToken: lease.leaseToken, leaseDuration: "120s" });
    expect(Date.parse(beat.body.job.leaseExpireTime) - Date.parse(beat.body.job.updateTime)).toBe(120_000);

    const done = await t.call("Complete", { jobId: job.id, leaseToken: lease.leaseToken, result: { pages: 3 } });
    expect(done.body.job).toMatchObject({ state: "JOB_STATE_COMPLETED", result: { pages: 3 } });
    expect(done.body.job.finishTime).toBeDefined();
    expect(done.body.job).not.toHaveProperty("leaseExpireTime");

    const events = await t.call("ListJobEvents", { jobId: job.id });
    expect(events.body.events.map((e: any) => e.kind)).toEqual([
      "EVENT_KIND_SUBMITTED",
      "EVENT_KIND_CLAIMED",
      "EVENT_KIND_HEARTBEAT",
      "EVENT_KIND_COMPLETED",
    ]);
    const seqs = events.body.events.map((e: any) => BigInt(e.sequence));
    expect([...seqs].sort((a, b) => (a < b ? -1 : 1))).toEqual(seqs);
  });

  it("refuses a stale token after the job is done, with ErrorInfo LEASE_REJECTED", async () => {
    const { job } = await submit({ queue: "stale", task: "t" });
    const [lease] = await claim("stale");
    await t.call("Complete", { jobId: job.id, leaseToken: lease.leaseToken });
    const again = await t.call("Fail", { jobId: job.id, leaseToken: lease.leaseToken, error: "late" });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe("aborted");
    expect(again.body.details[0]).toMatchObject({
      type: "google.rpc.ErrorInfo",
      debug: { reason: "LEASE_REJECTED", domain: "leasequeue" },
    });
  });

  it("retries a failed job after backoff, dead-letters it when the budget is spent, and redrives it", async () => {
    const { job } = await submit({ queue: "flaky", task: "t", maxAttempts: 2, retryBaseDelay: "0s" });
    let [lease] = await claim("flaky");
    const failed = await t.call("Fail", { jobId: job.id, leaseToken: lease.leaseToken, error: "smtp timeout" });
    expect(failed.body.job).toMatchObject({ state: "JOB_STATE_RETRY", lastError: "smtp timeout" });
    [lease] = await claim("flaky");
    expect(lease.job.attempts).toBe(2);
    const dead = await t.call("Fail", { jobId: job.id, leaseToken: lease.leaseToken, error: "still down" });
    expect(dead.body.job).toMatchObject({ state: "JOB_STATE_DEAD", attempts: 2, lastError: "still down" });
    expect(await claim("flaky")).toEqual([]);

    const redriven = await t.call("Redrive", { jobId: job.id });
    expect(redriven.body.job.state).toBe("JOB_STATE_QUEUED");
    expect(redriven.body.job.attempts ?? 0).toBe(0);
    expect(redriven.body.job.deliveries).toBe(2);
    const [again] = await claim("flaky");
    expect(again.job).toMatchObject({ attempts: 1, deliveries: 3 });
  });

  it("schedules the retry with a retry_delay override and dead-letters permanent failures at once", async () => {
    const { job } = await submit({ queue: "override", task: "t" });
    const [lease] = await claim("override");
    const res = await t.call("Fail", { jobId: job.id, leaseToken: lease.leaseToken, error: "429", retryDelay: "120s" });
    expect(Date.parse(res.body.job.scheduleTime) - Date.parse(res.body.job.updateTime)).toBe(120_000);
    expect(await claim("override")).toEqual([]);

    const { job: job2 } = await submit({ queue: "override2", task: "t" });
    const [lease2] = await claim("override2");
    const perm = await t.call("Fail", { jobId: job2.id, leaseToken: lease2.leaseToken, error: "bad input", permanent: true });
    expect(perm.body.job.state).toBe("JOB_STATE_DEAD");
    const kinds = (await t.call("ListJobEvents", { jobId: job2.id })).body.events.map((e: any) => e.kind);
    expect(kinds.at(-1)).toBe("EVENT_KIND_DEAD_LETTERED");
  });

  it("takes an unstarted lease back with Release, refunding the attempt", async () => {
    const { job } = await submit({ queue: "release", task: "t", maxAttempts: 1 });
    const [lease] = await claim("release");
    const released = await t.call("Release", { jobId: job.id, leaseToken: lease.leaseToken });
    expect(released.body.job).toMatchObject({ state: "JOB_STATE_QUEUED", deliveries: 1 });
    expect(released.body.job.attempts ?? 0).toBe(0);
    const kinds = (await t.call("ListJobEvents", { jobId: job.id })).body.events.map((e: any) => e.kind);
    expect(kinds.at(-1)).toBe("EVENT_KIND_RELEASED");
    const again = await t.call("Release", { jobId: job.id, leaseToken: lease.leaseToken });
    expect(again.body).toMatchObject({ code: "aborted", details: [{ debug: { reason: "LEASE_REJECTED" } }] });
    const [second] = await claim("release");
    expect(second.job.attempts).toBe(1);
  });

  it("cancels queued work with a reason and refuses to cancel running work", async () => {
    const { job } = await submit({ queue: "cancels", task: "t", delay: "3600s" });
    const cancelled = await t.call("Cancel", { jobId: job.id, reason: "customer deleted" });
    expect(cancelled.body.job.state).toBe("JOB_STATE_CANCELLED");
    const events = (await t.call("ListJobEvents", { jobId: job.id })).body.events;
    expect(events.at(-1)).toMatchObject({ kind: "EVENT_KIND_CANCELLED", message: "customer deleted" });

    await submit({ queue: "cancels", task: "t2" });
    const [lease] = await claim("cancels");
    const refused = await t.call("Cancel", { jobId: lease.job.id });
    expect(refused.body).toMatchObject({ code: "failed_precondition", details: [{ debug: { reason: "NOT_CANCELLABLE" } }] });
  });

  it("deduplicates by Idempotency-Key header or field alike, scoped to the queue", async () => {
    const body = { queue: "idem", task: "invoice.generate", payload: { invoiceId: "inv_9" } };
    const first = await submit(body, { "Idempotency-Key": "inv_9-v1" });
    const second = await submit({ ...body, idempotencyKey: "inv_9-v1", maxAttempts: 3 });
    expect(second.deduplicated).toBe(true);
    expect(second.job).toEqual(first.job);
    const otherQueue = await submit({ ...body, queue: "idem2" }, { "Idempotency-Key": "inv_9-v1" });
    expect(otherQueue.deduplicated ?? false).toBe(false);
    const changed = await t.call("Submit", { ...body, priority: 1 }, { "Idempotency-Key": "inv_9-v1" });
    expect(changed.body).toMatchObject({ code: "already_exists", details: [{ debug: { reason: "IDEMPOTENCY_MISMATCH" } }] });
  });

  it("submits a batch in order, all or nothing", async () => {
    const ok = await t.call("SubmitBatch", {
      jobs: [
        { queue: "batch", task: "a" },
        { queue: "batch", task: "b", idempotencyKey: "b1" },
        { queue: "batch", task: "b", idempotencyKey: "b1" },
      ],
    });
    expect(ok.body.results.map((r: any) => [r.job.task, r.deduplicated ?? false])).toEqual([
      ["a", false],
      ["b", false],
      ["b", true],
    ]);
    const refused = await t.call("SubmitBatch", {
      jobs: [
        { queue: "batch", task: "c" },
        { queue: "batch", task: "other", idempotencyKey: "b1" },
      ],
    });
    expect(refused.body.code).toBe("already_exists");
    const listed = await t.call("ListJobs", { queue: "batch" });
    expect(listed.body.jobs.map((j: any) => j.task)).toEqual(["b", "a"]);
  });

  it("claims by priority, then schedule time, and honours max_jobs", async () => {
    await submit({ queue: "prio", task: "low", priority: -1 });
    await submit({ queue: "prio", task: "high", priority: 50 });
    await submit({ queue: "prio", task: "mid" });
    const leases = await claim("prio", { maxJobs: 2 });
    expect(leases.map((l) => l.job.task)).toEqual(["high", "mid"]);
  });

  it("lists jobs newest first, filtered by state, with opaque page tokens", async () => {
    for (const task of ["p1", "p2", "p3", "p4", "p5"]) await submit({ queue: "pages", task });
    const seen: string[] = [];
    let pageToken = "";
    do {
      const res = await t.call("ListJobs", { queue: "pages", states: ["JOB_STATE_QUEUED"], pageSize: 2, pageToken });
      seen.push(...res.body.jobs.map((j: any) => j.task));
      pageToken = res.body.nextPageToken ?? "";
    } while (pageToken !== "");
    expect(seen).toEqual(["p5", "p4", "p3", "p2", "p1"]);
  });

  it("reports counts per queue and in total, and the oldest pending age", async () => {
    await submit({ queue: "stats", task: "a" });
    await submit({ queue: "stats", task: "b" });
    const [lease] = await claim("stats");
    await t.call("Complete", { jobId: lease.job.id, leaseToken: lease.leaseToken });
    const res = await t.call("GetStats", {});
    const stats = res.body.queues.find((q: any) => q.queue === "stats");
    expect(stats).toMatchObject({ queued: "1", completed: "1" });
    expect(stats.oldestPendingAge).toMatch(/^\d+(\.\d+)?s$/);
    expect(res.body.total.queue ?? "").toBe("");
    const totalQueued = res.body.queues.reduce((n: number, q: any) => n + Number(q.queued ?? 0), 0);
    expect(Number(res.body.total.queued)).toBe(totalQueued);
  });

  it("answers a long-poll Claim the moment a job is submitted", async () => {
    const waiting = t.call("Claim", { queue: "longpoll", workerId: "w", wait: "60s" });
    await untilClaimWaiters(1);
    const submitted = await submit({ queue: "longpoll", task: "t" });
    const res = await waiting;
    expect(res.body.leases[0].job.id).toBe(submitted.job.id);
    // Woken by the commit: the 60 s deadline (the longest wait) lies beyond this test's time limit.
    expect(await claimWaiters()).toBe(0);
  });

  it("returns an empty long-poll Claim at its deadline", async () => {
    const res = await t.call("Claim", { queue: "nothing-here", workerId: "w", wait: "0.2s" });
    expect(res.status).toBe(200);
    expect(res.body.leases ?? []).toEqual([]);
  });

  it("serves grpc.health.v1.Health/Check over Connect JSON", async () => {
    const res = await fetch(`${t.apiUrl}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(await res.json()).toEqual({ status: "SERVING" });
  });

  it("serves nothing of the side port on the API port", async () => {
    expect((await fetch(`${t.apiUrl}/metrics`)).status).toBe(404);
    expect((await fetch(`${t.apiUrl}/health/ready`)).status).toBe(404);
  });
});

describe("over the typed Connect client", () => {
  it("carries ErrorInfo details in ConnectError", async () => {
    const { job } = await t.client.submit({ queue: "typed", task: "t" });
    try {
      await t.client.complete({ jobId: job!.id, leaseToken: "nope" });
      expect.unreachable();
    } catch (err) {
      const e = ConnectError.from(err);
      expect(e.code).toBe(Code.Aborted);
      const [info] = e.findDetails(ErrorInfoSchema);
      expect(info).toMatchObject({ reason: "LEASE_REJECTED", domain: "leasequeue" });
    }
    const got = await t.client.getJob({ jobId: job!.id });
    expect(got.job?.state).toBe(JobState.QUEUED);
  });
});
