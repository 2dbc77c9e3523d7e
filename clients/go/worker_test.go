package leasequeue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

// testTimeout bounds every wait of the tests: far beyond any machine's pace
// (what they wait for takes milliseconds), not an expectation of it. The
// tests wait on what they mean (docs/development.md "How a test waits"): an
// acknowledgement or a Claim the fake received, a channel a handler closes, a
// log record; none sleeps, and none measures how long something took.
const testTimeout = 30 * time.Second

// waitClosed waits for ch to be closed, failing the test naming what after testTimeout.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("waited %s for %s", testTimeout, what)
	}
}

// fakeServer is an in-process stand-in for the LeaseQueue server: it hands
// out its leases on Work (or StreamClaims when work is false; or Claim,
// carrying acknowledgements, when noStreams is set) and records every
// acknowledgement, answering each OK. The streams push the job ids given to
// cancelRunning as cancellations of running jobs. Every change it records
// closes changed, which waitFor waits on.
type fakeServer struct {
	lqv1.UnimplementedLeaseQueueServiceServer
	leases    []*lqv1.Lease
	work      bool
	noStreams bool
	claims    []claimSeen

	mu                sync.Mutex
	changed           chan struct{}
	acks              []*lqv1.Acknowledgement
	how               []string
	messages          int
	polling           int      // Claims long-polling (wait > 0) now
	ackedWhilePolling []string // job ids of acknowledgements that arrived while a Claim long-polled
	starts            []*lqv1.WorkStart
	submits           []*lqv1.SubmitRequest
	cancels           []string // job ids the open stream is to say were cancelled while running
	target            string
	server            *grpc.Server
	// refuse, when set, ends Work, StreamClaims and Claim with it at once, as
	// the server refuses a worker (a token without the queue, say); refusals
	// records the RPCs refused, in order.
	refuse   *status.Status
	refusals []string
}

func newFake(t *testing.T, work bool, leases ...*lqv1.Lease) *fakeServer {
	t.Helper()
	f := &fakeServer{leases: leases, work: work, changed: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.target = "http://" + lis.Addr().String()
	f.server = grpc.NewServer()
	lqv1.RegisterLeaseQueueServiceServer(f.server, f)
	go func() { _ = f.server.Serve(lis) }()
	t.Cleanup(f.server.Stop)
	return f
}

func leaseWithContext(task string, traceContext map[string]string) *lqv1.Lease {
	l := lease(task, nil)
	l.Job.TraceContext = traceContext
	return l
}

// leasesMade counts the leases made, for their ids (unique however fast they are made: not from the clock).
var leasesMade atomic.Int64

func lease(task string, payload any) *lqv1.Lease {
	v, _ := structpb.NewValue(payload)
	id := fmt.Sprintf("job-%s-%d", task, leasesMade.Add(1))
	return &lqv1.Lease{LeaseToken: "token-" + id, Job: &lqv1.Job{Id: id, Queue: "q", Task: task, Payload: v, Attempts: 1, MaxAttempts: 3, Deliveries: 1}}
}

func (f *fakeServer) Submit(ctx context.Context, req *lqv1.SubmitRequest) (*lqv1.SubmitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	return &lqv1.SubmitResponse{Job: &lqv1.Job{Id: fmt.Sprintf("job-%d", len(f.submits)), Queue: req.GetQueue(), Task: req.GetTask(),
		TraceContext: req.GetTraceContext()}}, nil
}

// notify wakes everything waiting for a change (f.mu held).
func (f *fakeServer) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeServer) record(how string, acks []*lqv1.Acknowledgement) []*lqv1.AcknowledgementResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.messages++
	results := make([]*lqv1.AcknowledgementResult, len(acks))
	for i, a := range acks {
		f.acks = append(f.acks, a)
		f.how = append(f.how, how)
		if f.polling > 0 {
			f.ackedWhilePolling = append(f.ackedWhilePolling, a.GetJobId())
		}
		results[i] = &lqv1.AcknowledgementResult{JobId: a.GetJobId()}
	}
	f.notify()
	return results
}

