/**
 * A producer's side of trace context (docs/api.md "Trace context"): the
 * active span's context as SubmitRequest.trace_context, and the client
 * interceptor that sends it as the traceparent and tracestate headers of
 * Submit and SubmitBatch, so that the jobs a traced request submits join
 * its trace. Through `@opentelemetry/api` alone: without a registered SDK
 * there is no active span, and nothing is sent.
 */
import type { Interceptor } from "@connectrpc/connect";
import { context, isSpanContextValid, trace, type Context } from "@opentelemetry/api";
import { formatTraceparent } from "../domain/trace-context.js";

/** The methods whose calls carry the caller's context: they create jobs. */
const SUBMITTING = new Set(["Submit", "SubmitBatch"]);

/**
 * The W3C Trace Context of the span active in `ctx` (default: the active
 * context), as SubmitRequest.trace_context takes it; `{}` without a span.
 */
export function currentTraceContext(ctx: Context = context.active()): Record<string, string> {
  const span = trace.getSpanContext(ctx);
  if (span === undefined || !isSpanContextValid(span)) return {};
  const traceparent = formatTraceparent({ traceId: span.traceId, parentId: span.spanId, flags: span.traceFlags });
  const tracestate = span.traceState?.serialize() ?? "";
  return tracestate === "" ? { traceparent } : { traceparent, tracestate };
}

/** Sends the active span's context as traceparent/tracestate on Submit and SubmitBatch, unless the call has its own. */
export function traceContextInterceptor(): Interceptor {
  return (next) => (req) => {
    if (SUBMITTING.has(req.method.name) && !req.header.has("traceparent")) {
      const { traceparent, tracestate } = currentTraceContext();
      if (traceparent !== undefined) {
        req.header.set("traceparent", traceparent);
        if (tracestate !== undefined) req.header.set("tracestate", tracestate);
      }
    }
    return next(req);
  };
}
