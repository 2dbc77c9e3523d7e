//go:build otel

package leasequeue

// The OpenTelemetry side (tracing_otel.go), with the SDK's in-memory span
// recorder: go test -tags otel.

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

const (
	testTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParentID    = "00f067aa0ba902b7"
	testTraceparent = "00-" + testTraceID + "-" + testParentID + "-01"
)

// spanRecorder is the SDK's in-memory recorder, and a wait for spans to end:
// the worker ends an attempt's span after it queued the outcome, so the
// outcome's arrival does not mean the span has ended.
type spanRecorder struct {
	*tracetest.SpanRecorder
	mu    sync.Mutex
	ended chan struct{} // closed and replaced as each span ends
}

func (r *spanRecorder) OnEnd(s sdktrace.ReadOnlySpan) {
	r.SpanRecorder.OnEnd(s)
	r.mu.Lock()
	close(r.ended)
	r.ended = make(chan struct{})
	r.mu.Unlock()
}

// waitEnded waits until n spans named name have ended, failing the test after testTimeout.
func (r *spanRecorder) waitEnded(t *testing.T, name string, n int) {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		r.mu.Lock()
		ch := r.ended
		r.mu.Unlock()
		count := 0
		for _, s := range r.Ended() {
			if s.Name() == name {
				count++
			}
		}
		if count >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d spans %q ended after %s", count, n, name, testTimeout)
		}
	}
}

// recordSpans makes a recording TracerProvider the global one for the test.
func recordSpans(t *testing.T) *spanRecorder {
	t.Helper()
	recorder := &spanRecorder{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan struct{})}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(recorder))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(provider)
	t.Cleanup(func() {
		otel.SetTracerProvider(previous)
		_ = provider.Shutdown(context.Background())
	})
	return recorder
}

// attemptSpans are the ended spans named "process q", by job id.
func attemptSpans(t *testing.T, recorder *spanRecorder) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		if s.Name() != "process q" {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "messaging.message.id" {
				out[kv.Value.AsString()] = s
			}
		}
	}
	return out
}

func attributesOf(s sdktrace.ReadOnlySpan) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}

// seenSpan is what a handler saw: the span in its ctx, and the parent of a span it opened.
type seenSpan struct{ current, innerParent trace.SpanContext }

// traceWorker runs a worker over leases until each has an outcome and its attempt's span has ended.
func traceWorker(t *testing.T, recorder *spanRecorder, opts WorkerOptions, leases ...*lqv1.Lease) map[string]seenSpan {
	t.Helper()
	f := newFake(t, true, leases...)
	opts.Queue, opts.Concurrency, opts.WorkerID = "q", 4, "unit-t"
	w := NewWorker(dial(t, f), opts)
	seen := make(chan [2]any, len(leases))
	w.Handle("ok", func(ctx context.Context, job *Job) (any, error) {
		_, inner := otel.Tracer("app").Start(ctx, "inner")
		inner.End()
		innerParent := trace.SpanContext{}
		if ro, ok := inner.(sdktrace.ReadOnlySpan); ok {
			innerParent = ro.Parent()
		}
		seen <- [2]any{job.ID, seenSpan{trace.SpanContextFromContext(ctx), innerParent}}
		return "done", nil
	})
	w.Handle("boom", func(ctx context.Context, job *Job) (any, error) { return nil, errors.New("it broke") })
	w.Handle("never", func(ctx context.Context, job *Job) (any, error) { return nil, Permanent(errors.New("bad input")) })
	w.Handle("later", func(ctx context.Context, job *Job) (any, error) { return nil, Snooze(2 * time.Second) })
	stop := runWorker(t, w)
	f.outcomes(t, len(leases))
	stop()
	recorder.waitEnded(t, "process q", len(leases))
	close(seen)
	out := map[string]seenSpan{}
	for s := range seen {
		out[s[0].(string)] = s[1].(seenSpan)
	}
	return out
}

func TestEachAttemptIsAConsumerSpanChildOfTheJobsContext(t *testing.T) {
	recorder := recordSpans(t)
	ok := leaseWithContext("ok", map[string]string{"traceparent": testTraceparent, "tracestate": "shop=checkout"})
	ok.Job.Attempts = 2
	seen := traceWorker(t, recorder, WorkerOptions{}, ok)
	spans := attemptSpans(t, recorder)
	span := spans[ok.Job.Id]
	if len(spans) != 1 || span == nil {
		t.Fatalf("attempt spans: %v", spans)
	}
	if span.SpanKind() != trace.SpanKindConsumer || span.InstrumentationLibrary().Name != "leasequeue-worker" {
		t.Errorf("kind %v, scope %q", span.SpanKind(), span.InstrumentationLibrary().Name)
	}
	want := map[string]any{
		"messaging.system": "leasequeue", "messaging.destination.name": "q", "messaging.message.id": ok.Job.Id,
		"messaging.operation.type": "process", "messaging.operation.name": "process", "leasequeue.job.id": ok.Job.Id,
		"leasequeue.job.task": "ok", "leasequeue.job.attempt": int64(2), "leasequeue.worker.id": "unit-t",
		"leasequeue.attempt.outcome": "complete",
	}
	if got := attributesOf(span); !reflect.DeepEqual(got, want) {
		t.Errorf("attributes\n got %v\nwant %v", got, want)
	}
	parent := span.Parent()
	if parent.TraceID().String() != testTraceID || parent.SpanID().String() != testParentID || !parent.IsRemote() {
		t.Errorf("parent %v, want %s/%s remote", parent, testTraceID, testParentID)
	}
	if span.SpanContext().TraceID().String() != testTraceID || span.SpanContext().TraceState().String() != "shop=checkout" {
		t.Errorf("span context %v", span.SpanContext())
	}
	if len(span.Links()) != 0 || span.Status().Code != codes.Unset {
		t.Errorf("links %v, status %v", span.Links(), span.Status())
	}
	// The handler's ctx carries the attempt's span: what it opens is its child.
	if s := seen[ok.Job.Id]; !s.current.Equal(span.SpanContext()) || !s.innerParent.Equal(span.SpanContext()) {
		t.Errorf("the handler saw %v and its span's parent was %v; the attempt's span is %v", s.current, s.innerParent, span.SpanContext())
	}
}

