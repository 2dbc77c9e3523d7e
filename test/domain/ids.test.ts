import { describe, expect, it } from "vitest";
import { isJobId, newJobId } from "../../src/domain/ids.js";
import { newLeaseToken } from "../../src/domain/lease-token.js";
import { pooledRandomBytes } from "../../src/domain/random-pool.js";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function timestampOf(id: string): number {
  return Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16);
}

describe("newJobId", () => {
  it("issues well-formed UUIDv7s carrying the creation millisecond", () => {
    const at = Date.UTC(2026, 11, 1, 12, 0, 0, 123);
    const id = newJobId(at);
    expect(id).toMatch(V7);
    expect(isJobId(id)).toBe(true);
    expect(timestampOf(id)).toBe(at);
  });

  it("orders ids strictly within one millisecond, and across many pool refills", () => {
    const at = Date.UTC(2026, 11, 1, 12, 0, 1);
    // 20,000 ids draw 320,000 pooled bytes: the 4 KiB pool is refilled many times.
    const ids = Array.from({ length: 20_000 }, () => newJobId(at));
    for (let k = 1; k < ids.length; k++) expect(ids[k] > ids[k - 1]).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => V7.test(id))).toBe(true);
  });

  it("stays ordered when the clock goes back, and follows it forward again", () => {
    const at = Date.UTC(2026, 11, 1, 12, 0, 2);
    const a = newJobId(at);
    const b = newJobId(at - 1000);
    const c = newJobId(at + 5);
    expect(b > a).toBe(true);
    expect(timestampOf(b)).toBe(at);
    expect(c > b).toBe(true);
    expect(timestampOf(c)).toBe(at + 5);
  });

  it("differs in its random bits between ids of different milliseconds", () => {
    const tails = new Set(Array.from({ length: 1000 }, (_, k) => newJobId(Date.UTC(2026, 11, 2) + k).slice(-12)));
    expect(tails.size).toBe(1000);
  });
});

describe("pooledRandomBytes", () => {
  it("hands out each slice once, across refills", () => {
    const seen = new Set<string>();
    for (let k = 0; k < 2000; k++) seen.add(pooledRandomBytes(32).toString("hex"));
    expect(seen.size).toBe(2000);
    const tokens = new Set(Array.from({ length: 2000 }, () => newLeaseToken().token));
    expect(tokens.size).toBe(2000);
  });

  it("refuses a request larger than the pool", () => {
    expect(() => pooledRandomBytes(5000)).toThrow(RangeError);
  });
});
