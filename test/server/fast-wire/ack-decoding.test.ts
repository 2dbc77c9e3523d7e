/**
 * The hand decoders of requests carrying acknowledgements
 * (src/server/fast-wire/ack-decoding.ts) held to protobuf-es: over random
 * ClaimRequests, AcknowledgeRequests and WorkRequests (every outcome, each
 * field at its bounds, results and progress of every shape, unknown
 * fields, fields twice, truncated and corrupted bytes), what they read is
 * the message fromBinary reads, with each result's and progress's JSON the
 * text validation makes of fromBinary's Value; what they are not sure of
 * goes to protobuf-es, and a WorkRequest protobuf-es refuses fails with its
 * error.
 */
import { create, fromBinary, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  decodeAcknowledgeRequest,
  decodeClaimRequest,
  readWorkRequest,
  UNDECODED_WORK,
  workRequestsOf,
  type UndecodedFields,
} from "../../../src/server/fast-wire/ack-decoding.js";
import { decodedJsonOf } from "../../../src/service/hand-wire.js";
import { jsonText } from "../../../src/service/validate.js";
import {
  AcknowledgementSchema,
  AcknowledgeRequestSchema,
  ClaimRequestSchema,
  WorkRequestSchema,
  type Acknowledgement,
} from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { damaged, nanos, nestedList, pick, randomValue, seconds, seeded, STRINGS, type Rand } from "../../helpers/random-proto.js";

const duration = (rand: Rand) => ({ seconds: seconds(rand), nanos: nanos(rand) });

function randomAck(rand: Rand, odd: boolean): MessageInitShape<typeof AcknowledgementSchema> {
  const ack: MessageInitShape<typeof AcknowledgementSchema> = {};
  if (rand() < 0.95) ack.jobId = pick(rand, ["", "0190f0e4-8a3b-7c1d-9e2f-3a4b5c6d7e8f", "not-a-uuid", "é"]);
  if (rand() < 0.95) ack.leaseToken = pick(rand, ["", "t".repeat(43), "x", "🙂"]);
  const o = rand();
  const value = () => (odd && rand() < 0.1 ? nestedList(pick(rand, [32, 33])) : randomValue(rand, 4, odd));
  if (o < 0.35) ack.outcome = { case: "complete", value: rand() < 0.7 ? { result: value() } : {} };
  else if (o < 0.55) {
    ack.outcome = {
      case: "fail",
      value: {
        error: rand() < 0.7 ? pick(rand, STRINGS) : "",
        permanent: rand() < 0.3,
        ...(rand() < 0.4 ? { retryDelay: duration(rand) } : {}),
      },
    };
  } else if (o < 0.75) {
    ack.outcome = {
      case: "heartbeat",
      value: { ...(rand() < 0.5 ? { leaseDuration: duration(rand) } : {}), ...(rand() < 0.5 ? { progress: value() } : {}) },
    };
  } else if (o < 0.83) ack.outcome = { case: "release", value: {} };
  else if (o < 0.93) ack.outcome = { case: "snooze", value: rand() < 0.7 ? { delay: duration(rand) } : {} };
  return ack;
}

const acks = (rand: Rand, odd: boolean) => Array.from({ length: Math.floor(rand() * 5) }, () => randomAck(rand, odd));

function randomClaim(rand: Rand, odd: boolean): Uint8Array {
  const req: MessageInitShape<typeof ClaimRequestSchema> = { acks: acks(rand, odd) };
  if (rand() < 0.9) req.queue = pick(rand, ["", "emails", "é"]);
  if (rand() < 0.9) req.workerId = pick(rand, ["", "w-1", "py-host-42"]);
  if (rand() < 0.4) req.leaseDuration = duration(rand);
  if (rand() < 0.4) req.maxJobs = pick(rand, [0, 1, 100, -1, 2 ** 31 - 1]);
  if (rand() < 0.4) req.wait = duration(rand);
  return toBinary(ClaimRequestSchema, create(ClaimRequestSchema, req));
}

const randomAcknowledge = (rand: Rand, odd: boolean) =>
  toBinary(AcknowledgeRequestSchema, create(AcknowledgeRequestSchema, { acks: acks(rand, odd) }));

function randomWork(rand: Rand, odd: boolean): Uint8Array {
  const start = rand() < 0.1 ? { start: { queue: "q", workerId: "w", maxInFlight: 4 } } : {};
  return toBinary(WorkRequestSchema, create(WorkRequestSchema, { ...start, acks: acks(rand, odd) }));
}

