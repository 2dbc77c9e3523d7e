/**
 * Random protobuf messages for the hand decoders' tests, held to
 * protobuf-es: a seeded generator, random google.protobuf.Values (with
 * what validation refuses mixed in on request) and damaged bytes.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ValueSchema } from "@bufbuild/protobuf/wkt";

export function seeded(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

export type Rand = () => number;
export const pick = <T>(rand: Rand, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];

const KEYS = ["a", "b", "2", "10", "01", "é", "", "key with space", "__proto__", "constructor", "z", "🙂"];
export const STRINGS = ["", "x", "é✓🙂", "a\u0000b", 'quote " and \\ back', "long ".repeat(30), "\u2028"];
const NUMBERS = [0, -0, 1, -1, 0.5, 1e300, -(2 ** 60), 2 ** 53 + 2, 5e-324];
const ODD_NUMBERS = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];

/** A random google.protobuf.Value of at most `depth` levels; `odd` mixes in what validation refuses. */
export function randomValue(rand: Rand, depth: number, odd: boolean): MessageInitShape<typeof ValueSchema> {
  const r = rand();
  if (odd && r < 0.01) return {}; // no kind
  if (odd && r < 0.02) return { kind: { case: "numberValue", value: pick(rand, ODD_NUMBERS) } };
  if (depth === 0 || r < 0.4) {
    const s = rand();
    if (s < 0.2) return { kind: { case: "nullValue", value: 0 } };
    if (s < 0.45) return { kind: { case: "numberValue", value: pick(rand, NUMBERS) } };
    if (s < 0.75) return { kind: { case: "stringValue", value: pick(rand, STRINGS) } };
    return { kind: { case: "boolValue", value: rand() < 0.5 } };
  }
  const n = Math.floor(rand() * 5);
  if (r < 0.7)
    return { kind: { case: "listValue", value: { values: Array.from({ length: n }, () => randomValue(rand, depth - 1, odd)) } } };
  const fields: Record<string, MessageInitShape<typeof ValueSchema>> = {};
  for (let i = 0; i < n; i++) fields[pick(rand, KEYS)] = randomValue(rand, depth - 1, odd);
  return { kind: { case: "structValue", value: { fields } } };
}

/** A Value nested `levels` lists deep around a 1. */
export function nestedList(levels: number): MessageInitShape<typeof ValueSchema> {
  let v: MessageInitShape<typeof ValueSchema> = { kind: { case: "numberValue", value: 1 } };
  for (let i = 0; i < levels; i++) v = { kind: { case: "listValue", value: { values: [v] } } };
  return v;
}

export const seconds = (rand: Rand) => pick(rand, [0n, 1n, -1n, 30n, 2_592_000n, 9_999_999_999n, -(2n ** 63n)]);
export const nanos = (rand: Rand) => pick(rand, [0, 1, 999_999_999, -5, 1_000_000_000]);

export const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

/** Damages: an unknown field, a field twice, a concatenation, a cut, a flipped byte. */
export function damaged(rand: Rand, bytes: Uint8Array, other: Uint8Array): Uint8Array {
  const d = rand();
  if (d < 0.2) return concat(bytes, new Uint8Array([0xa0, 0x06, 0x02, 0x68, 0x69])); // field 100, "hi"
  if (d < 0.35) return concat(bytes, other);
  if (d < 0.55 && bytes.length > 0) return bytes.subarray(0, Math.floor(rand() * bytes.length));
  if (bytes.length === 0) return new Uint8Array([0x08]);
  const copy = bytes.slice();
  copy[Math.floor(rand() * copy.length)] = Math.floor(rand() * 256);
  return copy;
}
