/**
 * SubmitRequest and SubmitBatchRequest read from protobuf binary by hand,
 * for the gRPC unary path (server/grpc-unary.ts): the message protobuf-es's
 * fromBinary builds, except that a payload is read straight into its JSON
 * text (kept beside the message: payloadJsonOf) instead of into a tree of
 * Value, Struct and ListValue messages that validation would then walk,
 * convert and stringify (docs/performance.md "Where the CPU goes").
 *
 * It reads only what it is sure of. A field it does not know, a wire type
 * other than the field's, a message field or a payload's kind sent twice,
 * bytes that do not parse, or a payload that validation would refuse
 * (nested past the bound, a NaN or infinite number, a Value without a kind)
 * makes it answer undefined, and the caller parses the request with
 * protobuf-es as before: every refusal and every unusual request is
 * answered exactly as protobuf-es and validation answer it.
 */
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { BOUNDS } from "../domain/request-bounds.js";
import type { SubmitBatchRequest, SubmitRequest } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

/** The JSON text of each payload read by this decoder, by the request it belongs to. */
const PAYLOAD_JSON = new WeakMap<SubmitRequest, string>();

/** The payload of a request this decoder read, as compact JSON text (as validation would write it); undefined otherwise. */
export function payloadJsonOf(req: SubmitRequest): string | undefined {
  return PAYLOAD_JSON.get(req);
}

/** A SubmitRequest, or undefined: let protobuf-es parse it. */
export function decodeSubmitRequest(bytes: Uint8Array): SubmitRequest | undefined {
  try {
    const r = new BinaryReader(bytes);
    return readSubmitRequest(r, r.len);
  } catch {
    return undefined;
  }
}

/** A SubmitBatchRequest, or undefined: let protobuf-es parse it. */
export function decodeSubmitBatchRequest(bytes: Uint8Array): SubmitBatchRequest | undefined {
  try {
    const r = new BinaryReader(bytes);
    const batch = { $typeName: "leasequeue.v1.SubmitBatchRequest", jobs: [] as SubmitRequest[], view: 0 };
    while (r.pos < r.len) {
      const [no, type] = r.tag();
      if (no === 1 && type === WireType.LengthDelimited) batch.jobs.push(readSubmitRequest(r, nested(r, r.len)));
      else if (no === 2 && type === WireType.Varint) batch.view = r.int32();
      else throw DOUBT;
    }
    return batch as SubmitBatchRequest;
  } catch {
    return undefined;
  }
}

/** The hand decoders by request type, for the gRPC unary path. */
export const HAND_DECODERS: ReadonlyMap<string, (bytes: Uint8Array) => object | undefined> = new Map<
  string,
  (bytes: Uint8Array) => object | undefined
>([
  ["leasequeue.v1.SubmitRequest", decodeSubmitRequest],
  ["leasequeue.v1.SubmitBatchRequest", decodeSubmitBatchRequest],
]);

/** Thrown for anything the decoder leaves to protobuf-es. */
const DOUBT = new Error("left to protobuf-es");

/** The end of the length-delimited field at the reader, within `end`. */
function nested(r: BinaryReader, end: number): number {
  const length = r.uint32();
  const to = r.pos + length;
  if (to > end) throw DOUBT;
  return to;
}

function done(r: BinaryReader, end: number): void {
  if (r.pos !== end) throw DOUBT;
}

function readSubmitRequest(r: BinaryReader, end: number): SubmitRequest {
  const req = {
    $typeName: "leasequeue.v1.SubmitRequest",
    queue: "",
    task: "",
    priority: 0,
    maxAttempts: 0,
    schedule: { case: undefined },
    idempotencyKey: "",
    groupKey: "",
    traceContext: Object.create(null) as Record<string, string>,
  } as SubmitRequest;
  let payload: string | undefined;
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no === 4 || no === 5) {
      if (type !== WireType.Varint) throw DOUBT;
      if (no === 4) req.priority = r.int32();
      else req.maxAttempts = r.int32();
      continue;
    }
    if (type !== WireType.LengthDelimited) throw DOUBT;
    switch (no) {
      case 1:
        req.queue = readString(r, end);
        break;
      case 2:
        req.task = readString(r, end);
        break;
      case 3:
        if (payload !== undefined) throw DOUBT;
        payload = JSON.stringify(readValue(r, nested(r, end), 0));
        break;
      case 6:
        if (req.retryBaseDelay !== undefined) throw DOUBT;
        req.retryBaseDelay = readSecondsNanos(r, end, "google.protobuf.Duration") as Duration;
        break;
      case 7:
        if (req.schedule.case === "scheduleTime") throw DOUBT;
        req.schedule = { case: "scheduleTime", value: readSecondsNanos(r, end, "google.protobuf.Timestamp") as Timestamp };
        break;
      case 8:
        if (req.schedule.case === "delay") throw DOUBT;
        req.schedule = { case: "delay", value: readSecondsNanos(r, end, "google.protobuf.Duration") as Duration };
        break;
      case 9:
        req.idempotencyKey = readString(r, end);
        break;
      case 10:
        req.groupKey = readString(r, end);
        break;
      case 11:
        readStringMapEntry(r, nested(r, end), req.traceContext);
        break;
      default:
        throw DOUBT;
    }
  }
  done(r, end);
  if (payload !== undefined) PAYLOAD_JSON.set(req, payload);
  return req;
}

