/**
 * The errors a handler throws to steer its job: RetryJobError carries the
 * retry delay it asks for.
 */
import { describe, expect, it } from "vitest";
import { RetryJobError } from "../../src/worker/index.js";

describe("RetryJobError", () => {
  it("needs a finite, non-negative delay", () => {
    expect(() => new RetryJobError("x", { retryDelayMs: -1 })).toThrow(RangeError);
    expect(new RetryJobError("later", { retryDelayMs: 5000 })).toMatchObject({ name: "RetryJobError", retryDelayMs: 5000 });
  });
});
