/**
 * The trace context of the call being served, as the API listener's SERVER
 * span (docs/operations.md "Tracing") hands it to the handlers: a job a
 * Submit creates without a trace_context of its own is traced as a child
 * of this span. Unset when the server does not trace (or in memory); the
 * handlers then read the call's traceparent and tracestate headers.
 */
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { traceContextFromHeaders, type TraceContext } from "../domain/trace-context.js";

export interface CallTrace {
  /** The SERVER span's context (W3C), formatted when first read. */
  readonly traceContext: TraceContext;
}

export const callTraceKey = createContextKey<CallTrace | undefined>(undefined, { description: "leasequeue call trace" });

/** The context a job submitted by this call is a child of, when its request has none: the SERVER span's, else the call's headers', else none. */
export function callTraceContext(ctx: HandlerContext): TraceContext | null {
  const traced = ctx.values.get(callTraceKey);
  if (traced !== undefined) return traced.traceContext;
  return traceContextFromHeaders(ctx.requestHeader.get("traceparent"), ctx.requestHeader.get("tracestate"));
}
