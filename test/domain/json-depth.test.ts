/**
 * The nesting bound as docs/api.md "Bounds" counts it, and the words of its refusal, shared
 * by validation, lease delivery, the worker SDK, PostgreSQL's submit() and
 * the litequeue import.
 */
import { describe, expect, it } from "vitest";
import { jsonDepth, nestedTooDeepText, nestingDepth } from "../../src/domain/json-depth.js";
import { BOUNDS } from "../../src/domain/request-bounds.js";

/** `[[...[1]...]]`, `levels` deep. */
function nested(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = i % 2 === 0 ? [v] : { k: v };
  return v;
}

describe("jsonDepth", () => {
  it("counts a scalar as 0 and each array or object around it as one level", () => {
    expect(jsonDepth(1)).toBe(0);
    expect(jsonDepth(null)).toBe(0);
    expect(jsonDepth([])).toBe(1);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth({ a: [1, { b: "x" }], c: 2 })).toBe(3);
    expect(jsonDepth(nested(BOUNDS.jsonDepth))).toBe(BOUNDS.jsonDepth);
  });

  it("stops at one past the limit, however deep the value goes, without recursion", () => {
    expect(jsonDepth(nested(BOUNDS.jsonDepth + 1))).toBe(BOUNDS.jsonDepth + 1);
    expect(jsonDepth(nested(100_000))).toBe(BOUNDS.jsonDepth + 1);
    expect(jsonDepth(nested(5), 3)).toBe(4);
  });

  it("walks any tree through the children it is given", () => {
    type Node = { kids?: Node[] };
    expect(nestingDepth<Node>({ kids: [{ kids: [{}] }, {}] }, (n) => n.kids, 10)).toBe(2);
  });
});

describe("nestedTooDeepText", () => {
  it("names the bound twice, as every refusal says it", () => {
    expect(nestedTooDeepText()).toBe(`nested more than ${BOUNDS.jsonDepth} levels deep; the limit is ${BOUNDS.jsonDepth} levels`);
    expect(nestedTooDeepText("n")).toBe("nested more than n levels deep; the limit is n levels");
  });
});
