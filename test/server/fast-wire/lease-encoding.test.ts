/**
 * The hand-written Lease encoder against protobuf-es: the same bytes for
 * every kind of job and JSON value, the nesting bound enforced while
 * encoding, a decoder that reads back the same lease, and the responses
 * that carry encoded messages (SubmitBatch, Claim with its acks' results).
 */
import { create, createRegistry, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { anyPack, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { EVENT_KINDS, JOB_STATES, type Job, type JobEvent } from "../../../src/domain/job.js";
import { claimResponse } from "../../../src/service/encoded-responses.js";
import type { WireLease } from "../../../src/service/lease-delivery.js";
import {
  asField,
  encodeEventResponse,
  encodeLease,
  encodeSubmitResponse,
  HAND_ENCODERS,
} from "../../../src/server/fast-wire/lease-encoding.js";
import { NestingTooDeep } from "../../../src/service/hand-wire.js";
import { eventToWire, jobToWire, leaseToWire } from "../../../src/service/wire.js";
import { ErrorInfoSchema } from "../../../gen/ts/google/rpc/error_details_pb.js";
import {
  AcknowledgementResultSchema,
  ClaimResponseSchema,
  LeaseSchema,
  type ClaimResponse,
  SubmitBatchResponseSchema,
  SubmitResponseSchema,
  WatchEventsResponseSchema,
  WorkResponseSchema,
} from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";

function job(overrides: Partial<Job> = {}): Job {
  return {
    id: "01a230ac-40d4-7659-bdf9-5453cc692072",
    queue: "billing",
    task: "invoice.generate",
    groupKey: "",
    payloadJson: '{"invoiceId":"inv_481"}',
    priority: 0,
    state: "running",
    attempts: 1,
    maxAttempts: 3,
    retryBaseDelayMs: 15_000,
    scheduleTime: 1_764_590_000_123,
    createTime: 1_764_590_000_000,
    updateTime: 1_764_590_001_999,
    finishTime: null,
    workerId: "worker-01",
    leaseExpireTime: 1_764_590_061_999,
    deliveries: 1,
    lastError: null,
    resultJson: null,
    progressJson: null,
    traceContext: null,
    dependsOn: [],
    dependencyCounts: null,
    ...overrides,
  };
}

/** A random JSON value of at most `depth` levels, with the awkward cases mixed in. */
function randomJson(rand: () => number, depth: number): unknown {
  const r = rand();
  if (depth === 0 || r < 0.35) {
    const scalars = [null, true, false, 0, -0, 1, -1, 0.5, 1e300, -(2 ** 60), 2 ** 53 + 2, "", "x", "é✓🙂", "a\u0000b", "long ".repeat(40)];
    return scalars[Math.floor(rand() * scalars.length)];
  }
  const n = Math.floor(rand() * 5);
  if (r < 0.65) return Array.from({ length: n }, () => randomJson(rand, depth - 1));
  const keys = ["a", "b", "2", "10", "é", "", "key with space", "z"];
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => [keys[(i * 3 + Math.floor(rand() * 8)) % keys.length], randomJson(rand, depth - 1)]),
  );
}

function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

const nested = (levels: number) => "[".repeat(levels) + "1" + "]".repeat(levels);

