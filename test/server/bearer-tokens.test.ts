/**
 * Bearer tokens: generated with 256 random bits, stored as SHA-256, and
 * looked up with crypto.timingSafeEqual against every stored hash, match or
 * no match, so a lookup's time does not depend on which hash matched.
 */
import * as crypto from "node:crypto";
import { beforeEach, describe, expect, it, vi } from "vitest";

vi.mock("node:crypto", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:crypto")>();
  return { ...actual, timingSafeEqual: vi.fn(actual.timingSafeEqual) };
});

const { generateToken, hashToken, MIN_TOKEN_CHARS, TOKEN_PATTERN, TokenTable } = await import("../../src/server/bearer-tokens.js");

const compare = vi.mocked(crypto.timingSafeEqual);

describe("bearer tokens", () => {
  beforeEach(() => {
    compare.mockClear();
  });

  it("generates distinct tokens of 256 random bits that fit a Bearer header", () => {
    const a = generateToken();
    const b = generateToken();
    expect(a).not.toBe(b);
    expect(a).toMatch(/^lq_[A-Za-z0-9_-]{43}$/);
    expect(a).toMatch(TOKEN_PATTERN);
    expect(a.length).toBeGreaterThanOrEqual(MIN_TOKEN_CHARS);
  });

  it("stores SHA-256 in hex", () => {
    expect(hashToken("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("finds a token by its hash, and nothing for another token", () => {
    const tokens = [generateToken(), generateToken(), generateToken()];
    const table = new TokenTable(tokens.map((t, i) => ({ sha256: hashToken(t), value: `caller-${i}` })));
    expect(tokens.map((t) => table.lookup(t))).toEqual(["caller-0", "caller-1", "caller-2"]);
    expect(table.lookup(generateToken())).toBeUndefined();
    expect(table.lookup(tokens[0].slice(0, -1))).toBeUndefined();
  });

  it("compares with timingSafeEqual against every stored hash, whether the first, the last or none matches", () => {
    const tokens = Array.from({ length: 5 }, () => generateToken());
    const table = new TokenTable(tokens.map((t) => ({ sha256: hashToken(t), value: t })));
    for (const presented of [tokens[0], tokens[4], generateToken()]) {
      compare.mockClear();
      table.lookup(presented);
      expect(compare).toHaveBeenCalledTimes(5);
      // Always the presented token's hash against a stored one, both 32 bytes.
      for (const [a, b] of compare.mock.calls) {
        expect(Buffer.from(a as Uint8Array).toString("hex")).toBe(hashToken(presented));
        expect((b as Uint8Array).byteLength).toBe(32);
      }
    }
  });
});
