/**
 * A handler reads its job's dependencies' outcomes (docs/api.md
 * "Dependencies"): ctx.dependencies, ctx.dependenciesTruncated and
 * ctx.dependencyResult(), over the Work stream (leases read by hand),
 * StreamClaims and unary Claim; and the hand reader of leases reads
 * Lease.dependencies and the Job's dependsOn and dependencyCounts as
 * protobuf-es does, or leaves them to it.
 */
import { create, fromBinary, fromJson, toBinary, type JsonValue } from "@bufbuild/protobuf";
import { EmptySchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readLease, readWorkResponse } from "../../src/worker/lease-decoding.js";
import {
  createLeaseQueueClient,
  createWorker,
  DependencyFailurePolicy,
  jsonToValue,
  JobState,
  PermanentJobError,
  type Dependency,
  type LeaseQueueClientOptions,
  type WorkerOptions,
} from "../../src/worker/index.js";
import { JobSchema, LeaseSchema, WorkResponseSchema, type Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { pick, seeded, STRINGS, type Rand } from "../helpers/random-proto.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { gate, workerEventLog } from "../helpers/worker-events.js";

/** Random JSON without a `__proto__` key (which the hand reader leaves to protobuf-es). */
function randomJson(rand: Rand, depth: number): JsonValue {
  const r = rand();
  if (depth === 0 || r < 0.4) return pick<JsonValue>(rand, [null, true, false, 0, -0.5, 1e300, 2 ** 53 + 2, ...STRINGS]);
  const n = Math.floor(rand() * 4);
  if (r < 0.7) return Array.from({ length: n }, () => randomJson(rand, depth - 1));
  return Object.fromEntries(Array.from({ length: n }, () => [pick(rand, ["a", "b", "é", "", "k q"]), randomJson(rand, depth - 1)]));
}

const INT32 = [0, 1, -1, 100, 2 ** 31 - 1, -(2 ** 31)];
const STATES = [0, 4, 5, 6, 7, 99, -3];

function randomLease(rand: Rand) {
  const maybe = <T>(make: () => T): T | undefined => (rand() < 0.5 ? make() : undefined);
  return create(LeaseSchema, {
    leaseToken: pick(rand, STRINGS),
    job: maybe(() => ({
      id: pick(rand, STRINGS),
      task: pick(rand, STRINGS),
      payload: maybe(() => fromJson(ValueSchema, randomJson(rand, 3))),
      dependsOn: Array.from({ length: Math.floor(rand() * 4) }, () => pick(rand, STRINGS)),
      dependencyCounts: maybe(() => ({
        total: pick(rand, INT32),
        completed: pick(rand, INT32),
        failed: pick(rand, INT32),
        pending: pick(rand, INT32),
      })),
    })),
    dependencies: Array.from({ length: Math.floor(rand() * 5) }, () => ({
      jobId: pick(rand, STRINGS),
      state: pick(rand, STATES),
      result: maybe(() => fromJson(ValueSchema, randomJson(rand, 4))),
      lastError: pick(rand, STRINGS),
    })),
    dependenciesTruncated: rand() < 0.5,
  });
}

/** What `f` returns, or the message of what it throws. */
function outcome(f: () => unknown): unknown {
  try {
    return f();
  } catch (err) {
    return (err as Error).message;
  }
}

/** What `f` throws (undefined when it returns). */
function catching(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  return undefined;
}

const varint = (n: number): number[] => (n < 0x80 ? [n] : [(n & 0x7f) | 0x80, ...varint(n >>> 7)]);
const field = (no: number, body: number[]) => [(no << 3) | 2, ...varint(body.length), ...body];

describe("the hand reader of leases", () => {
  it("reads 2,000 random leases with dependencies, dependsOn and dependencyCounts as protobuf-es reads them", () => {
    const rand = seeded(71);
    for (let i = 0; i < 2000; i++) {
      const bytes = toBinary(LeaseSchema, randomLease(rand));
      const read = readLease(bytes);
      expect(read, `lease ${i}`).toBeDefined();
      expect(read).toStrictEqual(fromBinary(LeaseSchema, bytes));
    }
  });

  it("leaves to protobuf-es what it is not sure of in them, and the response reads the same", () => {
    const dependency = [...field(1, [...Buffer.from("a")]), 0x10, 0x04];
    const job = [...toBinary(JobSchema, create(JobSchema, { id: "x" }))];
    const cases: Array<[string, number[]]> = [
      ["a DependencyResult field twice", field(3, [...dependency, 0x10, 0x05])],
      ["a DependencyResult field unknown", field(3, [...dependency, 0x28, 0x01])],
      ["a state that is not a varint", field(3, [...field(2, [0x04])])],
      ["the truncated flag twice", [0x20, 0x01, 0x20, 0x00]],
      ["the truncated flag length-delimited", field(4, [0x01])],
      ["dependencyCounts twice", field(1, [...job, ...field(23, [0x08, 0x02]), ...field(23, [0x10, 0x01])])],
      ["a count field unknown", field(1, [...job, ...field(23, [0x28, 0x01])])],
      ["dependsOn as a varint", field(1, [...job, 0xb0, 0x01, 0x01])],
    ];
    for (const [what, bytes] of cases) {
      const lease = Uint8Array.from(bytes);
      expect(readLease(lease), what).toBeUndefined();
      const response = Uint8Array.from(field(1, bytes));
      const reference = outcome(() => fromBinary(WorkResponseSchema, response));
      expect(
        outcome(() => readWorkResponse(fromBinary(EmptySchema, response))),
        what,
      ).toStrictEqual(reference);
    }
  });
});

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

/** What the "merge" handler saw. */
interface Seen {
  job: Job;
  dependencies: readonly Dependency[];
  truncated: boolean;
  url: string;
  unknown: unknown;
}

const transports: Array<[string, Omit<LeaseQueueClientOptions, "url">, WorkerOptions["transport"]?]> = [
  ["gRPC (Work)", { transport: "grpc" }],
  ["Connect over HTTP/1.1 (StreamClaims and Acknowledge)", { transport: "connect", httpVersion: "1.1", useBinaryFormat: false }],
  ["unary calls on gRPC (Claim)", { transport: "grpc" }, "unary"],
];

describe.each(transports)("over %s", (name, options, workerTransport) => {
  it("gives the handler its dependencies' ids, states, results and errors, with a typed result by id", async () => {
    const queue = `deps-${name.replace(/[^A-Za-z0-9]/g, "")}`;
    const client = createLeaseQueueClient({ url: t.apiUrl, ...options });
    // A page that renders, one that fails for good, and a merge that waits for both and runs anyway.
    const { results } = await client.submitBatch({
      jobs: [
        { queue, task: "render", payload: jsonToValue({ page: 1 }), ref: "p1" },
        { queue, task: "broken", ref: "p2" },
        { queue, task: "merge", dependsOnRefs: ["p1", "p2"], onDependencyFailure: DependencyFailurePolicy.IGNORE },
      ],
    });
    const [rendered, broken, merge] = results.map((r) => r.job!.id);
    expect(results[2].job!.state).toBe(JobState.WAITING);
    const seen = gate<Seen>();
    const log = workerEventLog();
    const worker = createWorker({
      client,
      transport: workerTransport,
      queue,
      workerId: "w-deps",
      concurrency: 2,
      onEvent: log.onEvent,
      handler(job, ctx) {
        if (job.task === "render") return `s3://pages/${(ctx.payload as { page: number }).page}.pdf`;
        if (job.task === "broken") throw new PermanentJobError("page 2 is missing");
        const unknown = catching(() => ctx.dependencyResult("0190b3c4-0000-7000-8000-000000000000"));
        seen.open({
          job,
          dependencies: ctx.dependencies,
          truncated: ctx.dependenciesTruncated,
          url: ctx.dependencyResult<string>(rendered),
          unknown,
        });
        return ctx.dependencies.length;
      },
    });
    try {
      const got = await seen.promise;
      expect(got.dependencies).toEqual([
        { jobId: rendered, state: JobState.COMPLETED, result: "s3://pages/1.pdf", lastError: "" },
        { jobId: broken, state: JobState.DEAD, result: null, lastError: "page 2 is missing" },
      ]);
      expect(Object.isFrozen(got.dependencies) && Object.isFrozen(got.dependencies[0])).toBe(true);
      expect(got.truncated).toBe(false);
      expect(got.url).toBe("s3://pages/1.pdf");
      expect(got.unknown).toBeInstanceOf(RangeError);
      expect((got.unknown as Error).message).toBe("job 0190b3c4-0000-7000-8000-000000000000 is not a dependency of this job");
      expect(got.job.dependsOn).toEqual([rendered, broken]);
      expect(got.job.dependencyCounts).toMatchObject({ total: 2, completed: 1, failed: 1, pending: 0 });
      await log.waitFor("completed", 1, (e) => e.job.id === merge);
    } finally {
      await worker.close();
    }
  });
});

describe("a job with more than 100 dependencies, over the Work stream", () => {
  it("gets the first 100 in dependsOn order and dependenciesTruncated; a job without any gets none", async () => {
    const queue = "deps-truncated";
    const client = createLeaseQueueClient({ url: t.apiUrl });
    const refs = Array.from({ length: 101 }, (_, i) => `d${i}`);
    const { results } = await client.submitBatch({
      jobs: [
        ...refs.map((ref, i) => ({ queue, task: "part", payload: jsonToValue(i), ref })),
        { queue, task: "merge", dependsOnRefs: refs },
        { queue, task: "alone" },
      ],
    });
    const jobs = results.map((r) => r.job!);
    const seen = new Map<string, { dependencies: readonly Dependency[]; truncated: boolean }>();
    let beyond: unknown;
    const both = gate();
    const worker = createWorker({
      client,
      queue,
      workerId: "w-deps-truncated",
      concurrency: 8,
      handler(job, ctx) {
        if (job.task === "part") return ctx.payload;
        if (job.task === "merge") beyond = catching(() => ctx.dependencyResult(jobs[100].id));
        seen.set(job.task, { dependencies: ctx.dependencies, truncated: ctx.dependenciesTruncated });
        if (seen.size === 2) both.open();
      },
    });
    try {
      await both.promise;
      const merge = seen.get("merge")!;
      expect(merge.truncated).toBe(true);
      expect(merge.dependencies.map((d) => d.jobId)).toEqual(jobs.slice(0, 100).map((j) => j.id));
      expect(merge.dependencies.map((d) => d.result)).toEqual(Array.from({ length: 100 }, (_, i) => i));
      expect((beyond as RangeError).message).toBe(
        `job ${jobs[100].id} is not among the first 100 dependencies the lease carries (ListJobs' dependenciesOf pages through all)`,
      );
      expect(seen.get("alone")).toEqual({ dependencies: [], truncated: false });
    } finally {
      await worker.close();
    }
  });
});
