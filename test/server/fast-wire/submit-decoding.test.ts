/**
 * The hand decoder of SubmitRequest and SubmitBatchRequest
 * (src/server/fast-wire/submit-decoding.ts) held to protobuf-es: over random
 * requests (every field, payloads of every shape, unknown fields, fields
 * sent twice, requests concatenated, truncated and corrupted bytes), what
 * it reads is the message fromBinary reads and each payload's JSON is the
 * text validation makes of the payload fromBinary reads; whatever it is not
 * sure of (or protobuf-es refuses, or validation refuses in the payload) it
 * leaves to protobuf-es by answering undefined.
 */
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { damaged, nanos, nestedList, pick, randomValue, seconds, seeded, STRINGS, type Rand } from "../../helpers/random-proto.js";
import { decodeSubmitBatchRequest, decodeSubmitRequest } from "../../../src/server/fast-wire/submit-decoding.js";
import { decodedJsonOf } from "../../../src/service/hand-wire.js";
import { jsonText } from "../../../src/service/validate.js";
import {
  type DependencyFailurePolicy,
  type SubmitBatchRequest,
  SubmitBatchRequestSchema,
  type SubmitRequest,
  SubmitRequestSchema,
} from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";

function randomSubmit(rand: Rand, odd: boolean): MessageInitShape<typeof SubmitRequestSchema> {
  const req: MessageInitShape<typeof SubmitRequestSchema> = {};
  if (rand() < 0.9) req.queue = pick(rand, ["", "emails", "q-1", "é", "x".repeat(70)]);
  if (rand() < 0.9) req.task = pick(rand, ["", "send", "t.e.s.t"]);
  const p = rand();
  if (p < 0.8) req.payload = randomValue(rand, 4, odd);
  else if (odd && p < 0.85) req.payload = nestedList(pick(rand, [31, 32, 33, 40]));
  if (rand() < 0.3) req.priority = pick(rand, [0, 1, -1, 2 ** 31 - 1, -(2 ** 31)]);
  if (rand() < 0.3) req.maxAttempts = pick(rand, [0, 1, 25, 1000, -3]);
  if (rand() < 0.3) req.retryBaseDelay = { seconds: seconds(rand), nanos: nanos(rand) };
  const s = rand();
  if (s < 0.2) req.schedule = { case: "scheduleTime", value: { seconds: seconds(rand), nanos: nanos(rand) } };
  else if (s < 0.4) req.schedule = { case: "delay", value: { seconds: seconds(rand), nanos: nanos(rand) } };
  if (rand() < 0.3) req.idempotencyKey = pick(rand, ["k", "order-42", " spaced ", "é"]);
  if (rand() < 0.3) req.groupKey = pick(rand, ["tenant-a", ""]);
  if (rand() < 0.3) {
    const trace: Record<string, string> = {};
    for (const k of ["traceparent", "tracestate", "__proto__", "", "x"]) if (rand() < 0.5) trace[k] = pick(rand, STRINGS);
    req.traceContext = trace;
  }
  const ids = ["01a242d1-4710-7662-b4c2-a72339aedb36", "x", "", "é"];
  if (rand() < 0.3) req.dependsOn = Array.from({ length: Math.floor(rand() * 4) }, () => pick(rand, ids));
  if (rand() < 0.2) req.onDependencyFailure = pick(rand, [0, 1, 2, 3, 9, -1]) as DependencyFailurePolicy;
  if (rand() < 0.2) req.ref = pick(rand, ["p1", "", " spaced "]);
  if (rand() < 0.2) req.dependsOnRefs = Array.from({ length: Math.floor(rand() * 3) }, () => pick(rand, ["p1", "p2", ""]));
  return req;
}

function randomBatch(rand: Rand, odd: boolean): Uint8Array {
  const n = Math.floor(rand() * 6);
  return toBinary(
    SubmitBatchRequestSchema,
    create(SubmitBatchRequestSchema, {
      jobs: Array.from({ length: n }, () => randomSubmit(rand, odd)),
      view: pick(rand, [0, 1, 2, 7]),
    }),
  );
}

/** What protobuf-es and validation make of the request: the message and each payload's JSON text (or the error). */
function reference<T extends SubmitRequest | SubmitBatchRequest>(parse: () => T): { message?: T; error?: unknown } {
  try {
    return { message: parse() };
  } catch (error) {
    return { error };
  }
}

function payloadOf(req: SubmitRequest): { json?: string; refused?: boolean } {
  if (req.payload === undefined) return {};
  try {
    return { json: jsonText("payload", req.payload, Number.MAX_SAFE_INTEGER) };
  } catch {
    return { refused: true };
  }
}

/** Checks one request read by hand against protobuf-es's reading; true when the hand decoder read it. */
function agrees(got: SubmitRequest, want: SubmitRequest): void {
  const wantPayload = payloadOf(want);
  expect(wantPayload.refused).toBeUndefined();
  expect(decodedJsonOf(got)).toBe(wantPayload.json);
  expect(got.payload).toBeUndefined();
  const { payload: _payload, ...rest } = want;
  expect(got).toEqual(rest);
  expect(Object.getPrototypeOf(got.traceContext)).toBe(null);
  // protobuf-es writes both the same way (the payload put back).
  expect(toBinary(SubmitRequestSchema, { ...got, payload: want.payload })).toEqual(toBinary(SubmitRequestSchema, want));
}