/** The JSON text validation makes of a Value; "refused" when it refuses it. */
function valueJson(value: Parameters<typeof jsonText>[1] | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return jsonText("value", value, Number.MAX_SAFE_INTEGER);
  } catch {
    return "refused";
  }
}

/** One acknowledgement read by hand against protobuf-es's reading of it. */
function agrees(got: Acknowledgement, want: Acknowledgement): void {
  const o = want.outcome;
  let put = got;
  if (o.case === "complete" || o.case === "heartbeat") {
    const wantValue = o.case === "complete" ? o.value.result : o.value.progress;
    const gotOutcome = got.outcome as typeof o;
    expect(valueJson(wantValue)).not.toBe("refused");
    expect(decodedJsonOf(gotOutcome.value)).toBe(valueJson(wantValue));
    // Held beside the message, not in it.
    const key = o.case === "complete" ? "result" : "progress";
    expect((gotOutcome.value as unknown as Record<string, unknown>)[key]).toBeUndefined();
    const { [key]: _value, ...rest } = o.value as unknown as Record<string, unknown>;
    expect(gotOutcome.value).toEqual(rest);
    put = { ...got, outcome: { case: o.case, value: { ...gotOutcome.value, [key]: wantValue } } } as Acknowledgement;
  } else {
    expect(got.outcome).toEqual(o);
  }
  expect(got.jobId).toBe(want.jobId);
  expect(got.leaseToken).toBe(want.leaseToken);
  // protobuf-es writes both the same way (the value put back).
  expect(toBinary(AcknowledgementSchema, put)).toEqual(toBinary(AcknowledgementSchema, want));
}

function reference<T>(parse: () => T): { message?: T; error?: unknown } {
  try {
    return { message: parse() };
  } catch (error) {
    return { error };
  }
}

function checkClaim(bytes: Uint8Array): "hand" | "left" {
  const want = reference(() => fromBinary(ClaimRequestSchema, bytes));
  const got = decodeClaimRequest(bytes);
  if (got === undefined) return "left";
  expect(want.error).toBeUndefined();
  const { acks: wantAcks, ...wantRest } = want.message!;
  const { acks: gotAcks, ...gotRest } = got;
  expect(gotRest).toEqual(wantRest);
  expect(gotAcks).toHaveLength(wantAcks.length);
  gotAcks.forEach((a, i) => agrees(a, wantAcks[i]));
  return "hand";
}

function checkAcknowledge(bytes: Uint8Array): "hand" | "left" {
  const want = reference(() => fromBinary(AcknowledgeRequestSchema, bytes));
  const got = decodeAcknowledgeRequest(bytes);
  if (got === undefined) return "left";
  expect(want.error).toBeUndefined();
  expect(got.$typeName).toBe(want.message!.$typeName);
  expect(got.acks).toHaveLength(want.message!.acks.length);
  got.acks.forEach((a, i) => agrees(a, want.message!.acks[i]));
  return "hand";
}

/** A WorkRequest as the undecoded Work call hands it over: by hand, or by protobuf-es with its error. */
function checkWork(bytes: Uint8Array): "hand" | "left" | "refused" {
  const want = reference(() => fromBinary(WorkRequestSchema, bytes));
  const undecoded = reference(() => fromBinary(UNDECODED_WORK.input, bytes) as UndecodedFields);
  if (undecoded.error !== undefined) {
    // Bytes that are not protobuf at all fail before any field is read, as they fail protobuf-es.
    expect(want.error).toBeDefined();
    return "refused";
  }
  const got = reference(() => readWorkRequest(undecoded.message!));
  if (want.error !== undefined) {
    expect((got.error as Error).message).toBe((want.error as Error).message);
    return "refused";
  }
  const message = got.message!;
  expect(message.start).toEqual(want.message!.start);
  expect(message.acks).toHaveLength(want.message!.acks.length);
  message.acks.forEach((a, i) => {
    if (isHandRead(a)) agrees(a, want.message!.acks[i]);
    else expect(a).toEqual(want.message!.acks[i]);
  });
  return message.start === undefined && message.acks.every(isHandRead) ? "hand" : "left";
}

/** Whether protobuf-es built this acknowledgement (it puts result and progress in the message) or this reader did. */
function isHandRead(a: Acknowledgement): boolean {
  const o = a.outcome;
  if (o.case === "complete" || o.case === "heartbeat")
    return decodedJsonOf(o.value) !== undefined || (o.case === "complete" ? o.value.result : o.value.progress) === undefined;
  return true;
}

