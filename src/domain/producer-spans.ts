/**
 * The PRODUCER spans of submitted jobs (docs/operations.md "Tracing"), as
 * the service and the scheduler see them: a small port that knows nothing
 * of OpenTelemetry. The server's tracing (src/telemetry/) implements it when
 * an exporter is configured; without one there is none, and submitting pays
 * nothing for it.
 */
import type { TraceContext } from "./trace-context.js";

/** One job's PRODUCER span, started before the job is stored. */
export interface ProducerSpan {
  /** The span's own context: what the job stores as its trace_context, so that its workers' spans are the span's children. */
  readonly traceContext: TraceContext;
  /** Ends the span with the job it sent (deduplicated: an idempotent replay found it), or the error that refused the submit. */
  end(outcome: { jobId: string; deduplicated: boolean } | { error: string }): void;
}

export interface ProducerSpans {
  /** Starts the PRODUCER span of a job for `queue`: a child of `parent`, or the root of a new trace when null. */
  start(queue: string, parent: TraceContext | null): ProducerSpan;
  /**
   * Records the PRODUCER span of a schedule's run, which starts a trace of
   * its own: the root whose ids `context` holds (made before the run was
   * stored, domain/trace-context.ts newRootTraceContext), from `startTime`
   * (epoch ms) to now.
   */
  recordRoot(queue: string, context: TraceContext, jobId: string, startTime: number): void;
}
