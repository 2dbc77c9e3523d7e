/**
 * The pieces the server's hand decoders (submit-decoding.ts,
 * ack-decoding.ts) read protobuf binary with, on protobuf-es's own
 * BinaryReader. Each reads only what it is sure of and throws DOUBT for
 * anything else (a wire type other than the field's, bytes cut short, a
 * value validation would refuse), so that the caller hands the request to
 * protobuf-es and every unusual request is answered as protobuf-es and
 * validation answer it.
 */
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { BOUNDS } from "../../domain/request-bounds.js";

export { BinaryReader, WireType };

/** Thrown for anything a hand decoder leaves to protobuf-es. */
export const DOUBT = new Error("left to protobuf-es");

/** The end of the length-delimited field at the reader, within `end`. */
export function nested(r: BinaryReader, end: number): number {
  const length = r.uint32();
  const to = r.pos + length;
  if (to > end) throw DOUBT;
  return to;
}

/** Throws unless the reader stopped exactly at `end`. */
export function done(r: BinaryReader, end: number): void {
  if (r.pos !== end) throw DOUBT;
}

/** A proto3 string within `end` (invalid UTF-8 throws, as protobuf-es refuses it). */
export function readString(r: BinaryReader, end: number): string {
  const text = r.string(true);
  if (r.pos > end) throw DOUBT;
  return text;
}

/** A Duration or Timestamp: int64 seconds (1), int32 nanos (2). */
export function readSecondsNanos(r: BinaryReader, end: number, typeName: string): { $typeName: string; seconds: bigint; nanos: number } {
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
export function readStringMapEntry(r: BinaryReader, end: number, into: Record<string, string>): void {
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
 * The length-delimited google.protobuf.Value at the reader (within `end`)
 * as compact JSON text, as validation writes a Value (toJson, then
 * JSON.stringify): no tree of Value, Struct and ListValue messages.
 */
export function readValueJson(r: BinaryReader, end: number): string {
  return JSON.stringify(readValue(r, nested(r, end), 0));
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
