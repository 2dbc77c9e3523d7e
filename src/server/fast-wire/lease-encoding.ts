/**
 * leasequeue.v1.Lease in protobuf binary, written straight from the stored
 * job: the hot path of every lease path (Work, StreamClaims, Claim) for
 * binary clients; and, the same way, the results of SubmitBatch and the
 * events of WatchEvents (watch-frames.ts).
 */
import type { UnknownField } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import type { Job, JobEvent } from "../../domain/job.js";
import { BOUNDS } from "../../domain/request-bounds.js";
import type { ClaimedLease } from "../../store/store.js";
import { JobState } from "../../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { NestingTooDeep, type HandEncoders, type JsonField } from "../../service/hand-wire.js";
import { KIND_TO_WIRE, STATE_TO_WIRE } from "../../service/wire.js";
import { writeJsonText } from "./json-text-value.js";
import { ProtoWriter, varintSize } from "./proto-writer.js";

/** The hand encoders the handlers call for binary clients (service/hand-wire.ts). */
export const HAND_ENCODERS: HandEncoders = {
  lease: encodeLease,
  submitResponse: encodeSubmitResponse,
  field: asField,
};

/**
 * The lease as protobuf binary. Throws NestingTooDeep for a payload, result
 * or progress over 32 levels, and SyntaxError for stored JSON that cannot be read.
 *
 * protobuf-es encodes by reflection: a Lease is first built as a tree of
 * messages (the job, its timestamps, the payload's Value, Struct and
 * ListValue nodes) and then walked field by field, a large share of the
 * server's CPU on the batched path (docs/performance.md). This writer emits
 * the same bytes (the tests compare it with toBinary over many jobs) from the
 * job's fields and its payload's JSON text in one pass into one buffer.
 *
 * The handler hands the encoded lease to connect as an unknown field of the
 * response message (`$unknown`): protobuf-es writes unknown fields verbatim,
 * so the binary response is exactly the one a Lease message would have
 * produced. JSON clients do not get this path (unknown fields are not
 * written to JSON): they are served Lease messages.
 */
export function encodeLease(lease: ClaimedLease): Uint8Array {
  const w = new ProtoWriter();
  const job = w.beginMessage(1);
  writeJob(w, lease.job);
  w.endMessage(job);
  w.stringField(2, lease.leaseToken);
  const deps = lease.dependencies ?? [];
  for (const d of deps) {
    const mark = w.beginMessage(3);
    w.stringField(1, d.jobId);
    w.int32Field(2, STATE_TO_WIRE[d.state]);
    if (d.resultJson !== null) writeJsonValue(w, 3, d.resultJson, "result");
    w.stringField(4, d.lastError ?? "");
    w.endMessage(mark);
  }
  if (lease.job.dependsOn.length > deps.length) {
    w.tag(4, WireType.Varint);
    w.varint(1);
  }
  return w.finish();
}

