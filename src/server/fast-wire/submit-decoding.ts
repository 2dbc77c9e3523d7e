/**
 * SubmitRequest and SubmitBatchRequest read from protobuf binary by hand,
 * for the gRPC unary path (grpc-unary.ts): the message protobuf-es's
 * fromBinary builds, except that a payload is read straight into its JSON
 * text (kept beside the message: service/hand-wire.ts) instead of into a
 * tree of Value, Struct and ListValue messages that validation would then
 * walk, convert and stringify (docs/performance.md "Where the CPU goes").
 */
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { SubmitBatchRequest, SubmitRequest } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { keepDecodedJson } from "../../service/hand-wire.js";
import {
  BinaryReader,
  DOUBT,
  WireType,
  done,
  nested,
  readSecondsNanos,
  readString,
  readStringMapEntry,
  readValueJson,
} from "./proto-reading.js";

/**
 * A SubmitRequest, or undefined: let protobuf-es parse it.
 *
 * It reads only what it is sure of. A field it does not know, a wire type
 * other than the field's, a message field or a payload's kind sent twice,
 * bytes that do not parse, or a payload that validation would refuse
 * (nested past the bound, a NaN or infinite number, a Value without a kind)
 * makes it answer undefined, and the caller parses the request with
 * protobuf-es as before: every refusal and every unusual request is
 * answered exactly as protobuf-es and validation answer it.
 */
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
    dependsOn: [],
    onDependencyFailure: 0,
    ref: "",
    dependsOnRefs: [],
  } as unknown as SubmitRequest;
  let payload: string | undefined;
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no === 4 || no === 5 || no === 13) {
      if (type !== WireType.Varint) throw DOUBT;
      if (no === 4) req.priority = r.int32();
      else if (no === 5) req.maxAttempts = r.int32();
      else req.onDependencyFailure = r.int32();
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
        payload = readValueJson(r, end);
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
      case 12:
        req.dependsOn.push(readString(r, end));
        break;
      case 14:
        req.ref = readString(r, end);
        break;
      case 15:
        req.dependsOnRefs.push(readString(r, end));
        break;
      default:
        throw DOUBT;
    }
  }
  done(r, end);
  if (payload !== undefined) keepDecodedJson(req, payload);
  return req;
}