func TestFailuresHaveTheErrorStatusAndASnoozeDoesNot(t *testing.T) {
	recorder := recordSpans(t)
	ctx := map[string]string{"traceparent": testTraceparent}
	boom, never, later, nobody := leaseWithContext("boom", ctx), leaseWithContext("never", ctx), leaseWithContext("later", ctx), leaseWithContext("nobody", ctx)
	traceWorker(t, recorder, WorkerOptions{}, boom, never, later, nobody)
	spans := attemptSpans(t, recorder)
	check := func(l *lqv1.Lease, code codes.Code, description, outcome string, permanent bool) {
		t.Helper()
		s := spans[l.Job.Id]
		if s == nil {
			t.Fatalf("no span for %s", l.Job.Task)
		}
		if s.Status().Code != code || (description != "" && s.Status().Description != description) {
			t.Errorf("%s: status %v", l.Job.Task, s.Status())
		}
		if s.Status().Code == codes.Error && description == "" && s.Status().Description == "" {
			t.Errorf("%s: no error text", l.Job.Task)
		}
		attrs := attributesOf(s)
		if attrs["leasequeue.attempt.outcome"] != outcome {
			t.Errorf("%s: outcome %v", l.Job.Task, attrs["leasequeue.attempt.outcome"])
		}
		if _, has := attrs["leasequeue.attempt.permanent"]; has != permanent {
			t.Errorf("%s: leasequeue.attempt.permanent %v", l.Job.Task, attrs["leasequeue.attempt.permanent"])
		}
	}
	check(boom, codes.Error, "it broke", "fail", false)
	check(never, codes.Error, "bad input", "fail", true)
	check(later, codes.Unset, "", "snooze", false)
	check(nobody, codes.Error, "", "fail", false)
}

func TestTraceLinkStartsANewTraceLinkedToTheJobsContext(t *testing.T) {
	recorder := recordSpans(t)
	linked := leaseWithContext("ok", map[string]string{"traceparent": testTraceparent, "tracestate": "shop=checkout"})
	plain := leaseWithContext("ok", nil)
	seen := traceWorker(t, recorder, WorkerOptions{TraceLink: true}, linked, plain)
	spans := attemptSpans(t, recorder)
	span := spans[linked.Job.Id]
	if span == nil || span.Parent().IsValid() || span.SpanContext().TraceID().String() == testTraceID {
		t.Fatalf("linked span %v: want a new root", span)
	}
	links := span.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID().String() != testTraceID || links[0].SpanContext.SpanID().String() != testParentID ||
		links[0].SpanContext.TraceState().String() != "shop=checkout" {
		t.Errorf("links %v", links)
	}
	if !seen[linked.Job.Id].current.Equal(span.SpanContext()) {
		t.Errorf("the handler's ctx has %v, not the attempt's span", seen[linked.Job.Id].current)
	}
	root := spans[plain.Job.Id]
	if root == nil || root.Parent().IsValid() || len(root.Links()) != 0 {
		t.Errorf("a job without context: %v", root)
	}
}

func TestAJobWithoutOrWithABadContextStartsANewTrace(t *testing.T) {
	recorder := recordSpans(t)
	none := leaseWithContext("ok", nil)
	bad := leaseWithContext("ok", map[string]string{"traceparent": "00-00000000000000000000000000000000-" + testParentID + "-01"})
	traceWorker(t, recorder, WorkerOptions{}, none, bad)
	spans := attemptSpans(t, recorder)
	for _, l := range []*lqv1.Lease{none, bad} {
		if s := spans[l.Job.Id]; s == nil || s.Parent().IsValid() || len(s.Links()) != 0 {
			t.Errorf("%v: want a root span", s)
		}
	}
}

func TestSubmitSendsTheContextOfTheSpanInCtx(t *testing.T) {
	recordSpans(t)
	f := newFake(t, true)
	client := NewClient(dial(t, f))
	ctx, span := otel.Tracer("app").Start(context.Background(), "request")
	defer span.End()
	given := map[string]string{"traceparent": testTraceparent}
	for _, c := range []struct {
		ctx  context.Context
		opts *SubmitOptions
	}{{ctx, nil}, {ctx, &SubmitOptions{Priority: 1}}, {ctx, &SubmitOptions{TraceContext: map[string]string{}}}, {ctx, &SubmitOptions{TraceContext: given}}, {context.Background(), nil}} {
		if _, err := client.Submit(c.ctx, "q", "t", nil, c.opts); err != nil {
			t.Fatal(err)
		}
	}
	sc := span.SpanContext()
	own := map[string]string{"traceparent": "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, want := range []map[string]string{own, own, nil, given, nil} {
		got := f.submits[i].GetTraceContext()
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("submit %d: trace_context %v, want %v", i, got, want)
		}
	}
}