/** An encoded message as the entry of message field `no` (e.g. 1 for WorkResponse.leases). */
export function asField(no: number, message: Uint8Array): UnknownField {
  const len = varintSize(message.length);
  const data = new Uint8Array(len + message.length);
  let v = message.length;
  let i = 0;
  while (v > 0x7f) {
    data[i++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  data[i] = v;
  data.set(message, len);
  return { no, wireType: WireType.LengthDelimited, data };
}

/**
 * A SubmitResponse (an entry of SubmitBatchResponse.results) as protobuf
 * binary: the job, whole or (`basic`, JOB_VIEW_BASIC) without payload,
 * result and last_error, then `deduplicated`. The same bytes as toBinary of
 * the SubmitResponse message that jobToWire builds; throws as encodeLease.
 */
export function encodeSubmitResponse(job: Job, deduplicated: boolean, basic: boolean): Uint8Array {
  const w = new ProtoWriter();
  const mark = w.beginMessage(1);
  writeJob(w, job, basic);
  w.endMessage(mark);
  if (deduplicated) {
    w.tag(2, WireType.Varint);
    w.varint(1);
  }
  return w.finish();
}

/**
 * A WatchEventsResponse carrying one event as protobuf binary: the same
 * bytes as toBinary of the message eventToWire builds, written straight
 * from the event, for the WatchEvents frames (watch-frames.ts).
 */
export function encodeEventResponse(e: JobEvent): Uint8Array {
  const w = new ProtoWriter();
  const event = w.beginMessage(1);
  if (e.sequence !== 0) {
    w.tag(1, WireType.Varint);
    w.varint(e.sequence);
  }
  w.stringField(2, e.jobId);
  w.stringField(3, e.queue);
  w.int32Field(4, KIND_TO_WIRE[e.kind]);
  if (e.fromState !== null) w.int32Field(5, STATE_TO_WIRE[e.fromState]);
  w.int32Field(6, STATE_TO_WIRE[e.toState]);
  w.timeField(7, e.eventTime);
  w.stringField(8, e.workerId ?? "");
  w.int32Field(9, e.attempt);
  w.stringField(10, e.message ?? "");
  w.stringField(11, e.groupKey);
  w.endMessage(event);
  return w.finish();
}

/** The fields of a Job; `basic` (JOB_VIEW_BASIC) leaves out payload, last_error and result. */
function writeJob(w: ProtoWriter, job: Job, basic = false): void {
  w.stringField(1, job.id);
  w.stringField(2, job.queue);
  w.stringField(3, job.task);
  if (!basic) writeJsonValue(w, 4, job.payloadJson, "payload");
  w.int32Field(5, job.priority);
  w.int32Field(6, STATE_TO_WIRE[job.state] ?? JobState.UNSPECIFIED);
  w.int32Field(7, job.attempts);
  w.int32Field(8, job.maxAttempts);
  w.timeField(9, job.retryBaseDelayMs);
  w.timeField(10, job.scheduleTime);
  w.timeField(11, job.createTime);
  w.timeField(12, job.updateTime);
  if (job.finishTime !== null) w.timeField(13, job.finishTime);
  w.stringField(14, job.workerId ?? "");
  if (job.leaseExpireTime !== null) w.timeField(15, job.leaseExpireTime);
  w.int32Field(16, job.deliveries);
  if (!basic) w.stringField(17, job.lastError ?? "");
  if (!basic && job.resultJson !== null) writeJsonValue(w, 18, job.resultJson, "result");
  if (job.progressJson !== null) writeJsonValue(w, 19, job.progressJson, "progress");
  w.stringField(20, job.groupKey);
  // map<string, string> trace_context: one entry message per key, in traceContextMap's order.
  if (job.traceContext !== null) {
    writeStringMapEntry(w, 21, "traceparent", job.traceContext.traceparent);
    if (job.traceContext.tracestate !== "") writeStringMapEntry(w, 21, "tracestate", job.traceContext.tracestate);
  }
  for (const id of job.dependsOn) w.stringField(22, id);
  const counts = job.dependencyCounts;
  if (counts !== null) {
    const mark = w.beginMessage(23);
    w.int32Field(1, counts.total);
    w.int32Field(2, counts.completed);
    w.int32Field(3, counts.failed);
    w.int32Field(4, counts.total - counts.completed - counts.failed);
    w.endMessage(mark);
  }
}

function writeStringMapEntry(w: ProtoWriter, fieldNo: number, key: string, value: string): void {
  const mark = w.beginMessage(fieldNo);
  w.stringField(1, key);
  w.stringField(2, value);
  w.endMessage(mark);
}

/** Stored JSON as Value field `fieldNo`: scanned from its text (json-text-value.ts), or parsed where the scanner is not sure. */
function writeJsonValue(w: ProtoWriter, fieldNo: number, json: string, field: JsonField): void {
  const mark = w.beginMessage(fieldNo);
  if (!writeJsonText(w, json, BOUNDS.jsonDepth, () => new NestingTooDeep(field))) {
    writeValueBody(w, JSON.parse(json), 0, field);
  }
  w.endMessage(mark);
}

/**
 * The fields of a google.protobuf.Value for a parsed JSON value, `depth`
 * being its nesting level (`1` is level 0, `[1]` level 1). A oneof member is
 * written even at its zero value, as protobuf-es does.
 */
function writeValueBody(w: ProtoWriter, value: unknown, depth: number, field: JsonField): void {
  if (value === null) {
    w.tag(1, WireType.Varint);
    w.varint(0);
  } else if (typeof value === "number") {
    w.tag(2, WireType.Bit64);
    w.double(value);
  } else if (typeof value === "string") {
    w.tag(3, WireType.LengthDelimited);
    w.string(value);
  } else if (typeof value === "boolean") {
    w.tag(4, WireType.Varint);
    w.varint(value ? 1 : 0);
  } else if (Array.isArray(value)) {
    if (depth + 1 > BOUNDS.jsonDepth) throw new NestingTooDeep(field);
    const list = w.beginMessage(6);
    for (const item of value) {
      const entry = w.beginMessage(1);
      writeValueBody(w, item, depth + 1, field);
      w.endMessage(entry);
    }
    w.endMessage(list);
  } else {
    if (depth + 1 > BOUNDS.jsonDepth) throw new NestingTooDeep(field);
    const struct = w.beginMessage(5);
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      const entry = w.beginMessage(1);
      w.tag(1, WireType.LengthDelimited);
      w.string(key);
      const v = w.beginMessage(2);
      writeValueBody(w, item, depth + 1, field);
      w.endMessage(v);
      w.endMessage(entry);
    }
    w.endMessage(struct);
  }
}