// waitFor waits until check (called with f.mu held) is true, failing the test naming what after testTimeout.
func (f *fakeServer) waitFor(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		f.mu.Lock()
		done, ch := check(), f.changed
		f.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("waited %s for %s; acknowledgements went by %v", testTimeout, what, f.how)
		}
	}
}

// outcomesLocked are the acknowledgements that are not heartbeats, by job id (f.mu held).
func (f *fakeServer) outcomesLocked() map[string]*lqv1.Acknowledgement {
	got := map[string]*lqv1.Acknowledgement{}
	for _, a := range f.acks {
		if a.GetHeartbeat() == nil {
			got[a.GetJobId()] = a
		}
	}
	return got
}

// outcomes waits for n acknowledgements that are not heartbeats and returns them by job id.
func (f *fakeServer) outcomes(t *testing.T, n int) map[string]*lqv1.Acknowledgement {
	t.Helper()
	f.waitFor(t, fmt.Sprintf("%d outcomes", n), func() bool { return len(f.outcomesLocked()) >= n })
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcomesLocked()
}

// refused answers an RPC with f.refuse, if set, and records it.
func (f *fakeServer) refused(rpc string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse == nil {
		return nil
	}
	f.refusals = append(f.refusals, rpc)
	f.notify()
	return f.refuse.Err()
}

func (f *fakeServer) Work(stream lqv1.LeaseQueueService_WorkServer) error {
	if err := f.refused("Work"); err != nil {
		return err
	}
	if !f.work || f.noStreams {
		return status.Error(codes.Unimplemented, "no Work here")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.starts = append(f.starts, first.GetStart())
	leases := f.leases
	f.leases = nil
	f.mu.Unlock()
	// Results and cancellations go from two goroutines: one Send at a time.
	var sending sync.Mutex
	send := func(m *lqv1.WorkResponse) error {
		sending.Lock()
		defer sending.Unlock()
		return stream.Send(m)
	}
	if err := send(&lqv1.WorkResponse{}); err != nil {
		return err
	}
	if err := send(&lqv1.WorkResponse{Leases: leases}); err != nil {
		return err
	}
	ctx, stopPushing := context.WithCancel(stream.Context())
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		f.pushCancels(ctx, func(ids []string) error { return send(&lqv1.WorkResponse{CancelledJobIds: ids}) })
	}()
	defer func() { stopPushing(); <-pushed }()
	for {
		msg, err := stream.Recv()
		if err != nil {
			return nil // half-closed
		}
		if err := send(&lqv1.WorkResponse{Results: f.record("work", msg.GetAcks())}); err != nil {
			return err
		}
	}
}

// cancelRunning has the open stream say that the jobs ids were cancelled while running.
func (f *fakeServer) cancelRunning(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, ids...)
	f.notify()
}

