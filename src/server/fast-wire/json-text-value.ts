/**
 * Stored JSON text written as a google.protobuf.Value, in one pass over the
 * text: no JSON.parse, no tree of objects, no second walk. This is the
 * lease path's payload passthrough (docs/performance.md "Where the CPU
 * goes"): a payload is stored as the JSON text JSON clients read, and a
 * binary client's lease carries it as a Value written from that text.
 */
import { WireType } from "@bufbuild/protobuf/wire";
import type { ProtoWriter } from "./proto-writer.js";

/** Thrown inside the scanner for text it leaves to JSON.parse; never escapes writeJsonText. */
const NOT_SURE = new Error("left to JSON.parse");

/**
 * Writes the fields of a Value for `json`; false, with nothing written, for
 * text the scanner leaves to JSON.parse. `tooDeep` is thrown for a value
 * nested more than `maxDepth` levels (`1` is level 0, `[1]` level 1).
 *
 * Object members are written in the text's order. The server stores JSON
 * as JSON.stringify writes it (array-index keys first, no key twice), so
 * its bytes are the ones protobuf-es writes for the parsed value; text
 * in another order (PostgreSQL's jsonb) gives the same map in another
 * order. Anything this scanner does not expect (invalid JSON, a number
 * JSON does not allow) is handed back to the caller, which takes the
 * JSON.parse path and its SyntaxError.
 */
export function writeJsonText(w: ProtoWriter, json: string, maxDepth: number, tooDeep: () => Error): boolean {
  const start = w.position;
  const scanner = new Scanner(w, json, maxDepth, tooDeep);
  try {
    scanner.value(0);
    if (scanner.skipSpace() !== json.length) throw NOT_SURE;
    return true;
  } catch (err) {
    if (err !== NOT_SURE) throw err;
    w.rewind(start);
    return false;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const ZERO = 0x30;
const NINE = 0x39;

class Scanner {
  #i = 0;

  constructor(
    private readonly w: ProtoWriter,
    private readonly s: string,
    private readonly maxDepth: number,
    private readonly tooDeep: () => Error,
  ) {}

  /** Skips JSON whitespace; returns the index of the next character. */
  skipSpace(): number {
    const s = this.s;
    let i = this.#i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    this.#i = i;
    return i;
  }

  /** The fields of one Value at nesting level `depth`; a oneof member is written even at its zero value, as protobuf-es does. */
  value(depth: number): void {
    const w = this.w;
    const c = this.s.charCodeAt(this.skipSpace());
    if (c === QUOTE) {
      w.tag(3, WireType.LengthDelimited);
      this.#string();
    } else if (c === 0x7b) {
      this.#struct(depth);
    } else if (c === 0x5b) {
      this.#list(depth);
    } else if (c === 0x6e) {
      this.#word("null");
      w.tag(1, WireType.Varint);
      w.varint(0);
    } else if (c === 0x74) {
      this.#word("true");
      w.tag(4, WireType.Varint);
      w.varint(1);
    } else if (c === 0x66) {
      this.#word("false");
      w.tag(4, WireType.Varint);
      w.varint(0);
    } else {
      w.tag(2, WireType.Bit64);
      w.double(this.#number());
    }
  }

  #struct(depth: number): void {
    if (depth + 1 > this.maxDepth) throw this.tooDeep();
    const w = this.w;
    const s = this.s;
    const struct = w.beginMessage(5);
    this.#i++;
    if (s.charCodeAt(this.skipSpace()) === 0x7d) {
      this.#i++;
    } else {
      for (;;) {
        if (s.charCodeAt(this.skipSpace()) !== QUOTE) throw NOT_SURE;
        const entry = w.beginMessage(1);
        w.tag(1, WireType.LengthDelimited);
        this.#string();
        if (s.charCodeAt(this.skipSpace()) !== COLON) throw NOT_SURE;
        this.#i++;
        const v = w.beginMessage(2);
        this.value(depth + 1);
        w.endMessage(v);
        w.endMessage(entry);
        if (this.#endOfMembers(0x7d)) break;
      }
    }
    w.endMessage(struct);
  }

  #list(depth: number): void {
    if (depth + 1 > this.maxDepth) throw this.tooDeep();
    const w = this.w;
    const list = w.beginMessage(6);
    this.#i++;
    if (this.s.charCodeAt(this.skipSpace()) === 0x5d) {
      this.#i++;
    } else {
      for (;;) {
        const entry = w.beginMessage(1);
        this.value(depth + 1);
        w.endMessage(entry);
        if (this.#endOfMembers(0x5d)) break;
      }
    }
    w.endMessage(list);
  }

  /** After a member: true at the closing bracket `close`, false at a comma; both consumed. */
  #endOfMembers(close: number): boolean {
    const c = this.s.charCodeAt(this.skipSpace());
    this.#i++;
    if (c === close) return true;
    if (c === COMMA) return false;
    throw NOT_SURE;
  }

  /** A JSON string as a length-delimited string; the tag is the caller's. */
  #string(): void {
    const s = this.s;
    const start = this.#i + 1;
    let i = start;
    let ascii = true;
    let escaped = false;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        escaped = true;
        i += 2;
        continue;
      }
      if (c < 0x20 || Number.isNaN(c)) throw NOT_SURE; // a control character, or the text ended
      if (c >= 0x80) ascii = false;
      i++;
    }
    this.#i = i + 1;
    if (escaped) this.w.string(JSON.parse(s.slice(start - 1, i + 1)) as string);
    else if (ascii) this.w.asciiString(s, start, i);
    else this.w.string(s.slice(start, i));
  }

  #word(word: string): void {
    if (!this.s.startsWith(word, this.#i)) throw NOT_SURE;
    this.#i += word.length;
  }

  /** A number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, read as JSON.parse reads it. */
  #number(): number {
    const s = this.s;
    const start = this.#i;
    let i = start;
    let c = s.charCodeAt(i);
    if (c === 0x2d) c = s.charCodeAt(++i);
    if (c === ZERO) {
      c = s.charCodeAt(++i);
    } else if (c > ZERO && c <= NINE) {
      do c = s.charCodeAt(++i);
      while (c >= ZERO && c <= NINE);
    } else {
      throw NOT_SURE;
    }
    let integer = true;
    if (c === 0x2e) {
      integer = false;
      i = this.#digits(i + 1);
      c = s.charCodeAt(i);
    }
    if (c === 0x65 || c === 0x45) {
      integer = false;
      c = s.charCodeAt(++i);
      if (c === 0x2b || c === 0x2d) i++;
      i = this.#digits(i);
    }
    this.#i = i;
    // Up to 15 digits an integer is exact in a double; sums of digits are cheaper than a substring and its parse.
    if (integer && i - start <= 15) {
      let n = 0;
      for (let k = s.charCodeAt(start) === 0x2d ? start + 1 : start; k < i; k++) n = n * 10 + (s.charCodeAt(k) - ZERO);
      return s.charCodeAt(start) === 0x2d ? -n : n;
    }
    return Number(s.slice(start, i));
  }

  /** One or more digits from `i`; the index after them. */
  #digits(i: number): number {
    const s = this.s;
    let c = s.charCodeAt(i);
    if (!(c >= ZERO && c <= NINE)) throw NOT_SURE;
    do c = s.charCodeAt(++i);
    while (c >= ZERO && c <= NINE);
    return i;
  }
}
