/**
 * Requests carrying acknowledgements read from protobuf binary by hand:
 * the Work stream's WorkRequest, Claim (with its acks) and Acknowledge. The
 * message protobuf-es's fromBinary builds, except that a result or a
 * progress is read straight into its JSON text (kept beside its message:
 * service/hand-wire.ts) instead of into a tree of Value messages that
 * validation would walk, convert and stringify (docs/performance.md "Where
 * the CPU goes"). As in submit-decoding.ts, whatever the reader is not sure of (a
 * field it does not know or sees twice, a wire type other than the
 * field's, bytes cut short, a value validation would refuse) leaves the
 * request to protobuf-es, so every refusal reads as before.
 */
import { create, createFileRegistry, fromBinary, type DescMessage, type DescMethodBiDiStreaming } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { FileDescriptorProtoSchema, type Duration } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  LeaseQueueService,
  WorkRequestSchema,
  type WorkResponseSchema,
  type AckComplete,
  type AckFail,
  type AckHeartbeat,
  type AckSnooze,
  type AcknowledgeRequest,
  type Acknowledgement,
  type ClaimRequest,
  type WorkRequest,
} from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { decodedJsonOf, keepDecodedJson } from "../../service/hand-wire.js";
import { BinaryReader, DOUBT, WireType, done, nested, readSecondsNanos, readString, readValueJson } from "./proto-reading.js";

/** An AcknowledgeRequest, or undefined: let protobuf-es parse it. */
export function decodeAcknowledgeRequest(bytes: Uint8Array): AcknowledgeRequest | undefined {
  try {
    const r = new BinaryReader(bytes);
    const req = { $typeName: "leasequeue.v1.AcknowledgeRequest", acks: [] as Acknowledgement[] };
    while (r.pos < r.len) {
      const [no, type] = r.tag();
      if (no !== 1 || type !== WireType.LengthDelimited) throw DOUBT;
      req.acks.push(readAcknowledgement(r, nested(r, r.len)));
    }
    return req as AcknowledgeRequest;
  } catch {
    return undefined;
  }
}

/** A ClaimRequest, or undefined: let protobuf-es parse it. */
export function decodeClaimRequest(bytes: Uint8Array): ClaimRequest | undefined {
  try {
    const r = new BinaryReader(bytes);
    const req = { $typeName: "leasequeue.v1.ClaimRequest", queue: "", workerId: "", maxJobs: 0, acks: [] } as unknown as ClaimRequest;
    let seen = 0;
    while (r.pos < r.len) {
      const [no, type] = r.tag();
      if (no !== 6) seen = firstTime(seen, no);
      if (no === 4) {
        if (type !== WireType.Varint) throw DOUBT;
        req.maxJobs = r.int32();
        continue;
      }
      if (type !== WireType.LengthDelimited) throw DOUBT;
      if (no === 1) req.queue = readString(r, r.len);
      else if (no === 2) req.workerId = readString(r, r.len);
      else if (no === 3) req.leaseDuration = readDuration(r, r.len);
      else if (no === 5) req.wait = readDuration(r, r.len);
      else if (no === 6) req.acks.push(readAcknowledgement(r, nested(r, r.len)));
      else throw DOUBT;
    }
    return req;
  } catch {
    return undefined;
  }
}

/**
 * A message named leasequeue.v1.WorkRequest without fields: the Work
 * stream's requests parsed as it arrive with every field undecoded (the
 * name keeps connect's and the boundary's wording of a request that is not
 * valid protobuf binary).
 */
const UNDECODED_WORK_REQUEST: DescMessage = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "leasequeue/v1/undecoded.proto",
    package: "leasequeue.v1",
    syntax: "proto3",
    messageType: [{ name: "WorkRequest" }],
  }),
  () => undefined,
).getMessage("leasequeue.v1.WorkRequest")!;

/**
 * LeaseQueueService's Work with its requests handed over undecoded, for a
 * binary client (server/rpc-handler.ts): the same call on the wire, its
 * requests read by workRequestsOf.
 */
export const UNDECODED_WORK: DescMethodBiDiStreaming<DescMessage, typeof WorkResponseSchema> = {
  ...LeaseQueueService.method.work,
  input: UNDECODED_WORK_REQUEST,
};

/** The requests of an UNDECODED_WORK call as WorkRequests; bytes that are not one fail as connect fails them ("parse binary: ..."). */
export async function* workRequestsOf(raw: AsyncIterable<UndecodedFields>): AsyncGenerator<WorkRequest> {
  for await (const message of raw) {
    let request: WorkRequest;
    try {
      request = readWorkRequest(message);
    } catch (err) {
      throw new ConnectError(`parse binary: ${err instanceof Error ? err.message : String(err)}`, Code.Internal);
    }
    yield request;
  }
}

/**
 * The fields of a WorkRequest, as they arrive when the Work stream's
 * requests are parsed as a message without fields (each an unknown field,
 * a length-delimited one with its length prefix).
 */