/** A proto3 string within `end` (invalid UTF-8 throws, as protobuf-es refuses it). */
function readString(r: BinaryReader, end: number): string {
  const text = r.string(true);
  if (r.pos > end) throw DOUBT;
  return text;
}

/** A Duration or Timestamp: int64 seconds (1), int32 nanos (2). */
function readSecondsNanos(r: BinaryReader, end: number, typeName: string): { $typeName: string; seconds: bigint; nanos: number } {
  const to = nested(r, end);
  const value = { $typeName: typeName, seconds: 0n, nanos: 0 };
  while (r.pos < to) {
    const [no, type] = r.tag();
    if (type !== WireType.Varint) throw DOUBT;
    if (no === 1) value.seconds = BigInt(r.int64());
    else if (no === 2) value.nanos = r.int32();
    else throw DOUBT;
  }
  done(r, to);
  return value;
}

/** One entry of a map<string, string>: key (1) and value (2), each absent as "". */
function readStringMapEntry(r: BinaryReader, end: number, into: Record<string, string>): void {
  let key = "";
  let value = "";
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (type !== WireType.LengthDelimited) throw DOUBT;
    if (no === 1) key = readString(r, end);
    else if (no === 2) value = readString(r, end);
    else throw DOUBT;
  }
  done(r, end);
  into[key] = value;
}

/**
 * A google.protobuf.Value as the plain JSON value toJson gives, `level`
 * being the nesting level of the container it is in (0 at the top).
 */
function readValue(r: BinaryReader, end: number, level: number): unknown {
  let kind = 0;
  let value: unknown;
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (kind !== 0) throw DOUBT;
    kind = no;
    switch (no) {
      case 1:
        if (type !== WireType.Varint) throw DOUBT;
        r.int32();
        value = null;
        break;
      case 2:
        if (type !== WireType.Bit64) throw DOUBT;
        value = r.double();
        if (!Number.isFinite(value)) throw DOUBT;
        break;
      case 3:
        if (type !== WireType.LengthDelimited) throw DOUBT;
        value = readString(r, end);
        break;
      case 4:
        if (type !== WireType.Varint) throw DOUBT;
        value = r.bool();
        break;
      case 5:
        if (type !== WireType.LengthDelimited) throw DOUBT;
        value = readStruct(r, nested(r, end), level + 1);
        break;
      case 6:
        if (type !== WireType.LengthDelimited) throw DOUBT;
        value = readList(r, nested(r, end), level + 1);
        break;
      default:
        throw DOUBT;
    }
  }
  if (kind === 0) throw DOUBT;
  done(r, end);
  return value;
}

/** A Struct at nesting level `level`: its entries (1) in the order and with the overwrites a JavaScript object gives them. */
function readStruct(r: BinaryReader, end: number, level: number): Record<string, unknown> {
  if (level > BOUNDS.jsonDepth) throw DOUBT;
  const object: Record<string, unknown> = {};
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 1 || type !== WireType.LengthDelimited) throw DOUBT;
    const to = nested(r, end);
    let key = "";
    let value: unknown;
    let hasValue = false;
    while (r.pos < to) {
      const [entryNo, entryType] = r.tag();
      if (entryType !== WireType.LengthDelimited) throw DOUBT;
      if (entryNo === 1) key = readString(r, to);
      else if (entryNo === 2 && !hasValue) {
        const valueEnd = nested(r, to);
        value = readValue(r, valueEnd, level);
        hasValue = true;
      } else throw DOUBT;
    }
    done(r, to);
    if (!hasValue) throw DOUBT;
    // toJson assigns every key to a plain object, where "__proto__" sets the prototype: it never reaches the JSON.
    if (key !== "__proto__") object[key] = value;
  }
  done(r, end);
  return object;
}

/** A ListValue at nesting level `level`: its values (1). */
function readList(r: BinaryReader, end: number, level: number): unknown[] {
  if (level > BOUNDS.jsonDepth) throw DOUBT;
  const list: unknown[] = [];
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 1 || type !== WireType.LengthDelimited) throw DOUBT;
    const to = nested(r, end);
    list.push(readValue(r, to, level));
  }
  done(r, end);
  return list;
}