// pushCancels sends what cancelRunning was given, as it comes, until ctx ends or a send fails.
func (f *fakeServer) pushCancels(ctx context.Context, send func(ids []string) error) {
	for {
		f.mu.Lock()
		ids, ch := f.cancels, f.changed
		f.cancels = nil
		f.mu.Unlock()
		if len(ids) > 0 {
			if send(ids) != nil {
				return
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (f *fakeServer) StreamClaims(req *lqv1.StreamClaimsRequest, stream lqv1.LeaseQueueService_StreamClaimsServer) error {
	if err := f.refused("StreamClaims"); err != nil {
		return err
	}
	if f.noStreams {
		return status.Error(codes.Unimplemented, "no StreamClaims here")
	}
	f.mu.Lock()
	leases := f.leases
	f.leases = nil
	f.mu.Unlock()
	if err := stream.Send(&lqv1.StreamClaimsResponse{}); err != nil {
		return err
	}
	for _, l := range leases {
		if err := stream.Send(&lqv1.StreamClaimsResponse{Lease: l}); err != nil {
			return err
		}
	}
	// A message each, with no lease.
	f.pushCancels(stream.Context(), func(ids []string) error {
		for _, id := range ids {
			if err := stream.Send(&lqv1.StreamClaimsResponse{CancelledJobId: id}); err != nil {
				return err
			}
		}
		return nil
	})
	return nil
}

// claimSeen is what one Claim asked for.
type claimSeen struct {
	maxJobs int32
	wait    time.Duration
	acks    int
}

// Claim applies the acks (recorded as "claim"), then leases up to max_jobs, long-polling up to wait.
func (f *fakeServer) Claim(ctx context.Context, req *lqv1.ClaimRequest) (*lqv1.ClaimResponse, error) {
	if err := f.refused("Claim"); err != nil {
		return nil, err
	}
	wait := req.GetWait().AsDuration()
	f.mu.Lock()
	f.claims = append(f.claims, claimSeen{req.GetMaxJobs(), wait, len(req.GetAcks())})
	f.notify()
	f.mu.Unlock()
	var results []*lqv1.AcknowledgementResult
	if len(req.GetAcks()) > 0 {
		results = f.record("claim", req.GetAcks())
	}
	if wait > 0 {
		f.mu.Lock()
		f.polling++
		f.notify()
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.polling--
			f.notify()
			f.mu.Unlock()
		}()
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		if n := int(req.GetMaxJobs()); len(f.leases) > 0 {
			if n < 1 {
				n = 1
			}
			if n > len(f.leases) {
				n = len(f.leases)
			}
			leases := f.leases[:n:n]
			f.leases = f.leases[n:]
			f.mu.Unlock()
			return &lqv1.ClaimResponse{Leases: leases, Results: results}, nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return &lqv1.ClaimResponse{Results: results}, nil
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// addLeases gives Claim more work, waking a pending long-poll.
func (f *fakeServer) addLeases(leases ...*lqv1.Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, leases...)
	f.notify()
}

func (f *fakeServer) claimsSeen() []claimSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]claimSeen(nil), f.claims...)
}

func (f *fakeServer) Acknowledge(ctx context.Context, req *lqv1.AcknowledgeRequest) (*lqv1.AcknowledgeResponse, error) {
	return &lqv1.AcknowledgeResponse{Results: f.record("acknowledge", req.GetAcks())}, nil
}

func dial(t *testing.T, f *fakeServer) *grpc.ClientConn {
	t.Helper()
	conn, err := Dial(f.target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func runWorker(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(testTimeout):
			t.Fatal("Run did not return after the context ended")
		}
	}
}

func TestEachOutcomeIsAcknowledgedOnTheWorkStream(t *testing.T) {
	add, boom, never, later, nobody := lease("add", 2.0), lease("boom", nil), lease("never", nil), lease("later", nil), lease("nobody", nil)
	f := newFake(t, true, add, boom, never, later, nobody)
	var events []string
	var mu sync.Mutex
	// No heartbeat falls due while the test runs (a third of an hour), and a
	// progress report waits for the handler's end however slow the machine
	// (progressDelay would send it after a second): the acks on the wire are
	// the same at any pace.
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Concurrency: 8, WorkerID: "unit-1", LeaseDuration: time.Hour,
		OnEvent: func(e Event) { mu.Lock(); events = append(events, e.Kind); mu.Unlock() }})
	w.progressDelay = time.Hour
	w.Handle("add", func(ctx context.Context, job *Job) (any, error) {
		if err := job.Progress(map[string]any{"half": true}); err != nil {
			return nil, err
		}
		return map[string]any{"sum": job.Payload.(float64) + 1}, nil
	})
	w.Handle("boom", func(ctx context.Context, job *Job) (any, error) { return nil, errors.New("it broke") })
	w.Handle("never", func(ctx context.Context, job *Job) (any, error) { return nil, Permanent(errors.New("bad input")) })
	w.Handle("later", func(ctx context.Context, job *Job) (any, error) { return nil, Snooze(1500 * time.Millisecond) })
	stop := runWorker(t, w)
	got := f.outcomes(t, 5)
	stop()

	if s := f.starts[0]; s.GetQueue() != "q" || s.GetWorkerId() != "unit-1" || s.GetMaxInFlight() != 8 || s.GetLeaseDuration().AsDuration() != time.Hour {
		t.Errorf("start = %v", s)
	}
	if v := got[add.Job.Id].GetComplete().GetResult().GetStructValue().GetFields()["sum"].GetNumberValue(); v != 3 {
		t.Errorf("add result = %v", got[add.Job.Id])
	}
	if a := got[boom.Job.Id].GetFail(); a.GetError() != "it broke" || a.GetPermanent() {
		t.Errorf("boom = %v", a)
	}
	if a := got[never.Job.Id].GetFail(); a.GetError() != "bad input" || !a.GetPermanent() {
		t.Errorf("never = %v", a)
	}
	if d := got[later.Job.Id].GetSnooze().GetDelay().AsDuration(); d != 1500*time.Millisecond {
		t.Errorf("later snooze = %s", d)
	}
	if a := got[nobody.Job.Id].GetFail(); !strings.Contains(a.GetError(), `no handler for task "nobody"`) || a.GetPermanent() {
		t.Errorf("nobody = %v", a)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var addKinds []string
	for i, a := range f.acks {
		if f.how[i] != "work" {
			t.Errorf("ack %d went by %s", i, f.how[i])
		}
		if a.GetJobId() == add.Job.Id {
			if a.GetHeartbeat() != nil {
				addKinds = append(addKinds, "heartbeat")
			} else {
				addKinds = append(addKinds, "complete")
			}
		}
	}
	// The last progress goes ahead of the completion.
	if strings.Join(addKinds, ",") != "heartbeat,complete" {
		t.Errorf("acks of add: %v", addKinds)
	}
	// add's heartbeat and completion are queued together, so they share a message at any pace.
	if f.messages >= len(f.acks) {
		t.Errorf("%d messages for %d acknowledgements: not batched", f.messages, len(f.acks))
	}
	mu.Lock()
	defer mu.Unlock()
	if events[len(events)-1] != "stopped" || !strings.Contains(strings.Join(events, ","), "connected") {
		t.Errorf("events = %v", events)
	}
}

func TestFallsBackToStreamClaimsAndAcknowledge(t *testing.T) {
	var leases []*lqv1.Lease
	for i := 0; i < 20; i++ {
		leases = append(leases, lease("t", float64(i)))
	}
	f := newFake(t, false, leases...)
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Concurrency: 20})
	w.Handle("t", func(ctx context.Context, job *Job) (any, error) { return job.Payload, nil })
	stop := runWorker(t, w)
	got := f.outcomes(t, 20)
	stop()
	if len(got) != 20 {
		t.Fatalf("%d outcomes", len(got))
	}
	for i, how := range f.how {
		if how != "acknowledge" {
			t.Errorf("ack %d went by %s", i, how)
		}
	}
}

