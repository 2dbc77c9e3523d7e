/**
 * The CONSUMER span of each attempt (docs/writing-a-worker.md "Tracing"),
 * through `@opentelemetry/api` alone: the application registers its own SDK
 * (and context manager), and without one every call here is the API's
 * no-op. The span is a child of the job's trace context (Job.trace_context,
 * docs/api.md "Trace context") or, with `link: true`, the root of a new
 * trace linked to it; the handler runs with the span active, so the spans
 * it opens are the attempt's children.
 */
import {
  context,
  createTraceState,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type SpanContext,
  type Tracer,
} from "@opentelemetry/api";
import { traceparentFields } from "../domain/trace-context.js";
import type { Job } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import type { Outcome } from "./attempt-outcome.js";

/** createWorker's `tracing` option. */
export interface WorkerTracingOptions {
  /** Start each attempt's span as the root of a new trace linked to the job's context, instead of as its child; default false. */
  link?: boolean;
  /** The tracer to use; default `trace.getTracer("leasequeue-worker")` of the registered provider. */
  tracer?: Tracer;
}

/** The scope name of the SDK's spans. */
const SCOPE = "leasequeue-worker";

/** The job's stored context as a remote span context; undefined when it has none. */
export function jobSpanContext(job: Job): SpanContext | undefined {
  const traceparent = job.traceContext.traceparent;
  if (traceparent === undefined) return undefined;
  const fields = traceparentFields(traceparent);
  if (fields === undefined) return undefined;
  const tracestate = job.traceContext.tracestate;
  return {
    traceId: fields.traceId,
    spanId: fields.parentId,
    traceFlags: fields.flags,
    isRemote: true,
    ...(tracestate === undefined || tracestate === "" ? {} : { traceState: createTraceState(tracestate) }),
  };
}

export interface AttemptSpan {
  /** Runs `work` with the attempt's span active. */
  within<T>(work: () => T): T;
  end(outcome: Outcome): void;
}

/** No span: what an attempt gets when its span could not start. */
const WITHOUT_SPAN: AttemptSpan = { within: (work) => work(), end() {} };

/**
 * Starts the CONSUMER span of one attempt of `job`; `onError` hears of a tracer that throws.
 *
 * Attributes, after OpenTelemetry's messaging semantic conventions:
 * messaging.system `leasequeue`, messaging.destination.name (the queue),
 * messaging.message.id (the job's id), messaging.operation.type and
 * messaging.operation.name `process`; and leasequeue.job.id,
 * leasequeue.job.task, leasequeue.job.attempt (the job's attempts count,
 * this attempt included), leasequeue.worker.id and, at the end,
 * leasequeue.attempt.outcome (complete, fail, snooze or release). A failed
 * attempt's span has the error status and the error's text.
 *
 * Tracing never decides a job's fate: when the tracer (the application's
 * SDK) throws while a span starts or ends, `onError` hears of it and the
 * attempt runs, and reports its outcome, without the span.
 */
export function startAttemptSpan(
  job: Job,
  workerId: string,
  options: WorkerTracingOptions = {},
  onError: (error: Error) => void = () => {},
): AttemptSpan {
  try {
    return startSpan(job, workerId, options, onError);
  } catch (err) {
    onError(new Error(`job ${job.id}: the attempt's span did not start: ${errorText(err)}`));
    return WITHOUT_SPAN;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function startSpan(job: Job, workerId: string, options: WorkerTracingOptions, onError: (error: Error) => void): AttemptSpan {
  const tracer = options.tracer ?? trace.getTracer(SCOPE);
  const producer = jobSpanContext(job);
  const attributes = {
    "messaging.system": "leasequeue",
    "messaging.destination.name": job.queue,
    "messaging.message.id": job.id,
    "messaging.operation.type": "process",
    "messaging.operation.name": "process",
    "leasequeue.job.id": job.id,
    "leasequeue.job.task": job.task,
    "leasequeue.job.attempt": job.attempts,
    "leasequeue.worker.id": workerId,
  };
  let parent: Context = ROOT_CONTEXT;
  const linked = options.link === true && producer !== undefined;
  if (producer !== undefined && !linked) parent = trace.setSpanContext(ROOT_CONTEXT, producer);
  const span = tracer.startSpan(
    `process ${job.queue}`,
    { kind: SpanKind.CONSUMER, attributes, ...(linked ? { root: true, links: [{ context: producer }] } : {}) },
    parent,
  );
  const active = trace.setSpan(context.active(), span);
  return {
    within: (work) => context.with(active, work),
    end(outcome) {
      try {
        span.setAttribute("leasequeue.attempt.outcome", outcome.kind);
        if (outcome.kind === "fail") {
          span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error });
          if (outcome.permanent) span.setAttribute("leasequeue.attempt.permanent", true);
        }
        span.end();
      } catch (err) {
        // The outcome is already on its way; only the span is lost.
        onError(new Error(`job ${job.id}: the attempt's span did not end: ${errorText(err)}`));
      }
    },
  };
}
