/**
 * The worker's reconnect waits are jittered and bounded.
 */
import { describe, expect, it } from "vitest";
import { backoffDelay } from "../../src/worker/backoff.js";

describe("reconnect backoff", () => {
  it("doubles from the initial wait up to the cap, each wait drawn from [cap/2, cap]", () => {
    const options = { initialMs: 100, maxMs: 1000 };
    const caps = [100, 200, 400, 800, 1000, 1000];
    caps.forEach((cap, attempt) => {
      expect(backoffDelay(attempt, options, () => 0)).toBe(cap / 2);
      expect(backoffDelay(attempt, options, () => 0.999999)).toBe(cap);
    });
  });
});
