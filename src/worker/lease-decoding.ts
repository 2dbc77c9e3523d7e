/**
 * leasequeue.v1.Lease read by hand from its protobuf bytes, for the
 * worker's Work stream: the same message objects protobuf-es's fromBinary
 * makes, without its reflection (the largest share of a worker's CPU per
 * job: docs/performance.md "Worker SDKs"). The worker's Work stream asks
 * for its responses undecoded (work-stream-transport.ts) and reads each
 * lease here.
 *
 * Whatever this reader is not sure of (a field it does not know, a field
 * sent twice, a wire type it does not expect, bytes that end early, a map
 * key of `__proto__`, a value nested deeper than any server sends) makes
 * it give up, and the caller decodes the bytes with protobuf-es, so every
 * lease reads as fromBinary reads it (test/worker/lease-decoding.test.ts).
 */
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { EmptySchema, type Duration, type Empty, type ListValue, type Struct, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { WireType } from "@bufbuild/protobuf/wire";
import {
  AcknowledgementResultSchema,
  WorkResponseSchema,
  type Job,
  type Lease,
  type WorkResponse,
} from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";

/** Deeper than the 32 JSON levels a server sends (docs/api.md "Bounds"), left to protobuf-es and its own limit. */
const MAX_VALUE_DEPTH = 40;

/** Fatal, as protobuf-es reads strings: bytes that are not UTF-8 are left to it and its error. */
const utf8 = new TextDecoder("utf-8", { fatal: true });

class NotSure extends Error {}
const NOT_SURE = new NotSure("left to protobuf-es");

/**
 * A WorkResponse from the response the Work call handed over undecoded (an
 * Empty whose fields all arrived as unknown fields): its leases read here,
 * its acknowledgement results by protobuf-es; the whole response by
 * protobuf-es when anything in it is left to protobuf-es.
 */
export function readWorkResponse(raw: Empty): WorkResponse {
  const response = { $typeName: "leasequeue.v1.WorkResponse", leases: [], results: [] } as unknown as WorkResponse;
  for (const field of raw.$unknown ?? []) {
    if (field.wireType !== WireType.LengthDelimited) return fromBinary(WorkResponseSchema, toBinary(EmptySchema, raw));
    const start = bodyStart(field.data);
    if (field.no === 1) {
      const lease = readLease(field.data, start);
      if (lease === undefined) return fromBinary(WorkResponseSchema, toBinary(EmptySchema, raw));
      response.leases.push(lease);
    } else if (field.no === 2) {
      response.results.push(fromBinary(AcknowledgementResultSchema, field.data.subarray(start)));
    } else {
      return fromBinary(WorkResponseSchema, toBinary(EmptySchema, raw));
    }
  }
  return response;
}

/** Where the body of a length-delimited unknown field starts (after its length prefix, which protobuf-es keeps). */
function bodyStart(data: Uint8Array): number {
  let i = 0;
  while (i < data.length && data[i] >= 0x80) i++;
  return i + 1;
}

/** The Lease in `bytes[start, end)`, or undefined when the reader leaves it to protobuf-es. */
export function readLease(bytes: Uint8Array, start = 0, end = bytes.length): Lease | undefined {
  try {
    return new Reader(bytes, start, end).lease();
  } catch (err) {
    if (err instanceof NotSure) return undefined;
    throw err;
  }
}

class Reader {
  #pos: number;

  constructor(
    private readonly buf: Uint8Array,
    start: number,
    private end: number,
  ) {
    this.#pos = start;
  }

  lease(): Lease {
    const lease = { $typeName: "leasequeue.v1.Lease", leaseToken: "" } as Lease;
    let seen = 0;
    while (this.#pos < this.end) {
      const [no, wireType] = this.#tag();
      if (wireType !== 2 || (seen & (1 << no)) !== 0) throw NOT_SURE;
      seen |= 1 << no;
      if (no === 1) lease.job = this.#nested(() => this.#job());
      else if (no === 2) lease.leaseToken = this.#string();
      else throw NOT_SURE;
    }
    return lease;
  }

  #job(): Job {
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
    } as unknown as Job;
    let seen = 0;
    while (this.#pos < this.end) {
      const [no, wireType] = this.#tag();
      if (no === 21) {
        if (wireType !== 2) throw NOT_SURE;
        this.#nested(() => this.#mapEntry(job.traceContext));
        continue;
      }
      if (no < 1 || no > 20 || (seen & (1 << no)) !== 0) throw NOT_SURE;
      seen |= 1 << no;
      switch (no) {
        case 5:
        case 6:
        case 7:
        case 8:
        case 16: {
          if (wireType !== 0) throw NOT_SURE;
          const v = this.#int32();
          if (no === 5) job.priority = v;
          else if (no === 6) job.state = v;
          else if (no === 7) job.attempts = v;
          else if (no === 8) job.maxAttempts = v;
          else job.deliveries = v;
          break;
        }
        default:
          if (wireType !== 2) throw NOT_SURE;
          this.#jobField(job, no);
      }
    }
    return job;
  }

  /** A length-delimited field of Job. */
  #jobField(job: Job, no: number): void {
    switch (no) {
      case 1:
        job.id = this.#string();
        return;
      case 2:
        job.queue = this.#string();
        return;
      case 3:
        job.task = this.#string();
        return;
      case 14:
        job.workerId = this.#string();
        return;
      case 17:
        job.lastError = this.#string();
        return;
      case 20:
        job.groupKey = this.#string();
        return;
      case 4:
        job.payload = this.#nested(() => this.#value(0));
        return;
      case 18:
        job.result = this.#nested(() => this.#value(0));
        return;
      case 19:
        job.progress = this.#nested(() => this.#value(0));
        return;
      case 9:
        job.retryBaseDelay = this.#nested(() => this.#time("google.protobuf.Duration")) as unknown as Duration;
        return;
      case 10:
        job.scheduleTime = this.#nested(() => this.#time("google.protobuf.Timestamp"));
        return;
      case 11:
        job.createTime = this.#nested(() => this.#time("google.protobuf.Timestamp"));
        return;
      case 12:
        job.updateTime = this.#nested(() => this.#time("google.protobuf.Timestamp"));
        return;
      case 13:
        job.finishTime = this.#nested(() => this.#time("google.protobuf.Timestamp"));
        return;
      case 15:
        job.leaseExpireTime = this.#nested(() => this.#time("google.protobuf.Timestamp"));
        return;
      default:
        throw NOT_SURE;
    }
  }

  /** A map<string, string> entry into `map`; a later entry of a key replaces an earlier one, as in protobuf-es. */
  #mapEntry(map: Record<string, string>): void {
    let key = "";
    let value = "";
    let seen = 0;
    while (this.#pos < this.end) {
      const [no, wireType] = this.#tag();
      if (wireType !== 2 || (no !== 1 && no !== 2) || (seen & (1 << no)) !== 0) throw NOT_SURE;
      seen |= 1 << no;
      if (no === 1) key = this.#string();
      else value = this.#string();
    }
    if (key === "__proto__") throw NOT_SURE;
    map[key] = value;
  }

  /** A google.protobuf.Timestamp or Duration: `int64 seconds = 1; int32 nanos = 2;`. */
  #time(typeName: "google.protobuf.Timestamp" | "google.protobuf.Duration"): Timestamp {
    const time = { $typeName: typeName, seconds: 0n, nanos: 0 } as Timestamp;
    let seen = 0;
    while (this.#pos < this.end) {
      const [no, wireType] = this.#tag();
      if (wireType !== 0 || (no !== 1 && no !== 2) || (seen & (1 << no)) !== 0) throw NOT_SURE;
      seen |= 1 << no;
      if (no === 1) time.seconds = this.#int64();
      else time.nanos = this.#int32();
    }
    return time;
  }

  /** A google.protobuf.Value at JSON nesting level `depth`; one kind at most. */
  #value(depth: number): Value {
    if (depth > MAX_VALUE_DEPTH) throw NOT_SURE;
    const value = { $typeName: "google.protobuf.Value", kind: { case: undefined } } as Value;
    if (this.#pos === this.end) return value;
    const [no, wireType] = this.#tag();
    switch (no) {
      case 1:
        if (wireType !== 0) throw NOT_SURE;
        value.kind = { case: "nullValue", value: this.#int32() };
        break;
      case 2:
        if (wireType !== 1) throw NOT_SURE;
        value.kind = { case: "numberValue", value: this.#double() };
        break;
      case 3:
        if (wireType !== 2) throw NOT_SURE;
        value.kind = { case: "stringValue", value: this.#string() };
        break;
      case 4:
        if (wireType !== 0) throw NOT_SURE;
        value.kind = { case: "boolValue", value: this.#varint() !== 0 };
        break;
      case 5:
        if (wireType !== 2) throw NOT_SURE;
        value.kind = { case: "structValue", value: this.#nested(() => this.#struct(depth + 1)) };
        break;
      case 6:
        if (wireType !== 2) throw NOT_SURE;
        value.kind = { case: "listValue", value: this.#nested(() => this.#list(depth + 1)) };
        break;
      default:
        throw NOT_SURE;
    }
    if (this.#pos !== this.end) throw NOT_SURE; // a second kind, or another field
    return value;
  }

  #struct(depth: number): Struct {
    const fields: Record<string, Value> = {};
    while (this.#pos < this.end) {
      const [no, wireType] = this.#tag();
      if (no !== 1 || wireType !== 2) throw NOT_SURE;
      this.#nested(() => {
        let key = "";
        let value: Value | undefined;
        let seen = 0;
        while (this.#pos < this.end) {
          const [n, w] = this.#tag();
          if (w !== 2 || (n !== 1 && n !== 2) || (seen & (1 << n)) !== 0) throw NOT_SURE;
          seen |= 1 << n;
          if (n === 1) key = this.#string();
          else value = this.#nested(() => this.#value(depth));
        }
        if (key === "__proto__") throw NOT_SURE;
        fields[key] = value ?? { $typeName: "google.protobuf.Value", kind: { case: undefined } };
      });
    }
    return { $typeName: "google.protobuf.Struct", fields };
  }

  #list(depth: number): ListValue {
    const values: Value[] = [];
    while (this.#pos < this.end) {
      const [no, wireType] = this.#tag();
      if (no !== 1 || wireType !== 2) throw NOT_SURE;
      values.push(this.#nested(() => this.#value(depth)));
    }
    return { $typeName: "google.protobuf.ListValue", values };
  }

  /** Reads a length prefix, then `read` within that many bytes, which it must read exactly. */
  #nested<T>(read: () => T): T {
    const len = this.#varint();
    const end = this.#pos + len;
    if (end > this.end) throw NOT_SURE;
    const outer = this.end;
    this.end = end;
    const result = read();
    if (this.#pos !== end) throw NOT_SURE;
    this.end = outer;
    return result;
  }

  #tag(): [number, number] {
    const tag = this.#varint();
    return [tag >>> 3, tag & 7];
  }

  /** A varint below 2^32 (tags, lengths, booleans); anything longer is left to protobuf-es. */
  #varint(): number {
    const buf = this.buf;
    let result = 0;
    for (let shift = 0; shift < 32; shift += 7) {
      if (this.#pos >= this.end) throw NOT_SURE;
      const b = buf[this.#pos++];
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result;
    }
    throw NOT_SURE;
  }

  /** int32 and enum: the low 32 bits of a varint of up to 10 bytes, signed. */
  #int32(): number {
    const [lo] = this.#varint64();
    return lo | 0;
  }

  #int64(): bigint {
    const [lo, hi] = this.#varint64();
    return hi === 0 ? BigInt(lo) : BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo));
  }

  /** A varint of up to 10 bytes as its low and high 32 bits, unsigned. */
  #varint64(): [number, number] {
    const buf = this.buf;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.#pos >= this.end) throw NOT_SURE;
      const b = buf[this.#pos++];
      const bits = b & 0x7f;
      const shift = i * 7;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= (bits & 0x0f) << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32);
      if (b < 0x80) return [lo >>> 0, hi >>> 0];
    }
    throw NOT_SURE;
  }

  #double(): number {
    if (this.#pos + 8 > this.end) throw NOT_SURE;
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.#pos, 8);
    this.#pos += 8;
    return view.getFloat64(0, true);
  }

  #string(): string {
    const len = this.#varint();
    const start = this.#pos;
    const end = start + len;
    if (end > this.end) throw NOT_SURE;
    this.#pos = end;
    const buf = this.buf;
    if (len <= 32) {
      let ascii = true;
      for (let i = start; i < end; i++) if (buf[i] >= 0x80) ascii = false;
      if (ascii) return String.fromCharCode.apply(null, buf.subarray(start, end) as unknown as number[]);
    }
    try {
      return utf8.decode(buf.subarray(start, end));
    } catch {
      throw NOT_SURE;
    }
  }
}
