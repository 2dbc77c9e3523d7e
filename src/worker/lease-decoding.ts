/**
 * leasequeue.v1.Lease read by hand from its protobuf bytes, for the
 * worker's Work stream: the same message objects protobuf-es's fromBinary
 * makes, read with its BinaryReader but without its reflection (the
 * largest share of a worker's CPU per job: docs/performance.md "Worker
 * SDKs"). The worker's Work stream asks for its responses undecoded
 * (work-stream-transport.ts) and reads each lease here.
 */
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { EmptySchema, type Duration, type Empty, type ListValue, type Struct, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import {
  AcknowledgementResultSchema,
  WorkResponseSchema,
  type DependencyCounts,
  type DependencyResult,
  type Job,
  type Lease,
  type WorkResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

/** Deeper than the 32 JSON levels a server sends (docs/api.md "Bounds"), left to protobuf-es and its own limit. */
const MAX_VALUE_DEPTH = 40;

/** Thrown for anything the reader leaves to protobuf-es. */
const DOUBT = new Error("left to protobuf-es");

/** Job's fields by number, by how they are read. */
const JOB_STRINGS = new Map<number, "id" | "queue" | "task" | "workerId" | "lastError" | "groupKey">([
  [1, "id"],
  [2, "queue"],
  [3, "task"],
  [14, "workerId"],
  [17, "lastError"],
  [20, "groupKey"],
]);
const JOB_INT32S = new Map<number, "priority" | "state" | "attempts" | "maxAttempts" | "deliveries">([
  [5, "priority"],
  [6, "state"],
  [7, "attempts"],
  [8, "maxAttempts"],
  [16, "deliveries"],
]);
const JOB_VALUES = new Map<number, "payload" | "result" | "progress">([
  [4, "payload"],
  [18, "result"],
  [19, "progress"],
]);
const JOB_TIMESTAMPS = new Map<number, "scheduleTime" | "createTime" | "updateTime" | "finishTime" | "leaseExpireTime">([
  [10, "scheduleTime"],
  [11, "createTime"],
  [12, "updateTime"],
  [13, "finishTime"],
  [15, "leaseExpireTime"],
]);

/**
 * A WorkResponse from the response the Work call handed over undecoded (an
 * Empty whose fields all arrived as unknown fields): its leases read here,
 * its acknowledgement results by protobuf-es; the whole response by
 * protobuf-es when anything in it is left to protobuf-es.
 *
 * Whatever this reader is not sure of (a field it does not know, a field
 * or a value's kind sent twice, a wire type it does not expect,
 * bytes that do not parse, a Struct key of `__proto__`, a value nested
 * deeper than any server sends) makes it give up, and the response is
 * decoded by protobuf-es, so every lease reads as fromBinary reads it
 * (test/worker/lease-decoding.test.ts). The server's hand decoder of
 * SubmitRequest (src/server/fast-wire/submit-decoding.ts) reads the same way.
 */
export function readWorkResponse(raw: Empty): WorkResponse {
  const response = { $typeName: "leasequeue.v1.WorkResponse", leases: [], results: [], cancelledJobIds: [] } as unknown as WorkResponse;
  for (const field of raw.$unknown ?? []) {
    if (field.wireType !== WireType.LengthDelimited || field.no < 1 || field.no > 3) return decodedByProtobufEs(raw);
    // An unknown length-delimited field keeps its length prefix.
    if (field.no === 3) {
      const id = readCancelledJobId(field.data);
      if (id === undefined) return decodedByProtobufEs(raw);
      response.cancelledJobIds.push(id);
      continue;
    }
    const body = new BinaryReader(field.data).bytes();
    if (field.no === 2) {
      response.results.push(fromBinary(AcknowledgementResultSchema, body));
      continue;
    }
    const lease = readLease(body);
    if (lease === undefined) return decodedByProtobufEs(raw);
    response.leases.push(lease);
  }
  return response;
}

/** A cancelled job's id (a string field with its length prefix), or undefined: let protobuf-es read it. */
function readCancelledJobId(data: Uint8Array): string | undefined {
  try {
    const r = new BinaryReader(data);
    const id = readString(r, r.len);
    return r.pos === r.len ? id : undefined;
  } catch {
    return undefined;
  }
}

function decodedByProtobufEs(raw: Empty): WorkResponse {
  return fromBinary(WorkResponseSchema, toBinary(EmptySchema, raw));
}

/** The Lease in `bytes`, or undefined: let protobuf-es read it. */
export function readLease(bytes: Uint8Array): Lease | undefined {
  try {
    const r = new BinaryReader(bytes);
    const lease = { $typeName: "leasequeue.v1.Lease", leaseToken: "", dependencies: [], dependenciesTruncated: false } as unknown as Lease;
    let seen = 0;
    while (r.pos < r.len) {
      const [no, type] = r.tag();
      if (no !== 3) seen = firstTime(seen, no);
      if (no === 4) {
        if (type !== WireType.Varint) throw DOUBT;
        lease.dependenciesTruncated = r.bool();
        continue;
      }
      if (type !== WireType.LengthDelimited) throw DOUBT;
      if (no === 2) lease.leaseToken = readString(r, r.len);
      else if (no === 1) lease.job = readJob(r, nested(r, r.len));
      else if (no === 3) lease.dependencies.push(readDependency(r, nested(r, r.len)));
      else throw DOUBT;
    }
    return lease;
  } catch {
    return undefined;
  }
}

function readJob(r: BinaryReader, end: number): Job {
  const job = {
    $typeName: "leasequeue.v1.Job",
    id: "",
    queue: "",
    task: "",
    priority: 0,
    state: 0,
    attempts: 0,
    maxAttempts: 0,
    workerId: "",
    deliveries: 0,
    lastError: "",
    groupKey: "",
    traceContext: {},
    dependsOn: [],
  } as unknown as Job;
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 21 && no !== 22) seen = firstTime(seen, no);
    const int32 = JOB_INT32S.get(no);
    if (int32 !== undefined) {
      if (type !== WireType.Varint) throw DOUBT;
      job[int32] = r.int32();
      continue;
    }
    if (type !== WireType.LengthDelimited) throw DOUBT;
    const string = JOB_STRINGS.get(no);
    const value = JOB_VALUES.get(no);
    const timestamp = JOB_TIMESTAMPS.get(no);
    if (string !== undefined) job[string] = readString(r, end);
    else if (value !== undefined) job[value] = readValue(r, nested(r, end), 0);
    else if (timestamp !== undefined) {
      job[timestamp] = readSecondsNanos(r, end, "google.protobuf.Timestamp") as Timestamp;
    } else if (no === 9) {
      job.retryBaseDelay = readSecondsNanos(r, end, "google.protobuf.Duration") as Duration;
    } else if (no === 21) readStringMapEntry(r, nested(r, end), job.traceContext);
    else if (no === 22) job.dependsOn.push(readString(r, end));
    else if (no === 23) job.dependencyCounts = readDependencyCounts(r, nested(r, end));
    else throw DOUBT;
  }
  done(r, end);
  return job;
}

