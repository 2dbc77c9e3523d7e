//go:build otel

package leasequeue

// OpenTelemetry (built with -tags otel; README.md "Tracing"): the CONSUMER
// span of each attempt, and the trace context Submit sends. Through the
// OpenTelemetry API and the global TracerProvider and the application's
// SDK behind it (otel.SetTracerProvider); without one the API is a no-op.
//
// The span is the one the TypeScript SDK opens (docs/writing-a-worker.md
// "Tracing"): `process <queue>`, kind CONSUMER, a child of the job's trace
// context (Job.trace_context, docs/api.md "Trace context") or, with
// WorkerOptions.TraceLink, the root of a new trace linked to it. Attributes,
// after OpenTelemetry's messaging semantic conventions: messaging.system
// `leasequeue`, messaging.destination.name (the queue), messaging.message.id
// (the job's id), messaging.operation.type and messaging.operation.name
// `process`; and leasequeue.job.id, leasequeue.job.task,
// leasequeue.job.attempt (the job's attempts count, this attempt included),
// leasequeue.worker.id and, at the end, leasequeue.attempt.outcome (complete,
// fail or snooze). A failed attempt's span has the error status and the
// error's text. The job's context is W3C Trace Context whatever propagator
// the application set globally, so it is read and written with
// propagation.TraceContext itself.

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the SDK's spans (the TypeScript SDK's too).
const tracerName = "leasequeue-worker"

// traceCarrier is a trace_context map as a propagation.TextMapCarrier.
type traceCarrier map[string]string

func (c traceCarrier) Get(key string) string { return c[key] }
func (c traceCarrier) Set(key, value string) { c[key] = value }
func (c traceCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// startAttemptSpan starts the CONSUMER span of one attempt of job; the
// returned ctx (ctx with the span) is the handler's, and end finishes the
// span with the attempt's outcome.
func (w *Worker) startAttemptSpan(ctx context.Context, job *Job) (context.Context, func(outcome, errText string, permanent bool)) {
	producer := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), traceCarrier(job.Proto.GetTraceContext())))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "leasequeue"),
			attribute.String("messaging.destination.name", job.Queue),
			attribute.String("messaging.message.id", job.ID),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("leasequeue.job.id", job.ID),
			attribute.String("leasequeue.job.task", job.Task),
			attribute.Int64("leasequeue.job.attempt", int64(job.Attempts)),
			attribute.String("leasequeue.worker.id", w.opts.WorkerID),
		),
	}
	parent := ctx
	switch {
	case producer.IsValid() && w.opts.TraceLink:
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: producer}))
	case producer.IsValid():
		parent = trace.ContextWithRemoteSpanContext(ctx, producer)
	default:
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := otel.Tracer(tracerName).Start(parent, "process "+job.Queue, opts...)
	return ctx, func(outcome, errText string, permanent bool) {
		span.SetAttributes(attribute.String("leasequeue.attempt.outcome", outcome))
		if outcome == "fail" {
			span.SetStatus(codes.Error, errText)
			if permanent {
				span.SetAttributes(attribute.Bool("leasequeue.attempt.permanent", true))
			}
		}
		span.End()
	}
}

// currentTraceContext is the W3C Trace Context of the span in ctx, as
// SubmitRequest.trace_context takes it; nil without a valid span.
func currentTraceContext(ctx context.Context) map[string]string {
	carrier := traceCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if carrier["traceparent"] == "" {
		return nil
	}
	out := map[string]string{"traceparent": carrier["traceparent"]}
	if carrier["tracestate"] != "" {
		out["tracestate"] = carrier["tracestate"]
	}
	return out
}