func TestFallsBackToClaimCarryingTheAcknowledgementsWithoutStreams(t *testing.T) {
	var leases []*lqv1.Lease
	for i := 0; i < 40; i++ {
		leases = append(leases, lease(fmt.Sprint("t", i), float64(i)))
	}
	f := newFake(t, true, leases...)
	f.noStreams = true
	var connected int
	var mu sync.Mutex
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Concurrency: 4,
		OnEvent: func(e Event) {
			mu.Lock()
			if e.Kind == "connected" {
				connected++
			}
			mu.Unlock()
		}})
	for i := 0; i < 40; i++ {
		w.Handle(fmt.Sprint("t", i), func(ctx context.Context, job *Job) (any, error) { return job.Payload, nil })
	}
	lastStarted, lastMayReturn := make(chan struct{}), make(chan struct{})
	w.Handle("t40", func(ctx context.Context, job *Job) (any, error) {
		close(lastStarted)
		<-lastMayReturn
		return job.Payload, nil
	})
	stop := runWorker(t, w)
	got := f.outcomes(t, 40)
	for _, l := range leases {
		if v := got[l.Job.Id].GetComplete().GetResult().GetNumberValue(); v != l.Job.Payload.GetNumberValue() {
			t.Errorf("job %s: result %v", l.Job.Id, got[l.Job.Id])
		}
	}
	f.mu.Lock()
	onClaims := 0
	for i, how := range f.how {
		switch how {
		case "claim":
			onClaims++
		case "acknowledge":
		default:
			t.Errorf("ack %d went by %s", i, how)
		}
	}
	f.mu.Unlock()
	// The queue had work throughout: the outcomes rode the Claims that fetched the next leases.
	if onClaims <= 20 {
		t.Errorf("%d of 40 outcomes rode a Claim", onClaims)
	}
	for _, c := range f.claimsSeen() {
		if c.maxJobs > 4 {
			t.Errorf("a Claim asked for %d leases with 4 slots", c.maxJobs)
		}
		// A Claim carrying acknowledgements never waits: their answers come back at once.
		if c.acks > 0 && c.wait > 0 {
			t.Errorf("a Claim carrying %d acknowledgements waited %s", c.acks, c.wait)
		}
	}

	// Idle: a long-poll is pending; an outcome due then goes by Acknowledge at once
	// (while the long-poll, claimWait long, still waits at the server).
	f.waitFor(t, "a Claim long-polling while idle", func() bool { return f.polling > 0 })
	last := lease("t40", 40.0)
	f.addLeases(last)
	waitClosed(t, lastStarted, "the last job's handler to start")
	// The long-poll that brought the lease has ended: the worker sends the next
	// one while the handler holds its slot, and only then does the handler return.
	f.waitFor(t, "the next Claim long-polling", func() bool { return f.polling > 0 })
	close(lastMayReturn)
	if v := f.outcomes(t, 41)[last.Job.Id].GetComplete().GetResult().GetNumberValue(); v != 40 {
		t.Errorf("the last job's result is %v", v)
	}
	f.mu.Lock()
	if how := f.how[len(f.how)-1]; how != "acknowledge" {
		t.Errorf("the last outcome went by %s", how)
	}
	if got := f.ackedWhilePolling; len(got) == 0 || got[len(got)-1] != last.Job.Id {
		t.Errorf("the last outcome did not arrive while the long-poll was pending: %v", got)
	}
	f.mu.Unlock()
	stop()
	mu.Lock()
	defer mu.Unlock()
	if connected != 1 {
		t.Errorf("connected %d times", connected)
	}
}

