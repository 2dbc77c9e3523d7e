package leasequeue

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

// SubmitOptions.TraceContext goes as given, in every build; a nil one takes
// the span in ctx, which tracing_otel_test.go checks (none here, so none in
// any build).
func TestSubmitSendsTheTraceContextItIsGiven(t *testing.T) {
	f := newFake(t, true)
	client := NewClient(dial(t, f))
	given := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "shop=checkout"}
	ctx := context.Background()
	for _, opts := range []*SubmitOptions{nil, {}, {TraceContext: map[string]string{}}, {TraceContext: given}} {
		if _, err := client.Submit(ctx, "q", "t", nil, opts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Submit(ctx, "q", "t", nil, &SubmitOptions{TraceContext: map[string]string{"baggage": "x"}}); err == nil ||
		!strings.HasPrefix(err.Error(), "TraceContext: unknown key \"baggage\"") {
		t.Fatalf("a bad key: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submits) != 4 {
		t.Fatalf("%d submits", len(f.submits))
	}
	for i, want := range []map[string]string{nil, nil, nil, given} {
		if got := f.submits[i].GetTraceContext(); len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("submit %d: trace_context %v, want %v", i, got, want)
		}
	}
}

// WaitJob and SubmitAndWait refuse a timeout the server would refuse, before sending anything.
func TestWaitJobRefusesATimeoutPast15Minutes(t *testing.T) {
	f := newFake(t, true)
	client := NewClient(dial(t, f))
	ctx := context.Background()
	if _, _, err := client.WaitJob(ctx, "01a2333f-b290-70e5-84f8-95d52c11d916", 16*time.Minute); err == nil || !strings.HasPrefix(err.Error(), "timeout:") {
		t.Fatalf("16m: %v", err)
	}
	if _, _, err := client.SubmitAndWait(ctx, "q", "t", nil, nil, -time.Second); err == nil || !strings.HasPrefix(err.Error(), "waitTimeout:") {
		t.Fatalf("-1s: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submits) != 0 {
		t.Fatalf("%d submits", len(f.submits))
	}
}
