/**
 * The worker's hand reader of Work responses against protobuf-es: random
 * leases (every Job field, at its bounds, payloads of every JSON shape) read
 * as fromBinary reads them; whatever the reader is not sure of (an unknown
 * field, a field twice, a value kind twice, bytes cut short or damaged)
 * goes to protobuf-es, so a response reads the same, or fails the same.
 */
import { create, fromBinary, fromJson, toBinary, type JsonValue } from "@bufbuild/protobuf";
import { EmptySchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { createLeaseQueueClient, rawWorkCallOf } from "../../src/worker/client.js";
import { readLease, readWorkResponse } from "../../src/worker/lease-decoding.js";
import { JobSchema, LeaseSchema, WorkResponseSchema, type Lease } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

const STRINGS = ["", "x", "é✓🙂", "a\u0000b", "long ".repeat(30), "0193a4b2-1c2d-7e3f-8a9b-0c1d2e3f4a5b"];
const INT32 = [0, 1, -1, 127, 128, 2 ** 31 - 1, -(2 ** 31), 100, -100];

function randomJson(rand: () => number, depth: number): JsonValue {
  const r = rand();
  if (depth === 0 || r < 0.4) {
    const scalars: JsonValue[] = [null, true, false, 0, -0.5, 1e300, 2 ** 53 + 2, 5e-324, ...STRINGS];
    return scalars[Math.floor(rand() * scalars.length)];
  }
  const n = Math.floor(rand() * 4);
  if (r < 0.7) return Array.from({ length: n }, () => randomJson(rand, depth - 1));
  const keys = ["a", "b", "2", "é", "", "k q"];
  return Object.fromEntries(Array.from({ length: n }, () => [keys[Math.floor(rand() * keys.length)], randomJson(rand, depth - 1)]));
}

function randomLease(rand: () => number): Lease {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  const maybe = <T>(make: () => T): T | undefined => (rand() < 0.5 ? make() : undefined);
  const time = () => ({ seconds: pick([0n, 1n, 1_764_590_000n, 2n ** 40n, -5n, 2n ** 62n]), nanos: pick([0, 1, 999_999_999, -1]) });
  return create(LeaseSchema, {
    leaseToken: maybe(() => pick(STRINGS)),
    job: maybe(() =>
      create(JobSchema, {
        id: pick(STRINGS),
        queue: pick(STRINGS),
        task: pick(STRINGS),
        payload: maybe(() => fromJson(ValueSchema, randomJson(rand, 5))),
        priority: pick(INT32),
        state: pick([0, 1, 3, 7, 99, -3]),
        attempts: pick(INT32),
        maxAttempts: pick(INT32),
        retryBaseDelay: maybe(time),
        scheduleTime: maybe(time),
        createTime: maybe(time),
        updateTime: maybe(time),
        finishTime: maybe(time),
        workerId: pick(STRINGS),
        leaseExpireTime: maybe(time),
        deliveries: pick(INT32),
        lastError: pick(STRINGS),
        result: maybe(() => fromJson(ValueSchema, randomJson(rand, 3))),
        progress: maybe(() => fromJson(ValueSchema, randomJson(rand, 2))),
        groupKey: pick(STRINGS),
        traceContext:
          rand() < 0.5 ? {} : { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: pick(STRINGS) },
      }),
    ),
  });
}

/** The response as the worker's raw Work call hands it over: an Empty holding every field as unknown. */
const asRaw = (bytes: Uint8Array) => fromBinary(EmptySchema, bytes);

/** readWorkResponse of `bytes`, or the error it throws. */
function mine(bytes: Uint8Array): unknown {
  try {
    return readWorkResponse(asRaw(bytes));
  } catch (err) {
    return err instanceof Error ? err.message : err;
  }
}

function reference(bytes: Uint8Array): unknown {
  try {
    return fromBinary(WorkResponseSchema, bytes);
  } catch (err) {
    return err instanceof Error ? err.message : err;
  }
}

describe("which clients read Work responses by hand", () => {
  it("the SDK's own binary HTTP/2 clients without interceptors of the caller's", () => {
    const url = "http://127.0.0.1:9";
    expect(rawWorkCallOf(createLeaseQueueClient({ url }))).toBeDefined();
    expect(rawWorkCallOf(createLeaseQueueClient({ url, token: "t" }))).toBeDefined();
    expect(rawWorkCallOf(createLeaseQueueClient({ url, transport: "connect" }))).toBeDefined();
    // An interceptor of the caller's may look at the responses: it gets them decoded.
    expect(rawWorkCallOf(createLeaseQueueClient({ url, interceptors: [(next) => next] }))).toBeUndefined();
    expect(rawWorkCallOf(createLeaseQueueClient({ url, transport: "connect", useBinaryFormat: false }))).toBeUndefined();
    expect(rawWorkCallOf(createLeaseQueueClient({ url, transport: "connect", httpVersion: "1.1" }))).toBeUndefined();
  });
});

describe("readLease and readWorkResponse", () => {
  it("read 2,000 random leases as protobuf-es reads them, by hand", () => {
    const rand = seeded(21);
    for (let i = 0; i < 2000; i++) {
      const lease = randomLease(rand);
      const bytes = toBinary(LeaseSchema, lease);
      const read = readLease(bytes);
      expect(read, `lease ${i}`).toBeDefined();
      expect(read).toStrictEqual(fromBinary(LeaseSchema, bytes));
    }
  });

  it("read whole responses: leases, acknowledgement results and cancelled jobs in order", () => {
    const rand = seeded(22);
    for (let i = 0; i < 300; i++) {
      const response = create(WorkResponseSchema, {
        leases: Array.from({ length: Math.floor(rand() * 4) }, () => randomLease(rand)),
        results: Array.from({ length: Math.floor(rand() * 3) }, (_, k) => ({
          jobId: `job-${k}`,
          status: rand() < 0.5 ? undefined : { code: 9, message: "lease not held" },
        })),
        cancelledJobIds: Array.from({ length: Math.floor(rand() * 3) }, (_, k) => `0190b3c4-0000-7000-8000-00000000000${k}`),
      });
      const bytes = toBinary(WorkResponseSchema, response);
      expect(mine(bytes)).toStrictEqual(reference(bytes));
    }
  });

  it("leave to protobuf-es what they are not sure of: unknown fields, fields twice, a second kind, a __proto__ key", () => {
    const lease = toBinary(
      LeaseSchema,
      create(LeaseSchema, { job: { id: "x", payload: { kind: { case: "numberValue", value: 1 } } }, leaseToken: "t" }),
    );
    // A Job with field 30 (a varint), unknown to this release.
    const job = [...toBinary(JobSchema, create(JobSchema, { id: "x" })), 0xf0, 0x01, 0x05];
    const cases: Array<[string, Uint8Array]> = [
      ["an unknown Lease field", concat(lease, [0x1a, 0x01, 0x41])],
      ["the token twice", concat(lease, [0x12, 0x01, 0x41])],
      ["an unknown Job field", Uint8Array.from([0x0a, ...varint(job.length), ...job])],
      ["a Value with two kinds", valueLease([0x08, 0x00, 0x20, 0x01])],
      ["a struct key __proto__", valueLease([0x2a, 0x0f, 0x0a, 0x0d, 0x0a, 0x09, ...Buffer.from("__proto__"), 0x12, 0x00])],
      ["a Value field unknown to Value", valueLease([0x38, 0x01])],
    ];
    for (const [what, bytes] of cases) {
      expect(readLease(bytes), what).toBeUndefined();
      const response = concat(new Uint8Array([0x0a, ...varint(bytes.length)]), [...bytes]);
      expect(mine(response), what).toStrictEqual(reference(response));
    }
  });

  it("fail as protobuf-es fails on damaged bytes, and read what it reads", () => {
    const rand = seeded(23);
    for (let i = 0; i < 2000; i++) {
      const bytes = toBinary(WorkResponseSchema, create(WorkResponseSchema, { leases: [randomLease(rand)] }));
      const damaged = Uint8Array.from(bytes);
      if (rand() < 0.5) damaged[Math.floor(rand() * damaged.length)] ^= 1 << Math.floor(rand() * 8);
      const cut = rand() < 0.3 ? damaged.subarray(0, Math.floor(rand() * damaged.length)) : damaged;
      let raw;
      try {
        raw = asRaw(cut);
      } catch {
        continue; // the raw call itself refuses it, as the decoded call would (the envelope is the same)
      }
      let expected: unknown;
      let got: unknown;
      try {
        expected = fromBinary(WorkResponseSchema, cut);
      } catch (err) {
        expected = (err as Error).message;
      }
      try {
        got = readWorkResponse(raw);
      } catch (err) {
        got = (err as Error).message;
      }
      expect(got, Buffer.from(cut).toString("hex")).toStrictEqual(expected);
    }
  });
});

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

function concat(a: Uint8Array, b: number[]): Uint8Array {
  return Uint8Array.from([...a, ...b]);
}

/** A Lease whose job's payload is the Value of `valueBody`'s bytes. */
function valueLease(valueBody: number[]): Uint8Array {
  const job = [0x22, ...varint(valueBody.length), ...valueBody];
  return Uint8Array.from([0x0a, ...varint(job.length), ...job]);
}