func TestAHandlerPastTheDrainTimeoutIsLeftToLeaseExpiry(t *testing.T) {
	slow, quick := lease("slow", nil), lease("quick", nil)
	f := newFake(t, true, slow, quick)
	logs := &recordingLogger{}
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Concurrency: 2, DrainTimeout: 300 * time.Millisecond, Logger: logs})
	running, mayReturn := make(chan struct{}), make(chan struct{})
	cancelled := make(chan bool, 1)
	w.Handle("slow", func(ctx context.Context, job *Job) (any, error) {
		close(running)
		select {
		case <-ctx.Done():
			cancelled <- true
		case <-time.After(testTimeout):
			cancelled <- false
		}
		// Returns only once Run has: Run must not wait for it.
		<-mayReturn
		return "too late", nil
	})
	w.Handle("quick", func(ctx context.Context, job *Job) (any, error) { return "ok", nil })
	stop := runWorker(t, w)
	f.outcomes(t, 1)
	waitClosed(t, running, "the slow handler to start")
	// Run returns while the handler still runs (stop fails the test after testTimeout).
	stop()
	// The handler sends once its context ends, or after testTimeout.
	if !<-cancelled {
		t.Error("the handler's context did not end at the drain timeout")
	}
	close(mayReturn)
	// The worker took the late result and dropped it: nothing was sent for the slow job.
	logs.waitFor(t, "warn finished after the drain timeout: left to lease expiry job_id="+slow.Job.Id)
	f.mu.Lock()
	got := f.outcomesLocked()
	f.mu.Unlock()
	if _, sent := got[slow.Job.Id]; sent || len(got) != 1 {
		t.Errorf("outcomes = %v", got)
	}
}

