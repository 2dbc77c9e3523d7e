package leasequeue

// A job cancelled while its handler runs (worker_cancel.go).

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

func TestAJobCancelledWhileItRunsEndsItsHandlersContextAndSendsNoOutcome(t *testing.T) {
	t.Run("Work", func(t *testing.T) { testCancelledWhileRunning(t, true) })
	t.Run("StreamClaims", func(t *testing.T) { testCancelledWhileRunning(t, false) })
}

func testCancelledWhileRunning(t *testing.T, work bool) {
	// Concurrency 1: after starts only once hold's handler has returned and
	// freed the slot, and its outcome goes after any that hold's would have.
	hold, after := lease("hold", nil), lease("after", nil)
	f := newFake(t, work, hold, after)
	var mu sync.Mutex
	var events []Event
	cancelled := make(chan struct{})
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Concurrency: 1, LeaseDuration: time.Hour, Logger: LogfmtLogger(io.Discard),
		OnEvent: func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
			if e.Kind == "cancelled" && e.JobID == hold.Job.Id {
				close(cancelled) // a second one panics, which emit recovers from: counted below
			}
		}})
	started := make(chan struct{})
	ended := make(chan context.Context, 1)
	w.Handle("hold", func(ctx context.Context, job *Job) (any, error) {
		close(started)
		select {
		case <-ctx.Done():
		case <-time.After(testTimeout):
		}
		ended <- ctx
		return "finished anyway", nil // dropped
	})
	w.Handle("after", func(ctx context.Context, job *Job) (any, error) { return "ok", nil })
	stop := runWorker(t, w)
	waitClosed(t, started, "the handler to start")
	f.cancelRunning("job-not-held", hold.Job.Id)

	var ctx context.Context
	select {
	case ctx = <-ended:
	case <-time.After(testTimeout):
		t.Fatalf("waited %s for the handler's context to end", testTimeout)
	}
	if err := ctx.Err(); err != context.Canceled {
		t.Errorf("ctx.Err() = %v", err)
	}
	if cause := causeOf(ctx); haveCause && cause != ErrJobCancelled {
		t.Errorf("context.Cause(ctx) = %v", cause)
	}
	waitClosed(t, cancelled, "the cancelled event")
	// Its heartbeats stopped: the timer beats only the leases held.
	w.mu.Lock()
	for _, h := range w.held {
		if h.job.ID == hold.Job.Id {
			t.Errorf("the cancelled job's lease is still held, in state %d", h.state)
		}
	}
	w.mu.Unlock()

	// The slot freed and the worker went on.
	got := f.outcomes(t, 1)
	stop()
	if got[after.Job.Id].GetComplete() == nil {
		t.Errorf("outcomes = %v", got)
	}
	f.mu.Lock()
	for _, a := range f.acks {
		if a.GetJobId() == hold.Job.Id {
			t.Errorf("an acknowledgement went for the cancelled job: %v", a)
		}
	}
	f.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for _, e := range events {
		switch e.JobID {
		case hold.Job.Id:
			kinds = append(kinds, e.Kind)
		case "job-not-held":
			t.Errorf("an event for a job not held: %+v", e)
		}
	}
	if len(kinds) != 2 || kinds[0] != "lease" || kinds[1] != "cancelled" {
		t.Errorf("events of the cancelled job: %v", kinds)
	}
}

// A cancellation while the outcome waits to go drops it, and the refusal of
// one already on its way is no lost lease; a job no longer held is ignored.
func TestACancellationDropsWhatIsQueuedForTheJob(t *testing.T) {
	var events []Event
	// Concurrency 0 (Run sets the default): accept starts no handler.
	w := NewWorker(nil, WorkerOptions{Queue: "q", LeaseDuration: time.Hour, Logger: LogfmtLogger(io.Discard),
		OnEvent: func(e Event) { events = append(events, e) }})
	a, b, c := lease("a", nil), lease("b", nil), lease("c", nil)
	w.accept(a)
	w.accept(b)
	w.accept(c)
	w.mu.Lock()
	ha, hb, hc := w.held[a.LeaseToken], w.held[b.LeaseToken], w.held[c.LeaseToken]
	hc.state = stateRunning
	w.queueOutcome(hc, "complete", &lqv1.Acknowledgement{JobId: c.Job.Id, LeaseToken: c.LeaseToken}, "")
	onItsWay := w.takeBatch() // c's outcome, sent
	ha.state = stateRunning
	w.queueOutcome(ha, "complete", &lqv1.Acknowledgement{JobId: a.Job.Id, LeaseToken: a.LeaseToken}, "")
	w.queueHeartbeat(ha)
	w.queueHeartbeat(hb)
	w.mu.Unlock()
	if len(onItsWay) != 1 {
		t.Fatalf("%d acknowledgements on their way", len(onItsWay))
	}

	w.jobCancelled(a.Job.Id)
	w.jobCancelled(a.Job.Id) // no longer held: ignored
	w.jobCancelled("job-not-held")
	w.jobCancelled(c.Job.Id)
	w.settle(onItsWay[0], status.New(codes.Aborted, "job "+c.Job.Id+" was cancelled while running").Proto())

	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.outbox) != 1 || w.outbox[0].h != hb || w.outbox[0].kind != "heartbeat" {
		t.Errorf("outbox = %v", w.outbox)
	}
	if ha.state != stateCancelled || hc.state != stateCancelled || ha.ctx.Err() != context.Canceled || hb.ctx.Err() != nil {
		t.Errorf("states %d %d %d", ha.state, hb.state, hc.state)
	}
	if len(w.held) != 1 || w.held[b.LeaseToken] != hb {
		t.Errorf("held = %v", w.held)
	}
	var got []string
	for _, e := range events {
		if e.Kind != "lease" {
			got = append(got, e.Kind+" "+e.JobID)
		}
	}
	if len(got) != 2 || got[0] != "cancelled "+a.Job.Id || got[1] != "cancelled "+c.Job.Id {
		t.Errorf("events = %v", got)
	}
}