/** A DependencyResult: job_id (1), state (2), result (3), last_error (4). */
function readDependency(r: BinaryReader, end: number): DependencyResult {
  const dependency = { $typeName: "leasequeue.v1.DependencyResult", jobId: "", state: 0, lastError: "" } as unknown as DependencyResult;
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
    if (no === 2) {
      if (type !== WireType.Varint) throw DOUBT;
      dependency.state = r.int32();
      continue;
    }
    if (type !== WireType.LengthDelimited) throw DOUBT;
    if (no === 1) dependency.jobId = readString(r, end);
    else if (no === 3) dependency.result = readValue(r, nested(r, end), 0);
    else if (no === 4) dependency.lastError = readString(r, end);
    else throw DOUBT;
  }
  done(r, end);
  return dependency;
}

const COUNTS = ["total", "completed", "failed", "pending"] as const;

/** A DependencyCounts: four int32s, total (1) to pending (4). */
function readDependencyCounts(r: BinaryReader, end: number): DependencyCounts {
  const counts = { $typeName: "leasequeue.v1.DependencyCounts", total: 0, completed: 0, failed: 0, pending: 0 } as DependencyCounts;
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
    const name = COUNTS[no - 1];
    if (name === undefined || type !== WireType.Varint) throw DOUBT;
    counts[name] = r.int32();
  }
  done(r, end);
  return counts;
}