function check(bytes: Uint8Array): "hand" | "left" {
  const want = reference(() => fromBinary(SubmitBatchRequestSchema, bytes));
  const got = decodeSubmitBatchRequest(bytes);
  if (got === undefined) return "left";
  expect(want.error).toBeUndefined();
  const message = want.message!;
  expect(got.view).toBe(message.view);
  expect(got.jobs).toHaveLength(message.jobs.length);
  got.jobs.forEach((job, i) => agrees(job, message.jobs[i]));
  return "hand";
}

describe("hand-decoded SubmitBatchRequest", () => {
  it("reads every well-formed request as protobuf-es does, each payload as validation's JSON text", () => {
    const rand = seeded(7);
    let hand = 0;
    for (let i = 0; i < 2000; i++) if (check(randomBatch(rand, false)) === "hand") hand++;
    // Requests that protobuf-es and validation accept are all read by hand.
    expect(hand).toBe(2000);
  });

  it("leaves to protobuf-es what validation would refuse in a payload: NaN, Infinity, no kind, past 32 levels", () => {
    const rand = seeded(11);
    const outcomes = { hand: 0, left: 0 };
    for (let i = 0; i < 3000; i++) outcomes[check(randomBatch(rand, true))]++;
    expect(outcomes.left).toBeGreaterThan(100);
    expect(outcomes.hand).toBeGreaterThan(100);
    const at = (levels: number) =>
      toBinary(
        SubmitBatchRequestSchema,
        create(SubmitBatchRequestSchema, { jobs: [{ queue: "q", task: "t", payload: nestedList(levels) }] }),
      );
    expect(check(at(32))).toBe("hand");
    expect(check(at(33))).toBe("left");
  });

  it("reads damaged bytes only where protobuf-es reads them the same (unknown fields, fields twice, cuts, flips)", () => {
    const rand = seeded(23);
    const outcomes = { hand: 0, left: 0 };
    for (let i = 0; i < 4000; i++) outcomes[check(damaged(rand, randomBatch(rand, false), randomBatch(rand, false)))]++;
    expect(outcomes.left).toBeGreaterThan(500);
    expect(outcomes.hand).toBeGreaterThan(100);
  });

  it("leaves invalid UTF-8 in a string to protobuf-es, which refuses it", () => {
    const bytes = new Uint8Array([0x0a, 0x04, 0x0a, 0x02, 0xc3, 0x28]); // jobs[0].queue = 0xc3 0x28
    expect(() => fromBinary(SubmitBatchRequestSchema, bytes)).toThrow();
    expect(decodeSubmitBatchRequest(bytes)).toBeUndefined();
  });
});

describe("hand-decoded SubmitRequest", () => {
  it("reads a Submit as protobuf-es does, and leaves a damaged one to it", () => {
    const rand = seeded(5);
    let hand = 0;
    for (let i = 0; i < 3000; i++) {
      const clean = toBinary(SubmitRequestSchema, create(SubmitRequestSchema, randomSubmit(rand, i % 2 === 0)));
      const bytes = i % 3 === 0 ? damaged(rand, clean, clean) : clean;
      const want = reference(() => fromBinary(SubmitRequestSchema, bytes));
      const got = decodeSubmitRequest(bytes);
      if (got === undefined) continue;
      hand++;
      expect(want.error).toBeUndefined();
      agrees(got, want.message!);
    }
    expect(hand).toBeGreaterThan(1000);
  });

  it("gives the payload's JSON the key order and overwrites of a JavaScript object, without __proto__, as protobuf-es and toJson do", () => {
    // A Struct written entry by entry: b=1, "10"=true, b="x" (a key again), __proto__={} (dropped by toJson).
    const entry = (key: string, value: MessageInitShape<typeof ValueSchema>) => {
      const w = new BinaryWriter();
      w.tag(1, WireType.LengthDelimited).string(key);
      w.tag(2, WireType.LengthDelimited).bytes(toBinary(ValueSchema, create(ValueSchema, value)));
      return w.finish();
    };
    const struct = new BinaryWriter();
    for (const e of [
      entry("b", { kind: { case: "numberValue", value: 1 } }),
      entry("10", { kind: { case: "boolValue", value: true } }),
      entry("b", { kind: { case: "stringValue", value: "x" } }),
      entry("__proto__", { kind: { case: "structValue", value: {} } }),
    ])
      struct.tag(1, WireType.LengthDelimited).bytes(e);
    const value = new BinaryWriter().tag(5, WireType.LengthDelimited).bytes(struct.finish()).finish();
    const bytes = new BinaryWriter().tag(3, WireType.LengthDelimited).bytes(value).finish();
    const want = fromBinary(SubmitRequestSchema, bytes);
    expect(payloadOf(want).json).toBe('{"10":true,"b":"x"}');
    agrees(decodeSubmitRequest(bytes)!, want);
  });
});
