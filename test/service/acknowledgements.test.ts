/**
 * Acknowledge (docs/api.md "The batched path: Acknowledge and Work") against
 * a real server: many outcomes in one call, each answered on its own with
 * exactly what the single RPC returns, refusals that never affect their
 * neighbours, order within one request, and whole-request refusals for
 * malformed acknowledgements.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import type { StartOptions } from "../../src/app.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function server(options: Partial<StartOptions> = {}): Promise<TestServer> {
  const t = await startTestServer({}, options);
  servers.push(t);
  return t;
}

/** Submits `n` jobs to `queue` and claims them all; returns the leases. */
async function leased(t: TestServer, queue: string, n: number, leaseDuration = "60s") {
  const submitted = await t.call("SubmitBatch", { jobs: Array.from({ length: n }, (_, i) => ({ queue, task: "t", payload: { i } })) });
  expect(submitted.status).toBe(200);
  const claimed = await t.call("Claim", { queue, workerId: "w1", maxJobs: n, leaseDuration });
  expect(claimed.body.leases).toHaveLength(n);
  return claimed.body.leases as Array<{ job: { id: string }; leaseToken: string }>;
}

async function state(t: TestServer, jobId: string): Promise<string> {
  return (await t.call("GetJob", { jobId })).body.job.state;
}