/** `seen` (a bit per field number) with `no` added; a field sent twice is left to protobuf-es (it keeps the last, or merges a message). */
function firstTime(seen: number, no: number): number {
  const bit = 1 << no;
  if (no > 30 || (seen & bit) !== 0) throw DOUBT;
  return seen | bit;
}

/** The end of the length-delimited field at the reader, within `end`. */
function nested(r: BinaryReader, end: number): number {
  const to = r.uint32() + r.pos;
  if (to > end) throw DOUBT;
  return to;
}

function done(r: BinaryReader, end: number): void {
  if (r.pos !== end) throw DOUBT;
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
  let seen = 0;
  while (r.pos < to) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
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
  let seen = 0;
  while (r.pos < end) {
    const [no, type] = r.tag();
    seen = firstTime(seen, no);
    if (type !== WireType.LengthDelimited) throw DOUBT;
    if (no === 1) key = readString(r, end);
    else if (no === 2) value = readString(r, end);
    else throw DOUBT;
  }
  done(r, end);
  if (key === "__proto__") throw DOUBT;
  into[key] = value;
}

const emptyValue = (): Value => ({ $typeName: "google.protobuf.Value", kind: { case: undefined } });

/** A google.protobuf.Value at JSON nesting level `depth`; one kind at most. */
function readValue(r: BinaryReader, end: number, depth: number): Value {
  if (depth > MAX_VALUE_DEPTH) throw DOUBT;
  const value = emptyValue();
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (value.kind.case !== undefined) throw DOUBT;
    if (no === 1 && type === WireType.Varint) value.kind = { case: "nullValue", value: r.int32() };
    else if (no === 2 && type === WireType.Bit64) value.kind = { case: "numberValue", value: r.double() };
    else if (no === 3 && type === WireType.LengthDelimited) value.kind = { case: "stringValue", value: readString(r, end) };
    else if (no === 4 && type === WireType.Varint) value.kind = { case: "boolValue", value: r.bool() };
    else if (no === 5 && type === WireType.LengthDelimited)
      value.kind = { case: "structValue", value: readStruct(r, nested(r, end), depth + 1) };
    else if (no === 6 && type === WireType.LengthDelimited)
      value.kind = { case: "listValue", value: readList(r, nested(r, end), depth + 1) };
    else throw DOUBT;
  }
  done(r, end);
  return value;
}

/** A Struct: its entries (1), a later entry of a key replacing an earlier one, as in protobuf-es. */
function readStruct(r: BinaryReader, end: number, depth: number): Struct {
  const fields: Record<string, Value> = {};
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 1 || type !== WireType.LengthDelimited) throw DOUBT;
    const to = nested(r, end);
    let key = "";
    let value: Value | undefined;
    let seen = 0;
    while (r.pos < to) {
      const [entryNo, entryType] = r.tag();
      seen = firstTime(seen, entryNo);
      if (entryType !== WireType.LengthDelimited) throw DOUBT;
      if (entryNo === 1) key = readString(r, to);
      else if (entryNo === 2) value = readValue(r, nested(r, to), depth);
      else throw DOUBT;
    }
    done(r, to);
    if (key === "__proto__") throw DOUBT;
    fields[key] = value ?? emptyValue();
  }
  done(r, end);
  return { $typeName: "google.protobuf.Struct", fields };
}

/** A ListValue: its values (1). */
function readList(r: BinaryReader, end: number, depth: number): ListValue {
  const values: Value[] = [];
  while (r.pos < end) {
    const [no, type] = r.tag();
    if (no !== 1 || type !== WireType.LengthDelimited) throw DOUBT;
    values.push(readValue(r, nested(r, end), depth));
  }
  done(r, end);
  return { $typeName: "google.protobuf.ListValue", values };
}
