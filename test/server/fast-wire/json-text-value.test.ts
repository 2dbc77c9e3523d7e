/**
 * The lease path's JSON text scanner against JSON.parse and protobuf-es: any
 * JSON text, in any spacing and key order, writes the Value that
 * JSON.parse's result is (the same bytes for text as JSON.stringify writes
 * it); text JSON does not allow is left to JSON.parse; the nesting bound
 * holds.
 */
import { create, fromBinary, fromJson, toBinary, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { writeJsonText } from "../../../src/server/fast-wire/json-text-value.js";
import { ProtoWriter } from "../../../src/server/fast-wire/proto-writer.js";

class TooDeep extends Error {}

/** The bytes of a Value message for `json`, written by the scanner; null when it leaves the text to JSON.parse. */
function scanned(json: string, maxDepth = 32): Uint8Array | null {
  const w = new ProtoWriter();
  w.stringField(9, "before"); // the scanner must leave what precedes it alone, also when it gives up
  const after = w.position;
  const ok = writeJsonText(w, json, maxDepth, () => new TooDeep());
  const bytes = w.finish();
  expect(Buffer.from(bytes.subarray(0, after)).toString()).toContain("before");
  if (!ok) {
    expect(bytes.length).toBe(after);
    return null;
  }
  return bytes.subarray(after);
}

const parsedBytes = (json: string) => toBinary(ValueSchema, fromJson(ValueSchema, JSON.parse(json) as JsonValue));

function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

const STRINGS = ["", "x", "é✓🙂", "a\u0000b", 'q"uote', "back\\slash", "tab\tnew\nline", "\u2028\u2029", "/", "\ud800", "long ".repeat(40)];
const NUMBERS = [0, -0, 1, -1, 0.5, 1e300, -(2 ** 60), 2 ** 53 + 2, 123456789012345, 1234567890123456, 5e-324, 0.1 + 0.2];

function randomValue(rand: () => number, depth: number): unknown {
  const r = rand();
  if (depth === 0 || r < 0.4) {
    const scalars = [null, true, false, ...NUMBERS, ...STRINGS];
    return scalars[Math.floor(rand() * scalars.length)];
  }
  const n = Math.floor(rand() * 5);
  if (r < 0.7) return Array.from({ length: n }, () => randomValue(rand, depth - 1));
  const keys = ["a", "b", "2", "10", "é", "", "key with space", 'k"q', "z"];
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++)
    Object.defineProperty(o, keys[Math.floor(rand() * keys.length)], {
      value: randomValue(rand, depth - 1),
      enumerable: true,
      configurable: true,
      writable: true,
    });
  return o;
}

/** JSON text of `value` with random whitespace between tokens (JSON.stringify's tokens, spaced by its indent and more). */
function spaced(rand: () => number, value: unknown): string {
  const text = JSON.stringify(value, null, rand() < 0.5 ? 2 : "\t");
  return rand() < 0.5 ? ` \r\n${text}\n ` : text;
}

/** The same value as text with every object's keys in reverse order (as a store that reorders keys might return it). */
function reordered(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reordered).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .reverse()
      .map(([k, v]) => `${JSON.stringify(k)}:${reordered(v)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

describe("writeJsonText", () => {
  it("writes the bytes protobuf-es writes for 3,000 random values as JSON.stringify writes them", () => {
    const rand = seeded(11);
    for (let i = 0; i < 3000; i++) {
      const json = JSON.stringify(randomValue(rand, 6));
      const mine = scanned(json);
      expect(mine, json).not.toBeNull();
      expect(Buffer.from(mine!).toString("hex"), json).toBe(Buffer.from(parsedBytes(json)).toString("hex"));
    }
  });

  it("writes the value JSON.parse reads for spaced and reordered text", () => {
    const rand = seeded(12);
    for (let i = 0; i < 1500; i++) {
      const value = randomValue(rand, 5);
      for (const json of [spaced(rand, value), reordered(value)]) {
        const mine = scanned(json);
        expect(mine, json).not.toBeNull();
        expect(fromBinary(ValueSchema, mine!), json).toEqual(fromBinary(ValueSchema, parsedBytes(json)));
      }
    }
  });

  it.each([
    ["escapes", '"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude42"'],
    ["a lone surrogate escaped", '"a\\ud800b"'],
    [
      "numbers in every form JSON has",
      "[0,-0,0.5,-0.5,1e5,1E5,1e+5,1e-5,-1.25E-3,123456789012345,1234567890123456,12345678901234567890,1e400,-1e400]",
    ],
    ["a key twice (the last wins, as in JSON.parse and a protobuf map)", '{"a":1,"a":2}'],
    ["an empty object and an empty array, spaced", "{ \n}"],
  ])("reads %s as JSON.parse does", (_, json) => {
    const mine = scanned(json);
    expect(mine).not.toBeNull();
    expect(fromBinary(ValueSchema, mine!)).toEqual(fromBinary(ValueSchema, parsedBytes(json)));
  });

  it.each([
    "",
    " ",
    "{not json",
    "01",
    "-",
    "1.",
    ".5",
    "+1",
    "1e",
    "1e+",
    "NaN",
    "Infinity",
    "-Infinity",
    "tru",
    "nul",
    "[1,]",
    "[,1]",
    '{"a" 1}',
    '{"a":1,}',
    "{a:1}",
    '"abc',
    '"a\tb"',
    '"a\\',
    "[1] x",
    "[1",
    "{",
    "'a'",
  ])("leaves %j to JSON.parse, writing nothing", (json) => {
    expect(scanned(json)).toBeNull();
    expect(() => JSON.parse(json)).toThrow(SyntaxError);
  });

  it("keeps a key named __proto__ as a member, as the lease encoder always has", () => {
    const mine = scanned('{"__proto__":{"x":1},"a":2}');
    expect(Buffer.from(mine!).includes(Buffer.from("__proto__"))).toBe(true);
    expect(Buffer.from(mine!).equals(Buffer.from(scanned('{"a":2}')!))).toBe(false);
  });

  it("refuses more than maxDepth levels, and counts levels as the bound does", () => {
    const nested = (levels: number, open: string, close: string) => open.repeat(levels) + "1" + close.repeat(levels);
    expect(scanned(nested(32, "[", "]"))).not.toBeNull();
    expect(() => scanned(nested(33, "[", "]"))).toThrow(TooDeep);
    expect(scanned(nested(3, '{"k":', "}"), 3)).not.toBeNull();
    expect(() => scanned(nested(4, '{"k":', "}"), 3)).toThrow(TooDeep);
    expect(() => scanned(`[${nested(3, "[", "]")}]`, 3)).toThrow(TooDeep);
    expect(scanned("1", 0)).not.toBeNull();
  });

  it("writes a large value whose lengths take several bytes", () => {
    const json = JSON.stringify({ data: "x".repeat(70_000), list: Array.from({ length: 500 }, (_, i) => ({ i, s: "é".repeat(i % 7) })) });
    expect(Buffer.from(scanned(json)!).equals(Buffer.from(parsedBytes(json)))).toBe(true);
    expect(create(ValueSchema)).toBeDefined();
  });
});