export interface UndecodedFields {
  $unknown?: { no: number; wireType: WireType; data: Uint8Array }[];
}

/**
 * A WorkRequest from its undecoded fields: its acknowledgements read here;
 * the whole request by protobuf-es when it has a `start` (the first message
 * of a stream) or anything this reader leaves to protobuf-es. Throws what
 * protobuf-es throws for bytes that are not a WorkRequest.
 */
export function readWorkRequest(raw: UndecodedFields): WorkRequest {
  const fields = raw.$unknown ?? [];
  try {
    const req = { $typeName: "leasequeue.v1.WorkRequest", acks: [] as Acknowledgement[] };
    for (const field of fields) {
      if (field.no !== 2 || field.wireType !== WireType.LengthDelimited) throw DOUBT;
      const r = new BinaryReader(field.data);
      req.acks.push(readAcknowledgement(r, nested(r, r.len)));
      done(r, r.len);
    }
    return req as WorkRequest;
  } catch {
    const w = new BinaryWriter();
    for (const field of fields) w.tag(field.no, field.wireType).raw(field.data);
    return fromBinary(WorkRequestSchema, w.finish());
  }
}

/** One Acknowledgement, within `end`. */
function readAcknowledgement(r: BinaryReader, end: number): Acknowledgement {
  const ack = { $typeName: "leasequeue.v1.Acknowledgement", jobId: "", leaseToken: "", outcome: { case: undefined } } as Acknowledgement;
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
    if (type !== WireType.LengthDelimited) throw DOUBT;
    // A second outcome replaces the first in protobuf-es: left to it.
    if (no >= 3 && ack.outcome.case !== undefined) throw DOUBT;
    switch (no) {
      case 1:
        ack.jobId = readString(r, end);
        break;
      case 2:
        ack.leaseToken = readString(r, end);
        break;
      case 3:
        ack.outcome = { case: "complete", value: readAckComplete(r, nested(r, end)) };
        break;
      case 4:
        ack.outcome = { case: "fail", value: readAckFail(r, nested(r, end)) };
        break;
      case 5:
        ack.outcome = { case: "heartbeat", value: readAckHeartbeat(r, nested(r, end)) };
        break;
      case 6:
        done(r, nested(r, end));
        ack.outcome = { case: "release", value: { $typeName: "leasequeue.v1.AckRelease" } };
        break;
      case 7:
        ack.outcome = { case: "snooze", value: readAckSnooze(r, nested(r, end)) };
        break;
      default:
        throw DOUBT;
    }
  }
  done(r, end);
  return ack;
}

function readAckComplete(r: BinaryReader, end: number): AckComplete {
  const complete = { $typeName: "leasequeue.v1.AckComplete" } as AckComplete;
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 1 || type !== WireType.LengthDelimited || decodedJsonOf(complete) !== undefined) throw DOUBT;
    keepDecodedJson(complete, readValueJson(r, end));
  }
  done(r, end);
  return complete;
}

function readAckFail(r: BinaryReader, end: number): AckFail {
  const fail = { $typeName: "leasequeue.v1.AckFail", error: "", permanent: false } as AckFail;
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
    if (no === 2) {
      if (type !== WireType.Varint) throw DOUBT;
      fail.permanent = r.bool();
      continue;
    }
    if (type !== WireType.LengthDelimited) throw DOUBT;
    if (no === 1) fail.error = readString(r, end);
    else if (no === 3) fail.retryDelay = readDuration(r, end);
    else throw DOUBT;
  }
  done(r, end);
  return fail;
}

function readAckHeartbeat(r: BinaryReader, end: number): AckHeartbeat {
  const heartbeat = { $typeName: "leasequeue.v1.AckHeartbeat" } as AckHeartbeat;
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
    if (type !== WireType.LengthDelimited) throw DOUBT;
    if (no === 1) heartbeat.leaseDuration = readDuration(r, end);
    else if (no === 2) keepDecodedJson(heartbeat, readValueJson(r, end));
    else throw DOUBT;
  }
  done(r, end);
  return heartbeat;
}

function readAckSnooze(r: BinaryReader, end: number): AckSnooze {
  const snooze = { $typeName: "leasequeue.v1.AckSnooze" } as AckSnooze;
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 1 || type !== WireType.LengthDelimited || snooze.delay !== undefined) throw DOUBT;
    snooze.delay = readDuration(r, end);
  }
  done(r, end);
  return snooze;
}

function readDuration(r: BinaryReader, end: number): Duration {
  return readSecondsNanos(r, end, "google.protobuf.Duration") as Duration;
}

/** `seen` (a bit per field number) with `no` added; a field sent twice is left to protobuf-es (it keeps the last, or merges a message). */
function firstTime(seen: number, no: number): number {
  const bit = 1 << no;
  if (no > 30 || (seen & bit) !== 0) throw DOUBT;
  return seen | bit;
}