/** Jobs of every shape the encoders must write as protobuf-es does. */
const JOBS: Array<[string, Job]> = [
  ["a running job", job()],
  [
    "negative priority, zero retry delay, sub-second times",
    job({ priority: -100, retryBaseDelayMs: 0, scheduleTime: 1, createTime: 999, updateTime: 1000 }),
  ],
  [
    "a finished job with a result and an error",
    job({
      state: "completed",
      finishTime: 1_764_590_009_000,
      workerId: null,
      leaseExpireTime: null,
      resultJson: '{"url":"s3://x"}',
      lastError: "earlier: boom",
    }),
  ],
  ["a null payload and a null result", job({ payloadJson: "null", resultJson: "null" })],
  ["progress reported by an earlier attempt", job({ progressJson: '{"done":3,"of":10,"stage":"render"}' })],
  ["a null progress beside a result", job({ progressJson: "null", resultJson: '"ok"' })],
  ["a job in a group", job({ groupKey: "customer-42" })],
  ["a group key of 128 visible ASCII characters, progress beside it", job({ groupKey: "~!".repeat(64), progressJson: "[1]" })],
  ["a trace context", job({ traceContext: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "" } })],
  [
    "a trace context with a tracestate of 512 bytes",
    job({
      traceContext: {
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        tracestate: `k=${"v".repeat(251)},l=${"w".repeat(256)}`,
      },
    }),
  ],
  ["big counters", job({ attempts: 100, maxAttempts: 100, deliveries: 2 ** 31 - 1, priority: 100 })],
  ["an empty object and an empty array", job({ payloadJson: "{}", resultJson: "[]" })],
  ["32 levels", job({ payloadJson: nested(32), resultJson: JSON.stringify(JSON.parse(nested(31))) })],
  ["a large payload", job({ payloadJson: JSON.stringify({ data: "x".repeat(60_000), list: Array.from({ length: 300 }, (_, i) => i) }) })],
];

describe("encodeLease", () => {
  it.each(JOBS)("writes the bytes protobuf-es writes: %s", (_, j) => {
    const lease = { job: j, leaseToken: "KJcpHvCkv1cwOCux5jbS6YS3goYN8Rc-mnKtalMnjis" };
    expect(Buffer.from(encodeLease(lease)).toString("hex")).toBe(Buffer.from(toBinary(LeaseSchema, leaseToWire(lease))).toString("hex"));
  });

  it("writes a job's dependencies, their counts and the lease's dependency results as protobuf-es does, truncated or not", () => {
    const dependsOn = [
      "01a230ac-40d4-7659-bdf9-000000000001",
      "01a230ac-40d4-7659-bdf9-000000000002",
      "01a230ac-40d4-7659-bdf9-000000000003",
    ];
    const dependencies = [
      { jobId: dependsOn[0], state: "completed" as const, resultJson: '{"url":"s3://x/1.pdf","n":[1,2.5,null]}', lastError: null },
      { jobId: dependsOn[1], state: "dead" as const, resultJson: null, lastError: "boom" },
    ];
    for (const counts of [
      { total: 3, completed: 1, failed: 1 },
      { total: 3, completed: 0, failed: 0 },
    ]) {
      for (const deps of [dependencies, dependencies.slice(0, 0), [...dependencies, { ...dependencies[0], jobId: dependsOn[2] }]]) {
        const lease = { job: job({ dependsOn, dependencyCounts: counts }), leaseToken: "t", dependencies: deps };
        expect(Buffer.from(encodeLease(lease)).equals(Buffer.from(toBinary(LeaseSchema, leaseToWire(lease))))).toBe(true);
        expect(fromBinary(LeaseSchema, encodeLease(lease)).dependenciesTruncated).toBe(deps.length < 3);
      }
    }
  });

  it("writes the same bytes as protobuf-es for 500 random JSON payloads and results", () => {
    const rand = seeded(7);
    for (let i = 0; i < 500; i++) {
      const lease = {
        job: job({
          payloadJson: JSON.stringify(randomJson(rand, 6)),
          resultJson: rand() < 0.5 ? null : JSON.stringify(randomJson(rand, 4)),
          progressJson: rand() < 0.5 ? null : JSON.stringify(randomJson(rand, 3)),
        }),
        leaseToken: `token-${i}`,
      };
      const mine = encodeLease(lease);
      expect(Buffer.from(mine).equals(Buffer.from(toBinary(LeaseSchema, leaseToWire(lease)))), lease.job.payloadJson).toBe(true);
      expect(fromBinary(LeaseSchema, mine)).toEqual(leaseToWire(lease));
    }
  });

  it("refuses a payload or result nested more than 32 levels", () => {
    expect(() => encodeLease({ job: job({ payloadJson: nested(33) }), leaseToken: "t" })).toThrow(NestingTooDeep);
    expect(() => encodeLease({ job: job({ resultJson: JSON.stringify({ a: JSON.parse(nested(32)) }) }), leaseToken: "t" })).toThrow(
      /result is nested/,
    );
    expect(() => encodeLease({ job: job({ progressJson: nested(33) }), leaseToken: "t" })).toThrow(/progress is nested/);
    expect(() => encodeLease({ job: job({ payloadJson: "{not json" }), leaseToken: "t" })).toThrow(SyntaxError);
  });

  it("travels as an unknown field that a decoder reads as the repeated leases", () => {
    const leases = [job(), job({ id: "01a230ac-40d5-76c8-a45d-79cad9938a7f", payloadJson: "[1,2]" })].map((j, i) => ({
      job: j,
      leaseToken: `t${i}`,
    }));
    const response = create(WorkResponseSchema, {});
    response.$unknown = leases.map((l) => asField(1, encodeLease(l)));
    const decoded = fromBinary(WorkResponseSchema, toBinary(WorkResponseSchema, response));
    expect(decoded.leases).toEqual(leases.map(leaseToWire));
  });
});

