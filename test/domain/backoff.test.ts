/**
 * The one backoff formula: a ceiling that doubles per failure up to a
 * maximum, waited in full (a job's retry delay) or drawn from its upper half
 * (reconnects).
 */
import { describe, expect, it } from "vitest";
import { backoffCeilingMs, jitteredBackoffMs } from "../../src/domain/backoff.js";
import { MAX_BACKOFF_MS, retryBackoffMs } from "../../src/domain/state-machine.js";

describe("backoffCeilingMs", () => {
  it("doubles from initialMs per attempt and stops at maxMs", () => {
    const policy = { initialMs: 100, maxMs: 1000 };
    expect([0, 1, 2, 3, 4, 5].map((a) => backoffCeilingMs(a, policy))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it("stays at maxMs however many attempts failed, and at 0 from an initial 0", () => {
    expect(backoffCeilingMs(5000, { initialMs: 100, maxMs: 5000 })).toBe(5000);
    expect(backoffCeilingMs(5000, { initialMs: 0, maxMs: 5000 })).toBe(0);
  });

  it("is a job's retry delay: min(base * 2^(attempts-1), 1h)", () => {
    expect(retryBackoffMs(15_000, 1)).toBe(15_000);
    expect(retryBackoffMs(15_000, 3)).toBe(60_000);
    expect(retryBackoffMs(15_000, 100)).toBe(MAX_BACKOFF_MS);
    expect(retryBackoffMs(0, 50)).toBe(0);
  });
});

describe("jitteredBackoffMs", () => {
  it("draws whole milliseconds from the upper half of the ceiling", () => {
    const policy = { initialMs: 100, maxMs: 1000 };
    expect(jitteredBackoffMs(2, policy, () => 0)).toBe(200);
    expect(jitteredBackoffMs(2, policy, () => 0.5)).toBe(300);
    expect(jitteredBackoffMs(2, policy, () => 0.999999)).toBe(400);
    expect(Number.isInteger(jitteredBackoffMs(1, { initialMs: 3, maxMs: 1000 }, () => 0.3))).toBe(true);
  });
});