func TestRunRefusesBadOptionsNamingTheField(t *testing.T) {
	cases := []struct {
		field string
		opts  WorkerOptions
	}{
		{"Queue", WorkerOptions{}},
		{"Queue", WorkerOptions{Queue: "bad queue"}},
		{"Concurrency", WorkerOptions{Queue: "q", Concurrency: 1001}},
		{"Concurrency", WorkerOptions{Queue: "q", Concurrency: -1}},
		{"LeaseDuration", WorkerOptions{Queue: "q", LeaseDuration: time.Millisecond}},
		{"HeartbeatInterval", WorkerOptions{Queue: "q", LeaseDuration: 3 * time.Second, HeartbeatInterval: 3 * time.Second}},
		{"WorkerID", WorkerOptions{Queue: "q", WorkerID: "a b"}},
		{"ReconnectBackoff", WorkerOptions{Queue: "q", ReconnectBackoff: Backoff{Initial: -time.Second}}},
		{"ReconnectBackoff", WorkerOptions{Queue: "q", ReconnectBackoff: Backoff{Initial: time.Minute, Max: time.Second}}},
	}
	for _, c := range cases {
		w := NewWorker(nil, c.opts)
		w.Handle("t", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
		if err := w.Run(context.Background()); err == nil || !strings.HasPrefix(err.Error(), c.field+":") {
			t.Errorf("%s %+v: %v", c.field, c.opts, err)
		}
	}
	if err := NewWorker(nil, WorkerOptions{Queue: "q"}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "register a handler") {
		t.Errorf("no handler: %v", err)
	}
	w := NewWorker(nil, WorkerOptions{Queue: "q"})
	w.Handle("t", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	if err := w.Run(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "conn:") {
		t.Errorf("nil conn: %v", err)
	}
}

func TestTheWorkerIDDefaultsToGoHostPid(t *testing.T) {
	w := NewWorker(nil, WorkerOptions{Queue: "q"})
	w.Handle("t", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
	_ = w.Run(context.Background()) // fills in the defaults, then refuses the nil conn
	host, _ := os.Hostname()
	want := fmt.Sprintf("go-%s-%d", host, os.Getpid())
	if len(want) > 128 {
		want = want[:128]
	}
	if w.opts.WorkerID != want {
		t.Errorf("WorkerID = %q, want %q", w.opts.WorkerID, want)
	}
}

// runRefused runs a worker against a fake that refuses every stream and Claim with code; Run's error and the events.
func runRefused(t *testing.T, code codes.Code, message string) (*fakeServer, error, []Event) {
	t.Helper()
	f := newFake(t, true, lease("t", 1.0))
	f.refuse = status.New(code, message)
	var mu sync.Mutex
	var events []Event
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Logger: LogfmtLogger(io.Discard), ReconnectBackoff: Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		OnEvent: func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}})
	w.Handle("t", func(ctx context.Context, job *Job) (any, error) { return job.Payload, nil })
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		return f, err, append([]Event(nil), events...)
	case <-time.After(testTimeout):
		t.Fatalf("Run did not return on %s", code)
		return nil, nil, nil
	}
}

func kinds(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

func TestRunReturnsARefusalNoRetryCanCure(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument} {
		f, err, events := runRefused(t, code, "start.queue: not for you")
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Code != code || refused.Message != "start.queue: not for you" {
			t.Fatalf("%s: Run returned %v", code, err)
		}
		if status.Code(err) != code || status.Convert(err).Message() != "start.queue: not for you" {
			t.Errorf("%s: status of %v", code, err)
		}
		if want := fmt.Sprintf("leasequeue: the server refused the worker: %s: start.queue: not for you", code); err.Error() != want {
			t.Errorf("%s: %q", code, err.Error())
		}
		if got := fmt.Sprint(f.refusals); got != "[Work]" {
			t.Errorf("%s: refused %s", code, got)
		}
		if got := fmt.Sprint(kinds(events)); got != "[error stopping stopped]" {
			t.Errorf("%s: events %s", code, got)
		}
		if events[0].Code != code.String() || events[0].Message != "start.queue: not for you" {
			t.Errorf("%s: error event %+v", code, events[0])
		}
	}
}

func TestUnimplementedFallsBackPathByPathThenStops(t *testing.T) {
	f, err, events := runRefused(t, codes.Unimplemented, "unknown service")
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Run returned %v", err)
	}
	if got := fmt.Sprint(f.refusals); got != "[Work StreamClaims Claim]" {
		t.Errorf("refused %s", got)
	}
	if got := fmt.Sprint(kinds(events)); got != "[error stopping stopped]" {
		t.Errorf("events %s", got)
	}
}