describe("hand-decoded ClaimRequest and AcknowledgeRequest", () => {
  it("reads every well-formed request as protobuf-es does, each result and progress as validation's JSON text", () => {
    const rand = seeded(31);
    for (let i = 0; i < 2000; i++) {
      expect(checkClaim(randomClaim(rand, false))).toBe("hand");
      expect(checkAcknowledge(randomAcknowledge(rand, false))).toBe("hand");
    }
  });

  it("leaves to protobuf-es what validation would refuse in a value: NaN, Infinity, no kind, past 32 levels", () => {
    const rand = seeded(37);
    const outcomes = { hand: 0, left: 0 };
    for (let i = 0; i < 3000; i++) outcomes[checkClaim(randomClaim(rand, true))]++;
    expect(outcomes.left).toBeGreaterThan(100);
    expect(outcomes.hand).toBeGreaterThan(100);
  });

  it("reads damaged bytes only where protobuf-es reads them the same (unknown fields, fields twice, cuts, flips)", () => {
    const rand = seeded(41);
    const outcomes = { hand: 0, left: 0 };
    for (let i = 0; i < 3000; i++) {
      outcomes[checkClaim(damaged(rand, randomClaim(rand, false), randomClaim(rand, false)))]++;
      outcomes[checkAcknowledge(damaged(rand, randomAcknowledge(rand, false), randomAcknowledge(rand, false)))]++;
    }
    expect(outcomes.left).toBeGreaterThan(500);
    expect(outcomes.hand).toBeGreaterThan(500);
  });

  it("leaves a second outcome, which replaces the first in protobuf-es, to protobuf-es", () => {
    const ack = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .string("id")
      .tag(6, WireType.LengthDelimited)
      .bytes(new Uint8Array())
      .tag(3, WireType.LengthDelimited)
      .bytes(new Uint8Array())
      .finish();
    const bytes = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(ack).finish();
    expect(fromBinary(AcknowledgeRequestSchema, bytes).acks[0].outcome.case).toBe("complete");
    expect(decodeAcknowledgeRequest(bytes)).toBeUndefined();
  });
});

describe("the Work stream's requests read from their undecoded fields", () => {
  it("reads every well-formed request without a start by hand, as protobuf-es reads it", () => {
    const rand = seeded(47);
    for (let i = 0; i < 1500; i++) {
      const bytes = toBinary(WorkRequestSchema, create(WorkRequestSchema, { acks: acks(rand, false) }));
      const want = fromBinary(WorkRequestSchema, bytes);
      const got = readWorkRequest(fromBinary(UNDECODED_WORK.input, bytes));
      expect(got.start).toBeUndefined();
      expect(got.acks).toHaveLength(want.acks.length);
      // agrees() finds each result and progress held beside the message: read by hand.
      got.acks.forEach((a, j) => agrees(a, want.acks[j]));
    }
  });

  it("reads acknowledgements by hand, a start and damaged requests through protobuf-es, and fails as protobuf-es fails", () => {
    const rand = seeded(43);
    const outcomes = { hand: 0, left: 0, refused: 0 };
    for (let i = 0; i < 3000; i++) {
      const clean = randomWork(rand, i % 2 === 0);
      outcomes[checkWork(i % 3 === 0 ? damaged(rand, clean, randomWork(rand, false)) : clean)]++;
    }
    expect(outcomes.hand).toBeGreaterThan(1000);
    expect(outcomes.left).toBeGreaterThan(100);
    expect(outcomes.refused).toBeGreaterThan(50);
  });

  it("answers a request protobuf-es refuses with connect's wording of it", async () => {
    // Field 2 (acks) sent as a varint: a message without fields takes it, protobuf-es refuses it.
    const bytes = new Uint8Array([0x10, 0x01]);
    const undecoded = fromBinary(UNDECODED_WORK.input, bytes) as UndecodedFields;
    async function* one() {
      await Promise.resolve();
      yield undecoded;
    }
    const iterator = workRequestsOf(one())[Symbol.asyncIterator]();
    const error = await iterator.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).rawMessage).toMatch(/^parse binary: /);
    expect(() => fromBinary(WorkRequestSchema, bytes)).toThrow((error as ConnectError).rawMessage.slice("parse binary: ".length));
  });
});