describe("encodeSubmitResponse", () => {
  const viaProtobufEs = (j: Job, deduplicated: boolean, basic: boolean) =>
    toBinary(SubmitResponseSchema, create(SubmitResponseSchema, { job: jobToWire(j, basic), deduplicated }));

  it.each(JOBS)("writes the bytes protobuf-es writes, whole and JOB_VIEW_BASIC, deduplicated or not: %s", (_, j) => {
    for (const basic of [false, true]) {
      for (const deduplicated of [false, true]) {
        expect(Buffer.from(encodeSubmitResponse(j, deduplicated, basic)).toString("hex")).toBe(
          Buffer.from(viaProtobufEs(j, deduplicated, basic)).toString("hex"),
        );
      }
    }
  });

  it("leaves payload, result and last_error out of JOB_VIEW_BASIC, progress in", () => {
    const j = job({ resultJson: '"done"', lastError: "boom", progressJson: '{"step":2}' });
    const decoded = fromBinary(SubmitResponseSchema, encodeSubmitResponse(j, false, true));
    expect(decoded.job?.payload).toBeUndefined();
    expect(decoded.job?.result).toBeUndefined();
    expect(decoded.job?.lastError).toBe("");
    expect(decoded.job?.progress).toEqual(jobToWire(j).progress);
    expect(decoded.job?.id).toBe(j.id);
  });

  it("travels as unknown fields that a decoder reads as the results, in order", () => {
    const rand = seeded(11);
    const jobs = Array.from({ length: 50 }, (_, i) =>
      job({ id: `01a230ac-40d5-76c8-a45d-${String(i).padStart(12, "0")}`, payloadJson: JSON.stringify(randomJson(rand, 5)) }),
    );
    for (const basic of [false, true]) {
      const response = create(SubmitBatchResponseSchema, {});
      response.$unknown = jobs.map((j, i) => asField(1, encodeSubmitResponse(j, i % 7 === 0, basic)));
      const decoded = fromBinary(SubmitBatchResponseSchema, toBinary(SubmitBatchResponseSchema, response));
      expect(decoded.results).toEqual(
        jobs.map((j, i) => create(SubmitResponseSchema, { job: jobToWire(j, basic), deduplicated: i % 7 === 0 })),
      );
    }
  });
});

