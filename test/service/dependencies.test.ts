/**
 * Dependencies over the wire (docs/api.md "Dependencies"), against a real
 * server, over Connect JSON as curl sends it and over gRPC: a fan-out and a
 * merge that reads their results, graphs of one batch by ref, the refusals
 * (each naming its field, nothing created), the listings, the counts and
 * metrics, and a dependency in a queue the token may not use.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, toJson } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DependencyFailurePolicy,
  JobState,
  LeaseQueueService,
  LeaseSchema,
  WorkRequestSchema,
  type WorkRequest,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { writeAuthFile } from "../helpers/auth.js";
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

async function refused(method: string, body: unknown): Promise<{ status: number; code: string; message: string; body: any }> {
  const res = await s.call(method, body);
  expect(res.status, JSON.stringify(res.body)).not.toBe(200);
  return { status: res.status, code: res.body.code, message: res.body.message, body: res.body };
}

/** Claims every lease of `queue` (up to 100) and completes each with its result. */
async function completeAll(queue: string, result: (payload: any) => unknown): Promise<void> {
  const { leases } = await ok("Claim", { queue, workerId: "w", maxJobs: 100 });
  for (const l of leases) await ok("Complete", { jobId: l.job.id, leaseToken: l.leaseToken, result: result(l.job.payload) });
}

