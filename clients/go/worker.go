package leasequeue

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

// Timings of the worker (not options: they follow from the protocol).
const (
	// ackAnswerTimeout is the deadline of one Acknowledge call, and how long
	// the Work stream may leave an acknowledgement unanswered before the
	// worker takes it for dead and reconnects.
	ackAnswerTimeout = 10 * time.Second
	// finalAckGrace is how long, after the drain timeout, the last outcomes on
	// their way get for their answers.
	finalAckGrace = 5 * time.Second
	// progressDelay: a progress report goes with a heartbeat at most this long after it was made.
	progressDelay = time.Second
	// heartbeatRetry: after a heartbeat fails for a passing reason, the next one goes this soon.
	heartbeatRetry = time.Second
	// resendPause: an outcome that could not be sent goes again after this.
	resendPause = 500 * time.Millisecond
	// claimWait: how long a Claim carrying no acknowledgement waits for work on
	// the unary path (the server allows 60s).
	claimWait = 20 * time.Second
)

// Worker runs handlers for the jobs of one queue. Make it with NewWorker,
// register handlers with Handle, then Run.
type Worker struct {
	service  lqv1.LeaseQueueServiceClient
	opts     WorkerOptions
	handlers map[string]HandlerFunc

	// progressDelay is the constant progressDelay, kept in a field that the
	// package's tests set (a test sees the same acknowledgements at any pace
	// when no heartbeat takes a progress report before its handler returns).
	progressDelay time.Duration

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	timerWake  chan struct{} // a heartbeat is due sooner
	events     []Event       // emitted once the lock is released
	held       map[string]*held
	waiting    []*held
	running    int
	outbox     []*pending
	stream     *workStream        // the Work stream that takes acknowledgements
	current    *workStream        // the Work stream open now
	claims     context.CancelFunc // cancels the StreamClaims stream, or the Claim long-poll pending
	claimState int
	stopping   bool
	closed     bool
	started    bool
	stopCh     chan struct{}
	loopDone   chan struct{}
	refusedCh  chan struct{} // closed once failure is set
	failure    *RefusedError // the refusal the worker stopped on, if any
	noConn     bool          // NewWorker was given a nil connection
}

// NewWorker makes a worker on a connection from Dial. Run checks the options
// (and conn) before it connects, and returns an error naming the one it
// cannot use: a required one missing (Queue), one out of range.
func NewWorker(conn grpc.ClientConnInterface, opts WorkerOptions) *Worker {
	return &Worker{
		service:       lqv1.NewLeaseQueueServiceClient(conn),
		opts:          opts,
		handlers:      map[string]HandlerFunc{},
		progressDelay: progressDelay,
		changed:       make(chan struct{}),
		timerWake:     make(chan struct{}, 1),
		held:          map[string]*held{},
		stopCh:        make(chan struct{}),
		loopDone:      make(chan struct{}),
		refusedCh:     make(chan struct{}),
		noConn:        conn == nil,
	}
}

// Handle registers fn as the handler of task. A job whose task has no
// handler fails (retried, in case another worker of the queue has one).
func (w *Worker) Handle(task string, fn HandlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[task] = fn
}

// Run works until ctx ends, then stops taking work, waits up to DrainTimeout
// for running handlers and their acknowledgements, and returns nil. It
// returns an error naming the option at once, before connecting, for invalid
// options (and when no handler is registered). When the server refuses the
// worker in a way no retry can cure (InvalidArgument, Unauthenticated,
// PermissionDenied, Unimplemented), it stops and drains the same way and
// returns a *RefusedError; any other failure is retried with backoff. A
// Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	started := w.started
	w.started = true
	w.mu.Unlock()
	if started {
		return errors.New("Run: a Worker runs once")
	}
	if err := w.checkOptions(); err != nil {
		return err
	}
	if w.noConn {
		return errors.New("conn: NewWorker was given a nil connection; give one from Dial")
	}
	w.logInfo("worker starting", "concurrency", w.opts.Concurrency, "lease", w.opts.LeaseDuration)
	go w.connectLoop()
	go w.sendUnary()
	go w.tick()
	select {
	case <-ctx.Done():
	case <-w.refusedCh:
	}
	w.stop()
	w.drain()
	w.mu.Lock()
	w.closed = true
	w.notify()
	w.unlock()
	w.pokeTimer()
	w.logInfo("stopped")
	w.emit(Event{Kind: "stopped"})
	w.mu.Lock()
	failure := w.failure
	w.mu.Unlock()
	if failure != nil {
		return failure
	}
	return nil
}

func (w *Worker) emit(e Event) {
	if w.opts.OnEvent == nil {
		return
	}
	defer func() { _ = recover() }() // an observer's bug must not stop the worker
	w.opts.OnEvent(e)
}

// emitLocked queues an event for unlock (w.mu held).
func (w *Worker) emitLocked(e Event) {
	if w.opts.OnEvent != nil {
		w.events = append(w.events, e)
	}
}

// unlock releases w.mu, then emits the events queued meanwhile.
func (w *Worker) unlock() {
	events := w.events
	w.events = nil
	w.mu.Unlock()
	for _, e := range events {
		w.emit(e)
	}
}

// notify wakes everything waiting for a change (w.mu held).
func (w *Worker) notify() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// waitChange waits for a change or the deadline (w.mu held; released while waiting).
func (w *Worker) waitChange(deadline time.Time) {
	ch := w.changed
	w.mu.Unlock()
	if deadline.IsZero() {
		<-ch
	} else if d := time.Until(deadline); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
	w.mu.Lock()
}

func (w *Worker) pokeTimer() {
	select {
	case w.timerWake <- struct{}{}:
	default:
	}
}

func (w *Worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}
