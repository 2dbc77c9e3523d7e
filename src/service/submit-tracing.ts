/**
 * The trace context each job of a Submit or SubmitBatch stores (docs/api.md
 * "Trace context"): the request's own trace_context, else the call's (the
 * SERVER span's when the server traces, else the traceparent and tracestate
 * headers). When the server traces, each job gets a PRODUCER span, a child
 * of that context, and stores the span's own context instead, so that the
 * job's workers are children of its PRODUCER span.
 */
import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { ProducerSpans } from "../domain/producer-spans.js";
import type { NewJob } from "../domain/submission.js";
import type { TraceContext } from "../domain/trace-context.js";
import type { SubmitOutcome } from "../store/store.js";
import { callTraceContext } from "./call-trace.js";

export interface TracedSubmission {
  /** The specs to store, each with the trace context it carries. */
  readonly specs: NewJob[];
  /** The store answered (in the specs' order): the PRODUCER spans end with their jobs. */
  stored(outcomes: readonly SubmitOutcome[]): void;
  /** The store refused the submit: the PRODUCER spans end with the error. */
  refused(err: unknown): void;
}

const UNTRACED = { stored() {}, refused() {} };

export function traceSubmission(specs: NewJob[], ctx: HandlerContext, spans: ProducerSpans | undefined): TracedSubmission {
  let call: TraceContext | null | undefined;
  // The call's context is read once, and only when a job has none of its own.
  const parentOf = (spec: NewJob) => spec.traceContext ?? (call === undefined ? (call = callTraceContext(ctx)) : call);
  if (spans === undefined) {
    const carried = specs.map((spec) => {
      if (spec.traceContext !== null) return spec;
      const parent = parentOf(spec);
      return parent === null ? spec : { ...spec, traceContext: parent };
    });
    return { specs: carried, ...UNTRACED };
  }
  const started = specs.map((spec) => spans.start(spec.queue, parentOf(spec)));
  return {
    specs: specs.map((spec, i) => ({ ...spec, traceContext: started[i].traceContext })),
    stored(outcomes) {
      outcomes.forEach((o, i) => started[i].end({ jobId: o.job.id, deduplicated: o.deduplicated }));
    },
    refused(err) {
      const error = err instanceof ConnectError ? err.rawMessage : err instanceof Error ? err.message : String(err);
      for (const span of started) span.end({ error });
    },
  };
}