describe("dependencies over Connect JSON", () => {
  it("runs the docs' fan-out and merge: the merge waits, then its lease carries the renders' results in order", async () => {
    const { results } = await ok("SubmitBatch", {
      jobs: [
        { queue: "dep-render", task: "page", payload: { page: 1 }, ref: "p1" },
        { queue: "dep-render", task: "page", payload: { page: 2 }, ref: "p2" },
        { queue: "dep-render", task: "page", payload: { page: 3 }, ref: "p3" },
        { queue: "dep-merge", task: "merge", dependsOnRefs: ["p1", "p2", "p3"], onDependencyFailure: "DEPENDENCY_FAILURE_POLICY_CANCEL" },
      ],
    });
    const pages = results.slice(0, 3).map((r: any) => r.job.id);
    const merge = results[3].job;
    expect(merge).toMatchObject({ state: "JOB_STATE_WAITING", dependsOn: pages, dependencyCounts: { total: 3, pending: 3 } });
    expect((await ok("Claim", { queue: "dep-merge", workerId: "w" })).leases ?? []).toEqual([]);

    await completeAll("dep-render", (p) => ({ url: `s3://bucket/${p.page}.pdf` }));
    const { leases } = await ok("Claim", { queue: "dep-merge", workerId: "merger" });
    expect(leases[0].job).toMatchObject({ id: merge.id, dependencyCounts: { total: 3, completed: 3 } });
    expect(leases[0].dependencies).toEqual(
      pages.map((id: string, i: number) => ({ jobId: id, state: "JOB_STATE_COMPLETED", result: { url: `s3://bucket/${i + 1}.pdf` } })),
    );
    expect(leases[0].dependenciesTruncated).toBeUndefined();
    const events = (await ok("ListJobEvents", { jobId: merge.id })).events.map((e: any) => e.kind);
    expect(events.slice(0, 2)).toEqual(["EVENT_KIND_SUBMITTED", "EVENT_KIND_DEPENDENCIES_MET"]);
  });

  it("lists a job's dependencies and dependents, page by page", async () => {
    const a = (await ok("Submit", { queue: "dep-list", task: "a" })).job.id;
    const b = (await ok("Submit", { queue: "dep-list", task: "b" })).job.id;
    const c = (await ok("Submit", { queue: "dep-list2", task: "c", dependsOn: [a, b] })).job.id;
    const first = await ok("ListJobs", { dependenciesOf: c, pageSize: 1 });
    expect(first.jobs.map((j: any) => j.id)).toEqual([b]);
    const second = await ok("ListJobs", { dependenciesOf: c, pageSize: 1, pageToken: first.nextPageToken });
    expect(second.jobs.map((j: any) => j.id)).toEqual([a]);
    expect((await ok("ListJobs", { dependentsOf: a })).jobs.map((j: any) => j.id)).toEqual([c]);
    // A page token is bound to its filter.
    expect((await refused("ListJobs", { dependentsOf: a, pageToken: first.nextPageToken })).code).toBe("invalid_argument");
    expect((await refused("ListJobs", { dependentsOf: "nope" })).message).toBe("dependents_of: must be a job id (a UUID)");
  });

  it("counts WAITING in GetStats and /metrics", async () => {
    const a = (await ok("Submit", { queue: "dep-stats-a", task: "a" })).job.id;
    await ok("Submit", { queue: "dep-stats", task: "w", dependsOn: [a] });
    const { queues, total } = await ok("GetStats", {});
    expect(queues.find((q: any) => q.queue === "dep-stats")).toMatchObject({ waiting: "1" });
    expect(Number(total.waiting)).toBeGreaterThanOrEqual(1);
    const metrics = await (await fetch(`${s.metricsUrl}/metrics`)).text();
    expect(metrics).toContain('leasequeue_jobs{queue="dep-stats",state="waiting"} 1');
  });

  it("refuses bad dependencies naming the field, creating nothing", async () => {
    const known = (await ok("Submit", { queue: "dep-bad-dep", task: "a" })).job.id;
    const unknown = "01935c3e-0000-7000-8000-000000000000";
    const cases: Array<[string, unknown, string, string]> = [
      ["Submit", { queue: "dep-bad", task: "t", dependsOn: [known, unknown] }, "not_found", `depends_on[1]: job ${unknown} does not exist`],
      ["Submit", { queue: "dep-bad", task: "t", dependsOn: ["x"] }, "invalid_argument", "depends_on[0]: must be a job id (a UUID)"],
      [
        "Submit",
        { queue: "dep-bad", task: "t", dependsOn: [known, known] },
        "invalid_argument",
        `depends_on[1]: names job ${known} a second time`,
      ],
      [
        "Submit",
        { queue: "dep-bad", task: "t", dependsOnRefs: ["a"] },
        "invalid_argument",
        "depends_on_refs: names jobs of the same SubmitBatch; use depends_on with job ids in a Submit",
      ],
      [
        "Submit",
        { queue: "dep-bad", task: "t", dependsOn: [known], onDependencyFailure: 9 },
        "invalid_argument",
        "on_dependency_failure: 9 is not a DependencyFailurePolicy",
      ],
      [
        "Submit",
        { queue: "dep-bad", task: "t", ref: "has space" },
        "invalid_argument",
        "ref: must be 1-128 visible ASCII characters (0x21-0x7e)",
      ],
      [
        "SubmitBatch",
        {
          jobs: [
            { queue: "dep-bad", task: "t", ref: "a" },
            { queue: "dep-bad", task: "t", ref: "a" },
          ],
        },
        "invalid_argument",
        'jobs[1].ref: "a" is the ref of jobs[0] too; refs are unique within a batch',
      ],
      [
        "SubmitBatch",
        { jobs: [{ queue: "dep-bad", task: "t", ref: "a", dependsOnRefs: ["b"] }] },
        "invalid_argument",
        'jobs[0].depends_on_refs: "b" is the ref of no job of this batch',
      ],
      [
        "SubmitBatch",
        {
          jobs: [
            { queue: "dep-bad", task: "t", ref: "a", dependsOnRefs: ["c"] },
            { queue: "dep-bad", task: "t", ref: "b", dependsOnRefs: ["a"] },
            { queue: "dep-bad", task: "t", ref: "c", dependsOnRefs: ["b"] },
          ],
        },
        "invalid_argument",
        'jobs[0].depends_on_refs: forms a cycle: "a" -> "c" -> "b" -> "a"',
      ],
      [
        "SubmitBatch",
        { jobs: [{ queue: "dep-bad", task: "t", ref: "self", dependsOnRefs: ["self"] }] },
        "invalid_argument",
        'jobs[0].depends_on_refs: forms a cycle: "self" -> "self"',
      ],
      [
        "SubmitBatch",
        {
          jobs: [
            { queue: "dep-bad", task: "t" },
            { queue: "dep-bad", task: "t", dependsOn: [unknown] },
          ],
        },
        "not_found",
        `jobs[1].depends_on[0]: job ${unknown} does not exist`,
      ],
      [
        "CreateSchedule",
        { schedule: { name: "dep-bad", interval: "60s", template: { queue: "dep-bad", task: "t", dependsOn: [known] } } },
        "invalid_argument",
        "schedule.template.depends_on: must be empty: a schedule's runs do not wait for other jobs",
      ],
    ];
    for (const [method, body, code, message] of cases) {
      const r = await refused(method, body);
      expect({ code: r.code, message: r.message }, method).toEqual({ code, message });
    }
    const tooMany = Array.from({ length: 1001 }, () => known);
    expect((await refused("Submit", { queue: "dep-bad", task: "t", dependsOn: tooMany })).message).toBe(
      "depends_on: names 1001 jobs with depends_on and depends_on_refs together; the limit is 1000",
    );
    const { queues } = await ok("GetStats", {});
    expect(queues.find((q: any) => q.queue === "dep-bad")).toBeUndefined();
  });

  it("cancels dependents by their policies when a dependency is cancelled, naming it", async () => {
    const a = (await ok("Submit", { queue: "dep-cancel", task: "a" })).job.id;
    const waiting = (await ok("Submit", { queue: "dep-cancel2", task: "w", dependsOn: [a] })).job.id;
    const ignoring = (
      await ok("Submit", { queue: "dep-cancel2", task: "i", dependsOn: [a], onDependencyFailure: "DEPENDENCY_FAILURE_POLICY_IGNORE" })
    ).job.id;
    await ok("Cancel", { jobId: a, reason: "no" });
    const events = (await ok("ListJobEvents", { jobId: waiting })).events;
    expect(events.at(-1)).toMatchObject({ kind: "EVENT_KIND_CANCELLED", message: `dependency ${a} is cancelled` });
    expect((await ok("GetJob", { jobId: ignoring })).job).toMatchObject({
      state: "JOB_STATE_QUEUED",
      dependencyCounts: { total: 1, failed: 1 },
    });
  });
});

