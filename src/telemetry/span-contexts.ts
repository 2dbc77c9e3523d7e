/**
 * W3C Trace Context (domain/trace-context.ts) and OpenTelemetry's span
 * contexts, each way: a job's stored context as a remote parent, and a
 * span's context as the traceparent and tracestate a job stores.
 */
import { createTraceState, ROOT_CONTEXT, trace, type Context, type SpanContext } from "@opentelemetry/api";
import { formatTraceparent, traceparentFields, type TraceContext } from "../domain/trace-context.js";

/** An OpenTelemetry context whose span is the remote one `parent` names; the root context for none. */
export function parentContext(parent: TraceContext | null): Context {
  if (parent === null) return ROOT_CONTEXT;
  const fields = traceparentFields(parent.traceparent);
  if (fields === undefined) return ROOT_CONTEXT;
  const spanContext: SpanContext = {
    traceId: fields.traceId,
    spanId: fields.parentId,
    traceFlags: fields.flags,
    isRemote: true,
    ...(parent.tracestate === "" ? {} : { traceState: createTraceState(parent.tracestate) }),
  };
  return trace.setSpanContext(ROOT_CONTEXT, spanContext);
}

/** A span's context as the W3C context a job stores. */
export function traceContextOf(spanContext: SpanContext): TraceContext {
  return {
    traceparent: formatTraceparent({ traceId: spanContext.traceId, parentId: spanContext.spanId, flags: spanContext.traceFlags }),
    tracestate: spanContext.traceState?.serialize() ?? "",
  };
}
