/**
 * W3C Trace Context as a job carries it (docs/api.md "Trace context"): the
 * header fallback reads headers as a W3C receiver does, and a new trace's
 * root is a valid, sampled traceparent.
 */
import { describe, expect, it } from "vitest";
import {
  formatTraceparent,
  newRootTraceContext,
  traceContextFromHeaders,
  traceContextMap,
  traceparentFields,
  traceparentProblem,
} from "../../src/domain/trace-context.js";

const PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("trace context", () => {
  it("reads headers: a bad or oversized traceparent is ignored with its tracestate, a bad tracestate dropped alone", () => {
    expect(traceContextFromHeaders(null, "congo=1")).toBeNull();
    expect(traceContextFromHeaders(` ${PARENT} `, " congo=1 ")).toEqual({ traceparent: PARENT, tracestate: "congo=1" });
    expect(traceContextFromHeaders("00-abc", "congo=1")).toBeNull();
    expect(traceContextFromHeaders(`${PARENT}, ${PARENT}`, null)).toBeNull();
    expect(traceContextFromHeaders(`01${PARENT.slice(2)}-${"x".repeat(500)}`, null)).toBeNull();
    expect(traceContextFromHeaders(PARENT, "no list")).toEqual({ traceparent: PARENT, tracestate: "" });
    expect(traceContextFromHeaders(PARENT, `k=${"v".repeat(256)},l=${"v".repeat(256)}`)).toEqual({ traceparent: PARENT, tracestate: "" });
  });

  it("reads the fields of any version, and writes version 00", () => {
    expect(traceparentFields(PARENT)).toEqual({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7", flags: 1 });
    expect(traceparentFields(`7f${PARENT.slice(2)}-more`)).toMatchObject({ parentId: "00f067aa0ba902b7" });
    expect(traceparentFields("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7")).toBeUndefined();
    expect(formatTraceparent({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7", flags: 1 })).toBe(PARENT);
  });

  it("maps a context as Job.trace_context: no tracestate key when it is empty", () => {
    expect(traceContextMap(null)).toEqual({});
    expect(traceContextMap({ traceparent: PARENT, tracestate: "" })).toEqual({ traceparent: PARENT });
    expect(traceContextMap({ traceparent: PARENT, tracestate: "a=1" })).toEqual({ traceparent: PARENT, tracestate: "a=1" });
  });

  it("starts new traces with valid, sampled, distinct roots", () => {
    const roots = Array.from({ length: 100 }, () => newRootTraceContext());
    for (const root of roots) {
      expect(traceparentProblem(root.traceparent)).toBeUndefined();
      expect(traceparentFields(root.traceparent)!.flags).toBe(1);
    }
    expect(new Set(roots.map((r) => traceparentFields(r.traceparent)!.traceId)).size).toBe(100);
  });
});