describe("dependencies over gRPC", () => {
  it("submits with depends_on and hands the dependencies' results to a Work stream", async () => {
    const dep = await grpc.submit({ queue: "dep-grpc-a", task: "a" });
    const lease = (await grpc.claim({ queue: "dep-grpc-a", workerId: "w" })).leases[0];
    await grpc.complete({ jobId: lease.job!.id, leaseToken: lease.leaseToken, result: { kind: { case: "stringValue", value: "done" } } });
    const job = await grpc.submit({
      queue: "dep-grpc",
      task: "b",
      dependsOn: [dep.job!.id],
      onDependencyFailure: DependencyFailurePolicy.IGNORE,
    });
    expect(job.job).toMatchObject({ state: JobState.QUEUED, dependsOn: [dep.job!.id] });
    expect(job.job!.dependencyCounts).toMatchObject({ total: 1, completed: 1, failed: 0, pending: 0 });

    const done = new AbortController();
    const requests = requestQueue<WorkRequest>(done.signal);
    requests.push(create(WorkRequestSchema, { start: { queue: "dep-grpc", workerId: "w", maxInFlight: 1 } }));
    const responses = grpc.work(requests.stream, { signal: done.signal })[Symbol.asyncIterator]();
    let got;
    while (got === undefined) {
      const r = await responses.next();
      if (r.done === true) throw new Error("the Work stream ended");
      got = r.value.leases[0];
    }
    expect(toJson(LeaseSchema, got)).toMatchObject({
      job: { id: job.job!.id },
      dependencies: [{ jobId: dep.job!.id, state: "JOB_STATE_COMPLETED", result: "done" }],
    });
    requests.end();
    done.abort();
    await responses.return?.();
  });
});

describe("dependencies and queue-limited tokens", () => {
  let dir: string;
  let t: TestServer;
  let tokens: Record<string, string>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "leasequeue-deps-auth-"));
    const file = writeAuthFile(dir, [
      { name: "all", roles: ["producer"] },
      { name: "billing", roles: ["producer"], queues: ["billing"] },
    ]);
    tokens = file.tokens;
    t = await startTestServer({ "auth-file": file.path });
  });
  afterAll(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a dependency in a queue the token may not use, naming the field and not the queue", async () => {
    const auth = (name: string) => ({ authorization: `Bearer ${tokens[name]}` });
    const secret = (await t.call("Submit", { queue: "secret", task: "a" }, auth("all"))).body.job.id;
    const res = await t.call("Submit", { queue: "billing", task: "b", dependsOn: [secret] }, auth("billing"));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("permission_denied");
    expect(res.body.message).toMatch(/^depends_on\[0\]: job .* is in a queue that is not permitted/);
    expect(res.body.message).not.toContain("secret");
    const own = (await t.call("Submit", { queue: "billing", task: "a" }, auth("billing"))).body.job.id;
    const fine = await t.call("Submit", { queue: "billing", task: "b", dependsOn: [own] }, auth("billing"));
    expect(fine.body.job.state).toBe("JOB_STATE_WAITING");
  });
});
