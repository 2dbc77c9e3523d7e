/**
 * The protobuf writer behind the hand encoders (lease-encoding.ts,
 * json-text-value.ts): fields written straight into one growing buffer, in
 * the order and form protobuf-es's toBinary writes them.
 */
import { WireType } from "@bufbuild/protobuf/wire";

export function varintSize(v: number): number {
  let n = 1;
  while (v > 0x7f) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

/**
 * A protobuf writer over one growing buffer. A nested message reserves one
 * byte for its length and moves its body when the length needs more.
 */
export class ProtoWriter {
  #buf = Buffer.allocUnsafe(512);
  #pos = 0;

  finish(): Uint8Array {
    return this.#buf.subarray(0, this.#pos);
  }

  tag(fieldNo: number, wireType: WireType): void {
    this.varint((fieldNo << 3) | wireType);
  }

  /** A non-negative integer below 2^53 as a varint. */
  varint(v: number): void {
    if (v < 0x80 && this.#pos < this.#buf.length) {
      this.#buf[this.#pos++] = v;
      return;
    }
    this.#ensure(10);
    const buf = this.#buf;
    let pos = this.#pos;
    while (v > 0x7f) {
      buf[pos++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[pos++] = v;
    this.#pos = pos;
  }

  /** int32 and enum: a negative value takes ten bytes (two's complement, sign-extended to 64 bits). */
  int32Field(fieldNo: number, v: number): void {
    if (v === 0) return;
    this.tag(fieldNo, WireType.Varint);
    if (v >= 0) {
      this.varint(v);
      return;
    }
    this.#ensure(10);
    let lo = v >>> 0;
    for (let i = 0; i < 4; i++) {
      this.#buf[this.#pos++] = (lo & 0x7f) | 0x80;
      lo >>>= 7;
    }
    // Bits 28..31 of the low word, then the high word of all ones.
    this.#buf[this.#pos++] = (lo & 0x0f) | 0x70 | 0x80;
    for (let i = 0; i < 4; i++) this.#buf[this.#pos++] = 0xff;
    this.#buf[this.#pos++] = 0x01;
  }

  double(v: number): void {
    this.#ensure(8);
    this.#buf.writeDoubleLE(v, this.#pos);
    this.#pos += 8;
  }

  string(s: string): void {
    const bytes = Buffer.byteLength(s, "utf8");
    this.varint(bytes);
    this.#ensure(bytes);
    this.#buf.write(s, this.#pos, bytes, "utf8");
    this.#pos += bytes;
  }

  /**
   * The characters `start` to `end` of `s`, all below U+0080, as a
   * length-delimited string: its UTF-8 is its characters, so no substring
   * and no encoder are needed.
   */
  asciiString(s: string, start: number, end: number): void {
    const n = end - start;
    this.varint(n);
    this.#ensure(n);
    const buf = this.#buf;
    let pos = this.#pos;
    for (let i = start; i < end; i++) buf[pos++] = s.charCodeAt(i);
    this.#pos = pos;
  }

  /** Where the next byte goes; rewind(position) drops what was written since. */
  get position(): number {
    return this.#pos;
  }

  rewind(position: number): void {
    this.#pos = position;
  }

  /** A proto3 string field: left out when empty. */
  stringField(fieldNo: number, s: string): void {
    if (s === "") return;
    this.tag(fieldNo, WireType.LengthDelimited);
    this.string(s);
  }

  /**
   * A google.protobuf.Timestamp (epoch ms) or Duration (ms) field: both are
   * `int64 seconds = 1; int32 nanos = 2;`, each left out at zero; the message
   * itself is always written.
   */
  timeField(fieldNo: number, ms: number): void {
    const seconds = Math.floor(ms / 1000);
    const nanos = (ms - seconds * 1000) * 1_000_000;
    const mark = this.beginMessage(fieldNo);
    if (seconds !== 0) {
      this.tag(1, WireType.Varint);
      if (seconds > 0) this.varint(seconds);
      else throw new RangeError("negative times are not written by this encoder");
    }
    if (nanos !== 0) {
      this.tag(2, WireType.Varint);
      this.varint(nanos);
    }
    this.endMessage(mark);
  }

  /** Starts message field `fieldNo`; returns the mark to pass to endMessage. */
  beginMessage(fieldNo: number): number {
    this.tag(fieldNo, WireType.LengthDelimited);
    this.#ensure(1);
    const mark = this.#pos;
    this.#pos += 1;
    return mark;
  }

  endMessage(mark: number): void {
    const len = this.#pos - mark - 1;
    if (len < 0x80) {
      this.#buf[mark] = len;
      return;
    }
    const size = varintSize(len);
    this.#ensure(size - 1);
    this.#buf.copyWithin(mark + size, mark + 1, this.#pos);
    this.#pos += size - 1;
    let v = len;
    let at = mark;
    while (v > 0x7f) {
      this.#buf[at++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    this.#buf[at] = v;
  }

  #ensure(n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#pos + n) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.#buf.copy(grown, 0, 0, this.#pos);
    this.#buf = grown;
  }
}