func TestAPassingFailureIsRetriedUntilTheContextEnds(t *testing.T) {
	for _, refuse := range []*status.Status{
		status.New(codes.Unavailable, "restarting"),
		status.New(codes.Internal, "store failed"),
		// About one acknowledgement, not the worker: sent again, it is refused on its own.
		status.New(codes.InvalidArgument, "acks[0].lease_token: is required"),
	} {
		f := newFake(t, true)
		f.refuse = refuse
		var mu sync.Mutex
		var events []Event
		w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", Logger: LogfmtLogger(io.Discard), ReconnectBackoff: Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
			OnEvent: func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
			}})
		w.Handle("t", func(ctx context.Context, job *Job) (any, error) { return nil, nil })
		stop := runWorker(t, w) // fails the test unless Run returns nil
		f.waitFor(t, "three refused Work streams", func() bool { return len(f.refusals) >= 3 })
		stop()
		mu.Lock()
		got := kinds(events)
		mu.Unlock()
		disconnected := 0
		for _, k := range got {
			if k == "error" {
				t.Errorf("%s: an error event for a passing failure: %v", refuse.Code(), got)
			}
			if k == "disconnected" {
				disconnected++
			}
		}
		if disconnected < 2 || got[len(got)-1] != "stopped" {
			t.Errorf("%s: events %v", refuse.Code(), got)
		}
	}
}

func TestTargetsTokensAndBackoff(t *testing.T) {
	for target, want := range map[string]string{"http://127.0.0.1:8080": "127.0.0.1:8080 false", "https://q.internal:8443": "q.internal:8443 true", "localhost:1": "localhost:1 false"} {
		host, tls, err := ParseTarget(target)
		if err != nil || fmt.Sprintf("%s %v", host, tls) != want {
			t.Errorf("%s: %s %v %v", target, host, tls, err)
		}
	}
	for _, bad := range []string{"", "ftp://x:1", "http://x:1/path"} {
		if _, _, err := ParseTarget(bad); err == nil || !strings.HasPrefix(err.Error(), "target:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	err := CheckToken("lq_secret token")
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "15 characters") {
		t.Errorf("CheckToken: %v", err)
	}
	b := Backoff{}
	if d := b.Delay(0, func() float64 { return 0 }); d != 125*time.Millisecond {
		t.Errorf("first wait %s", d)
	}
	if d := b.Delay(40, func() float64 { return 1 }); d != 30*time.Second {
		t.Errorf("largest wait %s", d)
	}
}

func TestValuesAndErrors(t *testing.T) {
	if jsonDepth([]byte(`1`)) != 0 || jsonDepth([]byte(`[1]`)) != 1 || jsonDepth([]byte(`{"a":[{}],"b":"[[["}`)) != 3 {
		t.Error("jsonDepth counts as the server does")
	}
	if _, err := jsonValue(strings.Repeat("x", 70000), "result", maxJSONBytes); err == nil || !strings.HasPrefix(err.Error(), "result: is 70002 bytes") {
		t.Errorf("size: %v", err)
	}
	type invoice struct {
		ID string `json:"id"`
	}
	v, err := jsonValue(invoice{ID: "inv_1"}, "result", maxJSONBytes)
	if err != nil || v.GetStructValue().GetFields()["id"].GetStringValue() != "inv_1" {
		t.Errorf("struct result: %v %v", v, err)
	}
	var back invoice
	if err := decodeValue(v, &back); err != nil || back.ID != "inv_1" {
		t.Errorf("decode: %v %v", back, err)
	}
	wrapped := fmt.Errorf("charging: %w", Permanent(errors.New("card gone")))
	if !IsPermanent(wrapped) || IsPermanent(errors.New("x")) || Permanent(errors.New("card gone")).Error() != "card gone" {
		t.Error("Permanent")
	}
	if len([]rune(truncate(strings.Repeat("é", 5000)))) != maxTextChars {
		t.Error("truncate")
	}
}
