//go:build !otel

package leasequeue

// Built without the otel tag (the default): no spans, and Submit sends only
// the trace context given in SubmitOptions. tracing_otel.go is the other
// side, with OpenTelemetry (README.md "Tracing").

import "context"

// startAttemptSpan returns ctx as it is, and an end that does nothing.
func (w *Worker) startAttemptSpan(ctx context.Context, _ *Job) (context.Context, func(outcome, errText string, permanent bool)) {
	return ctx, endNoSpan
}

func endNoSpan(string, string, bool) {}

// currentTraceContext has no span to read without OpenTelemetry.
func currentTraceContext(context.Context) map[string]string { return nil }