describe("claimResponse", () => {
  const leases = [job(), job({ id: "01a230ac-40d5-76c8-a45d-79cad9938a7f", payloadJson: '{"deep":[[1,{"x":null}]]}' })].map((j, i) => ({
    job: j,
    leaseToken: `t${i}`,
  }));
  const results = [
    create(AcknowledgementResultSchema, {
      jobId: leases[0].job.id,
      status: { code: 0 },
      leaseExpireTime: timestampFromMs(1_764_590_100_500),
    }),
    create(AcknowledgementResultSchema, {
      jobId: "01a230ac-40d5-76c8-a45d-000000000001",
      status: {
        code: 10,
        message: "lease_token does not match",
        details: [anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "LEASE_REJECTED", domain: "leasequeue" }))],
      },
    }),
  ];
  const viaProtobufEs = (ls: typeof leases, rs: typeof results) =>
    toBinary(ClaimResponseSchema, create(ClaimResponseSchema, { leases: ls.map(leaseToWire), results: rs }));
  const encoded = (ls: typeof leases): WireLease[] => ls.map((l) => ({ jobId: l.job.id, encoded: asField(1, encodeLease(l)), bytes: 0 }));
  const asMessages = (ls: typeof leases): WireLease[] => ls.map((l) => ({ jobId: l.job.id, lease: leaseToWire(l), bytes: 0 }));

  it("writes encoded leases and the acks' results as the bytes protobuf-es writes for the same response", () => {
    for (const [ls, rs] of [
      [leases, results],
      [leases, []],
      [[], results],
      [leases.slice(0, 1), results.slice(1)],
    ] as const) {
      const mine = toBinary(ClaimResponseSchema, claimResponse(encoded([...ls]), [...rs], HAND_ENCODERS) as ClaimResponse);
      expect(Buffer.from(mine).toString("hex")).toBe(Buffer.from(viaProtobufEs([...ls], [...rs])).toString("hex"));
    }
  });

  it("gives JSON clients leases and results as messages", () => {
    const response = claimResponse(asMessages(leases), results, undefined) as ClaimResponse;
    expect(response.$unknown).toBeUndefined();
    expect(toJson(ClaimResponseSchema, response, { registry: createRegistry(ErrorInfoSchema) })).toEqual(
      toJson(ClaimResponseSchema, create(ClaimResponseSchema, { leases: leases.map(leaseToWire), results }), {
        registry: createRegistry(ErrorInfoSchema),
      }),
    );
  });
});

describe("encodeEventResponse", () => {
  const expected = (e: JobEvent) => toBinary(WatchEventsResponseSchema, create(WatchEventsResponseSchema, { event: eventToWire(e) }));

  function event(overrides: Partial<JobEvent> = {}): JobEvent {
    return {
      sequence: 1,
      jobId: "01a230ac-40d4-7659-bdf9-5453cc692072",
      queue: "billing",
      groupKey: "",
      kind: "submitted",
      fromState: null,
      toState: "queued",
      eventTime: 1_764_590_000_123,
      workerId: null,
      attempt: 0,
      message: null,
      ...overrides,
    };
  }

  it("writes what protobuf-es writes for every kind, state and optional field", () => {
    const rand = seeded(23);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
    const text = () => pick(["", "w", "worker-01", "é✓😀", "x".repeat(200), "a\u0000b"]);
    for (let i = 0; i < 2000; i++) {
      const e = event({
        sequence: pick([0, 1, 127, 128, 2 ** 31, Number.MAX_SAFE_INTEGER, Math.floor(rand() * 1e12)]),
        jobId: text(),
        queue: text(),
        groupKey: text(),
        kind: pick(EVENT_KINDS),
        fromState: pick([null, ...JOB_STATES]),
        toState: pick(JOB_STATES),
        eventTime: pick([0, 999, 1000, 1_764_590_000_000, Math.floor(rand() * 4e12)]),
        workerId: pick([null, "", "worker-01", "é✓"]),
        attempt: pick([0, 1, 127, 128, 2 ** 31 - 1]),
        message: pick([null, "", "boom", "x".repeat(300)]),
      });
      expect(Buffer.from(encodeEventResponse(e)).equals(Buffer.from(expected(e))), JSON.stringify(e)).toBe(true);
    }
  });

  it("reads back as the same event", () => {
    const e = event({ kind: "failed", fromState: "running", toState: "retry", workerId: "w", attempt: 2, message: "boom" });
    expect(fromBinary(WatchEventsResponseSchema, encodeEventResponse(e))).toEqual(
      create(WatchEventsResponseSchema, { event: eventToWire(e) }),
    );
  });
});