describe("Acknowledge", () => {
  it("applies complete, fail, heartbeat and release in one call, each answered in order", async () => {
    const clock = new ManualClock();
    const t = await server({ clock });
    const [a, b, c, d] = await leased(t, "acks", 4);
    const res = await t.call("Acknowledge", {
      acks: [
        { jobId: a.job.id, leaseToken: a.leaseToken, complete: { result: { ok: true } } },
        { jobId: b.job.id, leaseToken: b.leaseToken, fail: { error: "boom", retryDelay: "5s" } },
        { jobId: c.job.id, leaseToken: c.leaseToken, heartbeat: { leaseDuration: "120s" } },
        { jobId: d.job.id, leaseToken: d.leaseToken, release: {} },
      ],
    });
    expect(res.status).toBe(200);
    const results = res.body.results;
    expect(results.map((r: any) => r.jobId)).toEqual([a.job.id, b.job.id, c.job.id, d.job.id]);
    for (const r of results) expect(r.status.code ?? 0).toBe(0);
    expect(results[2].leaseExpireTime).toBeDefined();
    expect(results[0].leaseExpireTime).toBeUndefined();
    expect(Date.parse(results[2].leaseExpireTime)).toBe(clock.now() + 120_000);

    expect(await state(t, a.job.id)).toBe("JOB_STATE_COMPLETED");
    expect((await t.call("GetJob", { jobId: a.job.id })).body.job.result).toEqual({ ok: true });
    const failed = (await t.call("GetJob", { jobId: b.job.id })).body.job;
    expect(failed.state).toBe("JOB_STATE_RETRY");
    expect(failed.lastError).toBe("boom");
    expect(await state(t, c.job.id)).toBe("JOB_STATE_RUNNING");
    const released = (await t.call("GetJob", { jobId: d.job.id })).body.job;
    expect(released.state).toBe("JOB_STATE_QUEUED");
    expect(released.attempts ?? 0).toBe(0);
  });

  it("answers stale tokens, unknown jobs and finished jobs on their own, with the single RPC's code and reason", async () => {
    const t = await server();
    const [good, other] = await leased(t, "mixed", 2);
    const unknown = "01900000-0000-7000-8000-000000000000";
    // What Complete itself answers for the same mistake (it changes nothing):
    const single = await t.call("Complete", { jobId: good.job.id, leaseToken: "not-the-token" });
    const res = await t.call("Acknowledge", {
      acks: [
        { jobId: good.job.id, leaseToken: "not-the-token", complete: {} },
        { jobId: unknown, leaseToken: "x", complete: {} },
        { jobId: good.job.id, leaseToken: good.leaseToken, complete: {} },
        { jobId: other.job.id, leaseToken: other.leaseToken, complete: {} },
      ],
    });
    expect(res.status).toBe(200);
    const [stale, missing, ok, ok2] = res.body.results;
    expect(stale.status.code).toBe(10); // aborted
    expect(stale.status.message).toBe(single.body.message);
    expect(stale.status.details[0]).toMatchObject({
      "@type": "type.googleapis.com/google.rpc.ErrorInfo",
      reason: "LEASE_REJECTED",
      domain: "leasequeue",
    });
    expect(missing.status.code).toBe(5); // not_found
    expect(missing.status.details[0].reason).toBe("JOB_NOT_FOUND");
    expect(ok.status.code ?? 0).toBe(0);
    expect(ok2.status.code ?? 0).toBe(0);
    expect(await state(t, good.job.id)).toBe("JOB_STATE_COMPLETED");
    expect(await state(t, other.job.id)).toBe("JOB_STATE_COMPLETED");
  });

  it("applies two acknowledgements of one job in request order", async () => {
    const t = await server();
    const [lease] = await leased(t, "order", 1);
    const res = await t.call("Acknowledge", {
      acks: [
        { jobId: lease.job.id, leaseToken: lease.leaseToken, heartbeat: {} },
        { jobId: lease.job.id, leaseToken: lease.leaseToken, complete: { result: 1 } },
        { jobId: lease.job.id, leaseToken: lease.leaseToken, complete: { result: 2 } },
      ],
    });
    const codes = res.body.results.map((r: any) => r.status.code ?? 0);
    expect(codes).toEqual([0, 0, 10]); // the second Complete finds the job finished
    expect(res.body.results[2].status.details[0].reason).toBe("LEASE_REJECTED");
    expect((await t.call("GetJob", { jobId: lease.job.id })).body.job.result).toBe(1);
    const kinds = (await t.call("ListJobEvents", { jobId: lease.job.id })).body.events.map((e: any) => e.kind);
    expect(kinds).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_CLAIMED", "EVENT_KIND_HEARTBEAT", "EVENT_KIND_COMPLETED"]);
  });

  it("answers an expired lease with LEASE_EXPIRED next to good ones", async () => {
    // The server's time is a manual clock: the short lease expires when the test moves it, not after a sleep.
    // Whether the sweep recovered the job first or not, the right token after expiry is LEASE_EXPIRED.
    const clock = new ManualClock();
    const t = await server({ clock });
    const [short] = await leased(t, "expiry-short", 1, "1s");
    const [long] = await leased(t, "expiry-long", 1);
    clock.advance(1000); // a lease is active while now < lease_expire_time
    const res = await t.call("Acknowledge", {
      acks: [
        { jobId: short.job.id, leaseToken: short.leaseToken, complete: {} },
        { jobId: long.job.id, leaseToken: long.leaseToken, complete: {} },
      ],
    });
    expect(res.body.results[0].status.code).toBe(10);
    expect(res.body.results[0].status.details[0].reason).toBe("LEASE_EXPIRED");
    expect(res.body.results[1].status.code ?? 0).toBe(0);
  });

  it("refuses malformed acknowledgements as a whole, naming the index, and applies none", async () => {
    const t = await server();
    const [lease] = await leased(t, "malformed", 1);
    const good = { jobId: lease.job.id, leaseToken: lease.leaseToken, complete: {} };
    const cases: Array<[unknown[], string]> = [
      [[], "acks"],
      [[good, { jobId: "nope", leaseToken: "t", complete: {} }], "acks[1].job_id"],
      [[good, { jobId: lease.job.id, complete: {} }], "acks[1].lease_token"],
      [[good, { jobId: lease.job.id, leaseToken: "t" }], "acks[1].outcome"],
      [[good, { jobId: lease.job.id, leaseToken: "t", fail: { error: "x".repeat(4097) } }], "acks[1].fail.error"],
      [[good, { jobId: lease.job.id, leaseToken: "t", fail: { retryDelay: "-1s" } }], "acks[1].fail.retry_delay"],
      [[good, { jobId: lease.job.id, leaseToken: "t", heartbeat: { leaseDuration: "0s" } }], "acks[1].heartbeat.lease_duration"],
      [[good, { jobId: lease.job.id, leaseToken: "t", complete: { result: "x".repeat(70_000) } }], "acks[1].complete.result"],
      [Array.from({ length: 1001 }, () => good), "acks"],
    ];
    for (const [acks, field] of cases) {
      const res = await t.call("Acknowledge", { acks });
      expect(res.status, field).toBe(400);
      expect(res.body.code).toBe("invalid_argument");
      expect(res.body.message.startsWith(`${field}:`), `${field} in ${res.body.message}`).toBe(true);
    }
    expect(await state(t, lease.job.id)).toBe("JOB_STATE_RUNNING");
  });

  it("takes 1000 acknowledgements in one call", async () => {
    const t = await server();
    const leases = [...(await leased(t, "thousand", 100))];
    const acks = Array.from({ length: 1000 }, (_, i) => {
      const l = leases[i % 100];
      return { jobId: l.job.id, leaseToken: l.leaseToken, heartbeat: {} };
    });
    const res = await t.call("Acknowledge", { acks });
    expect(res.status).toBe(200);
    expect(res.body.results).toHaveLength(1000);
    expect(res.body.results.every((r: any) => (r.status.code ?? 0) === 0)).toBe(true);
  });
});
