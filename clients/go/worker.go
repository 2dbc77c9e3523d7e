package leasequeue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

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
)

var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
	workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,128}$`)
	errServerEnded  = errors.New("the server ended the stream")
)

// Logger is where the worker writes what it does; *log.Logger is one.
type Logger interface {
	Printf(format string, v ...any)
}

// Event is what the worker reports to WorkerOptions.OnEvent, for metrics,
// tests and logs of your own. Kind is one of connected, disconnected,
// refused (the server refused the worker's token: Code says how), lease,
// completed, failed, snoozed, released, lease-lost, abandoned (left to lease
// expiry at the drain timeout), stopping, stopped.
type Event struct {
	Kind    string
	JobID   string
	Task    string
	Message string
	Code    string
	RetryIn time.Duration // of disconnected and refused: the reconnect delay
}

// HandlerFunc runs one job. Its result (anything encoding/json marshals, at
// most 64 KiB) becomes the job's result; an error fails the attempt with its
// text (retried with backoff while attempts remain); an error from Permanent
// dead-letters the job at once; one from Snooze queues it again with the
// attempt refunded. ctx ends when the worker no longer owns the job (the
// lease was lost, or the drain timeout passed): stop, another worker may run
// it, and whatever the handler returns is dropped.
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// WorkerOptions configure NewWorker. Zero values take the defaults written on each field.
type WorkerOptions struct {
	Queue             string        // required
	Concurrency       int           // handlers at once (1..1000), the stream's max_in_flight; default 1
	WorkerID          string        // names the worker in leases and events; default go-<host>-<pid>
	LeaseDuration     time.Duration // 1s..12h; default 60s
	HeartbeatInterval time.Duration // default a third of LeaseDuration
	// DrainTimeout is how long Run waits for running handlers once ctx ends;
	// those still running then are left to lease expiry, never acknowledged.
	// Default 30s; negative: no wait.
	DrainTimeout     time.Duration
	ReconnectBackoff Backoff       // default 250ms doubling to 30s, jittered
	AckBatchWindow   time.Duration // how long an acknowledgement waits for others to share its message; default 1ms, negative: none
	Logger           Logger        // default log.Default()
	LogJobs          bool          // also log each job's outcome; default: only connections, stops and problems
	OnEvent          func(Event)   // called for each Event (from the worker's goroutines)
}

// Job is a job this worker holds a lease on: what a handler gets.
type Job struct {
	ID          string
	Queue       string
	Task        string
	Payload     any // the JSON payload as encoding/json decodes it into an any
	Attempts    int32
	MaxAttempts int32
	Deliveries  int32
	Priority    int32
	LeaseToken  string    // e.g. as a fencing token downstream; never log it
	Proto       *lqv1.Job // everything else the server sent
	held        *held
}

// Decode unmarshals the payload into dst, as encoding/json would the same JSON.
func (j *Job) Decode(dst any) error { return decodeValue(j.Proto.GetPayload(), dst) }

// Progress stores v (JSON, at most 4 KiB) as the job's progress, sent with
// the next heartbeat within a second; reports made in between replace each
// other, and the last one before the handler returns is sent ahead of its
// outcome. It returns at once; an error means the server would refuse v.
func (j *Job) Progress(v any) error {
	value, err := jsonValue(v, "progress", maxProgressBytes)
	if err != nil {
		return err
	}
	j.held.worker.reportProgress(j.held, value)
	return nil
}

type leaseState int

// The states of a lease, as the package documentation of worker states:
//
//	waiting --start--> running --handler returns--> finishing --answered--> done
//	   |                  |                            |
//	   +------------------+-----lease refused----------+--> lost (nothing is sent for it)
//	                      +-----drain timeout------------> abandoned (left to lease expiry)
const (
	stateWaiting leaseState = iota
	stateRunning
	stateFinishing
	stateDone
	stateLost
	stateAbandoned
)

type held struct {
	worker       *Worker
	token        string
	job          *Job
	ctx          context.Context
	cancel       context.CancelFunc
	state        leaseState
	expiresAt    time.Time // the local deadline: errs early
	nextBeat     time.Time
	beatInFlight bool
	progress     *structpb.Value // not yet carried by a heartbeat the server took
}

// pending is one acknowledgement on its way: queued, sent, until answered.
type pending struct {
	kind     string // complete, fail, snooze, release, heartbeat
	h        *held
	ack      *lqv1.Acknowledgement
	progress *structpb.Value
	queuedAt time.Time
	sentAt   time.Time
	resent   bool // an earlier send got no answer: it may have been applied
	note     string
}

// workStream is the worker's side of one Work stream.
type workStream struct {
	awaiting  []*pending // sent, waiting for results, in order
	ended     bool       // no more messages go on it
	cancelled bool       // by the watchdog
	cancel    context.CancelFunc
}

// Worker runs handlers for the jobs of one queue. Make it with NewWorker,
// register handlers with Handle, then Run.
type Worker struct {
	service  lqv1.LeaseQueueServiceClient
	opts     WorkerOptions
	handlers map[string]HandlerFunc

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	timerWake chan struct{} // a heartbeat is due sooner
	events    []Event       // emitted once the lock is released
	held      map[string]*held
	waiting   []*held
	running   int
	outbox    []*pending
	stream    *workStream // the Work stream that takes acknowledgements
	current   *workStream // the Work stream open now
	claims    context.CancelFunc
	stopping  bool
	closed    bool
	started   bool
	stopCh    chan struct{}
	loopDone  chan struct{}
}

// NewWorker makes a worker on a connection from Dial. Options are checked by Run.
func NewWorker(conn grpc.ClientConnInterface, opts WorkerOptions) *Worker {
	return &Worker{
		service:   lqv1.NewLeaseQueueServiceClient(conn),
		opts:      opts,
		handlers:  map[string]HandlerFunc{},
		changed:   make(chan struct{}),
		timerWake: make(chan struct{}, 1),
		held:      map[string]*held{},
		stopCh:    make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
}

// Handle registers fn as the handler of task. A job whose task has no
// handler fails (retried, in case another worker of the queue has one).
func (w *Worker) Handle(task string, fn HandlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[task] = fn
}

func (w *Worker) checkOptions() error {
	o := &w.opts
	if !namePattern.MatchString(o.Queue) {
		return fmt.Errorf("Queue: %q must match %s", o.Queue, namePattern)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Concurrency < 1 || o.Concurrency > 1000 {
		return fmt.Errorf("Concurrency: must be within 1..1000, got %d", o.Concurrency)
	}
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("go-%s-%d", host, os.Getpid())
		if len(o.WorkerID) > 128 {
			o.WorkerID = o.WorkerID[:128]
		}
	}
	if !workerIDPattern.MatchString(o.WorkerID) {
		return errors.New("WorkerID: must be 1-128 characters of [A-Za-z0-9._:@/-]")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 60 * time.Second
	}
	if o.LeaseDuration < time.Second || o.LeaseDuration > 12*time.Hour {
		return fmt.Errorf("LeaseDuration: must be within 1s..12h, got %s", o.LeaseDuration)
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = o.LeaseDuration / 3
	}
	if o.HeartbeatInterval <= 0 || o.HeartbeatInterval >= o.LeaseDuration {
		return errors.New("HeartbeatInterval: must be > 0 and shorter than LeaseDuration")
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.DrainTimeout < 0 {
		o.DrainTimeout = 0
	}
	if o.AckBatchWindow == 0 {
		o.AckBatchWindow = time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = log.Default()
	}
	if len(w.handlers) == 0 {
		return errors.New("Run: register a handler first (Handle)")
	}
	return nil
}

// Run works until ctx ends, then stops taking work, waits up to DrainTimeout
// for running handlers and their acknowledgements, and returns nil. It
// returns an error at once for invalid options. A Worker runs once.
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
	w.logf("worker %s: queue %s, concurrency %d, lease %s", w.opts.WorkerID, w.opts.Queue, w.opts.Concurrency, w.opts.LeaseDuration)
	go w.connectLoop()
	go w.sendUnary()
	go w.tick()
	<-ctx.Done()
	w.stop()
	w.drain()
	w.mu.Lock()
	w.closed = true
	w.notify()
	w.unlock()
	w.pokeTimer()
	w.logf("stopped")
	w.emit(Event{Kind: "stopped"})
	return nil
}

func (w *Worker) logf(format string, args ...any) {
	w.opts.Logger.Printf("leasequeue: "+format, args...)
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

// stop stops taking work: the Work stream half-closes once what is queued is
// sent, unstarted leases go back with Release.
func (w *Worker) stop() {
	w.mu.Lock()
	if w.stopping {
		w.unlock()
		return
	}
	w.stopping = true
	close(w.stopCh)
	for _, h := range w.waiting {
		if h.state == stateWaiting {
			w.queueOutcome(h, "release", &lqv1.Acknowledgement{JobId: h.job.ID, LeaseToken: h.token, Outcome: &lqv1.Acknowledgement_Release{Release: &lqv1.AckRelease{}}}, "")
		}
	}
	w.waiting = nil
	running, claims := w.running, w.claims
	w.emitLocked(Event{Kind: "stopping"})
	w.notify()
	w.unlock()
	w.logf("stopping: taking no new work, finishing %d running job(s)", running)
	if claims != nil {
		claims()
	}
}

// ---------------------------------------------------------------------------
// The stream.

func (w *Worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

func (w *Worker) connectLoop() {
	defer close(w.loopDone)
	failures, useWork := 0, true
	connected := func() {
		failures = 0
		path := "Work"
		if !useWork {
			path = "StreamClaims and Acknowledge"
		}
		w.logf("connected (%s)", path)
		w.emit(Event{Kind: "connected"})
	}
	for !w.isStopping() {
		var err error
		if useWork {
			err = w.workOnce(connected)
		} else {
			err = w.claimsOnce(connected)
		}
		if w.isStopping() {
			return
		}
		code := status.Code(err)
		if useWork && code == codes.Unimplemented {
			w.logf("the server has no Work stream: using StreamClaims and Acknowledge")
			useWork = false
			continue
		}
		delay := w.opts.ReconnectBackoff.Delay(failures, nil)
		failures++
		why := errServerEnded.Error()
		if err != nil && err != errServerEnded {
			why = fmt.Sprintf("%s %s", code, status.Convert(err).Message())
		}
		if code == codes.Unauthenticated || code == codes.PermissionDenied {
			advice := "give the worker a token (WithToken) that is in the server's LEASEQUEUE_AUTH_FILE"
			if code == codes.PermissionDenied {
				advice = "the token's entry needs the role worker and, if it lists queues, " + w.opts.Queue
			}
			w.logf("the server refused the worker: %s; %s; trying again in %s", why, advice, delay.Round(time.Millisecond))
			w.emit(Event{Kind: "refused", Message: why, Code: code.String(), RetryIn: delay})
		} else {
			w.logf("stream broke: %s; reconnecting in %s", why, delay.Round(time.Millisecond))
			w.emit(Event{Kind: "disconnected", Message: why, Code: code.String(), RetryIn: delay})
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.stopCh:
		}
		t.Stop()
	}
}

// workOnce runs one Work stream to its end.
func (w *Worker) workOnce(connected func()) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := w.service.Work(ctx)
	if err != nil {
		return err
	}
	side := &workStream{cancel: cancel}
	w.mu.Lock()
	w.current = side
	w.mu.Unlock()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		w.sendOn(side, stream)
	}()
	var result error
	why := "the Work stream ended"
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err != nil {
			if err != io.EOF {
				result = err
				why = fmt.Sprintf("the Work stream broke: %s %s", status.Code(err), status.Convert(err).Message())
			} else if !w.isStopping() {
				result = errServerEnded
			}
			break
		}
		if first {
			w.mu.Lock()
			if !w.stopping {
				w.stream = side
			}
			w.notify()
			w.mu.Unlock()
			connected()
		}
		if err := w.takeResults(side, msg.GetResults()); err != nil {
			result, why = err, err.Error()
			break
		}
		for _, lease := range msg.GetLeases() {
			w.accept(lease)
		}
	}
	cancel()
	w.failStream(side, why)
	<-sent
	return result
}

// sendOn is the only goroutine sending on stream: start, then batches of
// acknowledgements; it half-closes once stopping and everything queued went out.
func (w *Worker) sendOn(side *workStream, stream lqv1.LeaseQueueService_WorkClient) {
	start := &lqv1.WorkRequest{Start: &lqv1.WorkStart{
		Queue:         w.opts.Queue,
		WorkerId:      w.opts.WorkerID,
		LeaseDuration: durationpb.New(w.opts.LeaseDuration),
		MaxInFlight:   int32(w.opts.Concurrency),
	}}
	if err := stream.Send(start); err != nil {
		return // Recv reports why
	}
	for {
		w.mu.Lock()
		for {
			if side.ended {
				w.mu.Unlock()
				return
			}
			if w.stream == side && len(w.outbox) > 0 {
				break
			}
			if w.stopping {
				// Everything queued went out: the server answers it and ends the stream.
				if w.stream == side {
					w.stream = nil
					w.notify()
				}
				side.ended = true
				w.mu.Unlock()
				_ = stream.CloseSend()
				return
			}
			w.waitChange(time.Time{})
		}
		w.mu.Unlock()
		batch := w.takeAfterWindow(func() bool { return w.stream == side }, func(batch []*pending) {
			now := time.Now()
			for _, p := range batch {
				p.sentAt = now
			}
			side.awaiting = append(side.awaiting, batch...)
		})
		if batch == nil {
			continue
		}
		if err := stream.Send(&lqv1.WorkRequest{Acks: acksOf(batch)}); err != nil {
			return // Recv reports why; failStream sends the batch again
		}
	}
}

func (w *Worker) takeResults(side *workStream, results []*lqv1.AcknowledgementResult) error {
	for _, r := range results {
		w.mu.Lock()
		var p *pending
		if len(side.awaiting) > 0 {
			p = side.awaiting[0]
			side.awaiting[0] = nil
			side.awaiting = side.awaiting[1:]
		}
		w.mu.Unlock()
		if p == nil || p.ack.GetJobId() != r.GetJobId() {
			due := "no acknowledgement"
			if p != nil {
				due = "job " + p.ack.GetJobId()
			}
			return status.Errorf(codes.Internal, "the Work stream answered job %s where %s was due", r.GetJobId(), due)
		}
		w.settle(p, r.GetStatus())
	}
	return nil
}

// failStream ends a stream: every unanswered acknowledgement may or may not have been applied.
func (w *Worker) failStream(side *workStream, why string) {
	w.mu.Lock()
	side.ended = true
	if w.stream == side {
		w.stream = nil
	}
	if w.current == side {
		w.current = nil
	}
	unanswered := side.awaiting
	side.awaiting = nil
	w.notify()
	w.mu.Unlock()
	for _, p := range unanswered {
		w.unanswered(p, why)
	}
}

// claimsOnce runs one StreamClaims stream (a server without Work): leases
// down; acknowledgements go by Acknowledge.
func (w *Worker) claimsOnce(connected func()) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		return nil
	}
	w.claims = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.claims = nil
		w.mu.Unlock()
	}()
	stream, err := w.service.StreamClaims(ctx, &lqv1.StreamClaimsRequest{
		Queue:         w.opts.Queue,
		WorkerId:      w.opts.WorkerID,
		LeaseDuration: durationpb.New(w.opts.LeaseDuration),
		MaxInFlight:   int32(w.opts.Concurrency),
	})
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err == io.EOF {
			return errServerEnded
		}
		if err != nil {
			return err
		}
		if first {
			connected()
		}
		if lease := msg.GetLease(); lease != nil {
			w.accept(lease)
		}
	}
}

// ---------------------------------------------------------------------------
// Leases and handlers.

func (w *Worker) accept(lease *lqv1.Lease) {
	j := lease.GetJob()
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	h := &held{worker: w, token: lease.GetLeaseToken(), ctx: ctx, cancel: cancel, state: stateWaiting,
		expiresAt: now.Add(w.opts.LeaseDuration), nextBeat: now.Add(w.opts.HeartbeatInterval)}
	h.job = &Job{ID: j.GetId(), Queue: j.GetQueue(), Task: j.GetTask(), Payload: valueOf(j.GetPayload()),
		Attempts: j.GetAttempts(), MaxAttempts: j.GetMaxAttempts(), Deliveries: j.GetDeliveries(), Priority: j.GetPriority(),
		LeaseToken: lease.GetLeaseToken(), Proto: j, held: h}
	w.mu.Lock()
	w.emitLocked(Event{Kind: "lease", JobID: h.job.ID, Task: h.job.Task})
	w.held[h.token] = h
	if w.stopping {
		// Pushed before the server saw the half-close: give it back, attempt refunded.
		w.queueOutcome(h, "release", &lqv1.Acknowledgement{JobId: h.job.ID, LeaseToken: h.token, Outcome: &lqv1.Acknowledgement_Release{Release: &lqv1.AckRelease{}}}, "")
	} else {
		w.waiting = append(w.waiting, h)
		w.startWaiting()
	}
	w.unlock()
	w.pokeTimer()
}

// startWaiting starts waiting leases while fewer than Concurrency handlers run (w.mu held).
func (w *Worker) startWaiting() {
	for w.running < w.opts.Concurrency && len(w.waiting) > 0 && !w.stopping {
		h := w.waiting[0]
		w.waiting[0] = nil
		w.waiting = w.waiting[1:]
		if h.state != stateWaiting {
			continue
		}
		h.state = stateRunning
		w.running++
		fn := w.handlers[h.job.Task]
		go w.runHandler(h, fn)
	}
}

func (w *Worker) runHandler(h *held, fn HandlerFunc) {
	var result any
	var err error
	if fn == nil {
		err = fmt.Errorf("no handler for task %q on worker %s", h.job.Task, w.opts.WorkerID)
	} else {
		result, err = callHandler(fn, h)
	}
	w.returned(h, result, err)
}

// callHandler runs fn, turning a panic into an error (retried).
func callHandler(fn HandlerFunc, h *held) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(h.ctx, h.job)
}

// returned queues the outcome of a handler, unless the lease is no longer ours.
func (w *Worker) returned(h *held, result any, err error) {
	ack := &lqv1.Acknowledgement{JobId: h.job.ID, LeaseToken: h.token}
	kind, note := "complete", ""
	var snooze *SnoozeError
	switch {
	case errors.As(err, &snooze):
		kind, note = "snooze", snooze.Delay.String()
		ack.Outcome = &lqv1.Acknowledgement_Snooze{Snooze: &lqv1.AckSnooze{Delay: durationpb.New(snooze.Delay)}}
	case err == nil:
		complete := &lqv1.AckComplete{}
		if result != nil {
			value, verr := jsonValue(result, "result", maxJSONBytes)
			if verr != nil {
				w.logf("job %s: the worker refused the result: %v", h.job.ID, verr)
				err = fmt.Errorf("the worker refused the result: %v", verr)
			}
			complete.Result = value
		}
		if err == nil {
			ack.Outcome = &lqv1.Acknowledgement_Complete{Complete: complete}
		}
	}
	if err != nil && kind != "snooze" {
		kind = "fail"
		text := err.Error()
		if text == "" {
			text = fmt.Sprintf("%T", err)
		}
		permanent := IsPermanent(err)
		fail := &lqv1.AckFail{Error: truncate(text), Permanent: permanent}
		ack.Outcome = &lqv1.Acknowledgement_Fail{Fail: fail}
		switch {
		case permanent:
			note = "permanent: " + fail.Error
		case h.job.Attempts >= h.job.MaxAttempts:
			note = "dead: " + fail.Error
		default:
			note = "retry: " + fail.Error
		}
	}
	w.mu.Lock()
	w.running--
	switch h.state {
	case stateRunning:
		if h.progress != nil && !h.beatInFlight {
			w.queueHeartbeat(h) // the last progress, applied before the outcome
		}
		w.queueOutcome(h, kind, ack, note)
	case stateLost:
		w.logf("job %s: lease lost; its outcome is not reported", h.job.ID)
	default:
		w.logf("job %s: finished after the drain timeout; left to lease expiry", h.job.ID)
	}
	w.startWaiting()
	w.notify()
	w.unlock()
}

// queueOutcome queues Complete, Fail, Snooze or Release (w.mu held).
func (w *Worker) queueOutcome(h *held, kind string, ack *lqv1.Acknowledgement, note string) {
	h.state = stateFinishing
	w.outbox = append(w.outbox, &pending{kind: kind, h: h, ack: ack, queuedAt: time.Now(), note: note})
	w.notify()
}

// queueHeartbeat queues a heartbeat carrying any progress not yet sent (w.mu held).
func (w *Worker) queueHeartbeat(h *held) {
	beat := &lqv1.AckHeartbeat{LeaseDuration: durationpb.New(w.opts.LeaseDuration), Progress: h.progress}
	p := &pending{kind: "heartbeat", h: h, progress: h.progress, queuedAt: time.Now(),
		ack: &lqv1.Acknowledgement{JobId: h.job.ID, LeaseToken: h.token, Outcome: &lqv1.Acknowledgement_Heartbeat{Heartbeat: beat}}}
	h.progress = nil
	h.beatInFlight = true
	w.outbox = append(w.outbox, p)
	w.notify()
}

func (w *Worker) reportProgress(h *held, value *structpb.Value) {
	w.mu.Lock()
	if h.state == stateRunning {
		h.progress = value
		if soon := time.Now().Add(progressDelay); soon.Before(h.nextBeat) {
			h.nextBeat = soon
		}
	}
	w.mu.Unlock()
	w.pokeTimer()
}

// lose: the lease is gone; tell the handler, send nothing more for it (w.mu held).
func (w *Worker) lose(h *held, reason, detail string) {
	if h.state == stateLost || h.state == stateDone || h.state == stateAbandoned {
		return
	}
	h.state = stateLost
	delete(w.held, h.token)
	h.cancel()
	w.notify()
	w.logf("job %s: lease lost (%s): %s", h.job.ID, reason, detail)
	w.emitLocked(Event{Kind: "lease-lost", JobID: h.job.ID, Task: h.job.Task, Message: detail, Code: reason})
}

func (w *Worker) done(h *held) {
	w.mu.Lock()
	if h.state == stateFinishing {
		h.state = stateDone
	}
	delete(w.held, h.token)
	h.cancel()
	w.notify()
	w.mu.Unlock()
}

// ---------------------------------------------------------------------------
// Acknowledgements.

func (w *Worker) takeBatch() []*pending {
	n := len(w.outbox)
	if n > maxAcks {
		n = maxAcks
	}
	batch := append([]*pending(nil), w.outbox[:n]...)
	w.outbox = append(w.outbox[:0:0], w.outbox[n:]...)
	return batch
}

// takeAfterWindow lets the acknowledgements queued meanwhile join a batch
// (AckBatchWindow, unless a full batch waits already), then takes one if
// mine() still says this sender owns the outbox; taken runs with it, both
// under w.mu, so that a batch is always either queued or on its way. nil when
// there is nothing to send.
func (w *Worker) takeAfterWindow(mine func() bool, taken func([]*pending)) []*pending {
	w.mu.Lock()
	small := len(w.outbox) < maxAcks
	w.mu.Unlock()
	if small && w.opts.AckBatchWindow > 0 {
		time.Sleep(w.opts.AckBatchWindow)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !mine() || len(w.outbox) == 0 {
		return nil
	}
	batch := w.takeBatch()
	if taken != nil {
		taken(batch)
	}
	return batch
}

func acksOf(batch []*pending) []*lqv1.Acknowledgement {
	acks := make([]*lqv1.Acknowledgement, len(batch))
	for i, p := range batch {
		acks[i] = p.ack
	}
	return acks
}

// sendUnary sends queued acknowledgements with Acknowledge while no Work stream takes them.
func (w *Worker) sendUnary() {
	for {
		w.mu.Lock()
		for !w.closed && !(len(w.outbox) > 0 && w.stream == nil) {
			w.waitChange(time.Time{})
		}
		if w.closed {
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		batch := w.takeAfterWindow(func() bool { return w.stream == nil }, nil)
		if batch == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ackAnswerTimeout)
		res, err := w.service.Acknowledge(ctx, &lqv1.AcknowledgeRequest{Acks: acksOf(batch)})
		cancel()
		if err == nil && len(res.GetResults()) != len(batch) {
			err = status.Errorf(codes.Internal, "Acknowledge answered %d of %d acknowledgements", len(res.GetResults()), len(batch))
		}
		if err != nil {
			why := fmt.Sprintf("Acknowledge failed: %s %s", status.Code(err), status.Convert(err).Message())
			w.logf("%s; will retry %d acknowledgement(s) while their leases hold", why, len(batch))
			for _, p := range batch {
				w.unanswered(p, why)
			}
			time.Sleep(resendPause)
			continue
		}
		for i, p := range batch {
			w.settle(p, res.GetResults()[i].GetStatus())
		}
	}
}

// unanswered: no answer came for p, which may have been applied. Outcomes go
// again while their lease may hold.
func (w *Worker) unanswered(p *pending, why string) {
	h := p.h
	w.mu.Lock()
	if p.kind == "heartbeat" {
		h.beatInFlight = false
		if h.progress == nil {
			h.progress = p.progress
		}
		h.nextBeat = time.Now().Add(heartbeatRetry)
		w.mu.Unlock()
		w.pokeTimer()
		return
	}
	if h.state != stateFinishing {
		w.mu.Unlock()
		return
	}
	if time.Now().Before(h.expiresAt) && !w.closed {
		p.resent = true
		w.outbox = append([]*pending{p}, w.outbox...)
		w.notify()
		w.mu.Unlock()
		return
	}
	h.state = stateAbandoned
	delete(w.held, h.token)
	w.notify()
	w.emitLocked(Event{Kind: "abandoned", JobID: h.job.ID, Task: h.job.Task, Message: why})
	w.unlock()
	w.logf("job %s: %s not acknowledged (%s): left to lease expiry", h.job.ID, p.kind, why)
}

func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return st.Code().String()
}

// settle acts on the answer to one acknowledgement, from the stream or from Acknowledge.
func (w *Worker) settle(p *pending, answer *spb.Status) {
	st := status.FromProto(answer)
	code := st.Code()
	h := p.h
	if p.kind == "heartbeat" {
		w.mu.Lock()
		h.beatInFlight = false
		now := time.Now()
		if code == codes.OK {
			h.expiresAt = p.queuedAt.Add(w.opts.LeaseDuration)
			next := w.opts.HeartbeatInterval
			if h.progress != nil && next > progressDelay {
				next = progressDelay
			}
			h.nextBeat = now.Add(next)
			w.mu.Unlock()
			w.pokeTimer()
			return
		}
		if h.progress == nil {
			h.progress = p.progress
		}
		if h.state != stateWaiting && h.state != stateRunning {
			w.mu.Unlock() // finishing: the outcome's answer decides
			return
		}
		if code == codes.Aborted || code == codes.NotFound {
			w.lose(h, reasonOf(st), "the server refused the heartbeat: "+st.Message())
			w.unlock()
			return
		}
		next := w.opts.HeartbeatInterval
		if next > heartbeatRetry {
			next = heartbeatRetry
		}
		h.nextBeat = now.Add(next)
		w.mu.Unlock()
		w.pokeTimer()
		w.logf("job %s: heartbeat failed, will retry: %s %s", h.job.ID, code, st.Message())
		return
	}
	switch {
	case code == codes.OK:
		w.done(h)
		w.reportDone(p, "")
	case (code == codes.Aborted || code == codes.NotFound) && p.resent:
		// The first send may have been applied: then this refusal is its echo.
		go w.checkApplied(p, st)
	case code == codes.Aborted || code == codes.NotFound:
		w.mu.Lock()
		w.lose(h, reasonOf(st), fmt.Sprintf("the server refused the %s: %s", p.kind, st.Message()))
		w.unlock()
	case p.kind == "complete" && code == codes.InvalidArgument:
		w.logf("job %s: the server refused the result: %s", h.job.ID, st.Message())
		text := truncate("the server refused the result: " + st.Message())
		ack := &lqv1.Acknowledgement{JobId: h.job.ID, LeaseToken: h.token, Outcome: &lqv1.Acknowledgement_Fail{Fail: &lqv1.AckFail{Error: text}}}
		w.mu.Lock()
		w.queueOutcome(h, "fail", ack, "retry: "+text)
		w.mu.Unlock()
	default:
		w.unanswered(p, fmt.Sprintf("%s %s", code, st.Message()))
	}
}

// checkApplied reads the job after a resent outcome was refused, to tell an
// earlier send that was applied from a lost lease.
func (w *Worker) checkApplied(p *pending, refusal *status.Status) {
	h := p.h
	ctx, cancel := context.WithTimeout(context.Background(), ackAnswerTimeout)
	res, err := w.service.GetJob(ctx, &lqv1.GetJobRequest{JobId: h.job.ID})
	cancel()
	expected := map[string][]lqv1.JobState{
		"complete": {lqv1.JobState_JOB_STATE_COMPLETED},
		"fail":     {lqv1.JobState_JOB_STATE_RETRY, lqv1.JobState_JOB_STATE_DEAD},
		"snooze":   {lqv1.JobState_JOB_STATE_QUEUED},
		"release":  {lqv1.JobState_JOB_STATE_QUEUED, lqv1.JobState_JOB_STATE_RETRY},
	}[p.kind]
	if err == nil && res.GetJob().GetDeliveries() == h.job.Deliveries {
		for _, s := range expected {
			if res.GetJob().GetState() == s {
				w.done(h)
				w.reportDone(p, " (applied by an earlier send)")
				return
			}
		}
	}
	w.mu.Lock()
	w.lose(h, reasonOf(refusal), fmt.Sprintf("the server refused the %s: %s", p.kind, refusal.Message()))
	w.unlock()
	w.done(h)
}

func (w *Worker) reportDone(p *pending, how string) {
	kind := map[string]string{"complete": "completed", "fail": "failed", "snooze": "snoozed", "release": "released"}[p.kind]
	note := ""
	if p.note != "" {
		note = " (" + p.note + ")"
	}
	if w.opts.LogJobs {
		w.logf("%s job %s%s%s", kind, p.h.job.ID, note, how)
	}
	w.emit(Event{Kind: kind, JobID: p.h.job.ID, Task: p.h.job.Task, Message: p.note})
}

// ---------------------------------------------------------------------------
// Timers and the drain.

// tick sends heartbeats when due, enforces local lease deadlines, and runs
// the Work stream's watchdog.
func (w *Worker) tick() {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		now := time.Now()
		wake := now.Add(time.Second)
		for _, h := range w.held {
			if (h.state == stateWaiting || h.state == stateRunning) && !now.Before(h.expiresAt) {
				w.lose(h, "EXPIRED_LOCALLY", fmt.Sprintf("no heartbeat succeeded within the lease duration of %s", w.opts.LeaseDuration))
				continue
			}
			if h.beatInFlight || !now.Before(h.expiresAt) {
				continue
			}
			if !now.Before(h.nextBeat) {
				w.queueHeartbeat(h)
				continue
			}
			if h.nextBeat.Before(wake) {
				wake = h.nextBeat
			}
			if h.expiresAt.Before(wake) {
				wake = h.expiresAt
			}
		}
		side := w.current
		stale := side != nil && !side.cancelled && len(side.awaiting) > 0 && now.Sub(side.awaiting[0].sentAt) > ackAnswerTimeout
		if stale {
			side.cancelled = true
		}
		w.unlock()
		if stale {
			w.logf("the Work stream left an acknowledgement unanswered for %s: reconnecting", ackAnswerTimeout)
			side.cancel()
			continue
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-t.C:
		case <-w.timerWake:
		}
		t.Stop()
	}
}

// drain waits for live leases up to DrainTimeout, leaves the handlers still
// running to lease expiry, then gives the outcomes on their way a short grace.
func (w *Worker) drain() {
	deadline := time.Now().Add(w.opts.DrainTimeout)
	w.mu.Lock()
	for len(w.held) > 0 && time.Now().Before(deadline) {
		w.waitChange(deadline)
	}
	var leftovers []*held
	for token, h := range w.held {
		if h.state == stateRunning || h.state == stateWaiting {
			h.state = stateAbandoned
			h.cancel()
			delete(w.held, token)
			leftovers = append(leftovers, h)
			w.emitLocked(Event{Kind: "abandoned", JobID: h.job.ID, Task: h.job.Task, Message: "drain timeout"})
		}
	}
	w.unlock()
	if len(leftovers) > 0 {
		w.logf("%d job(s) still running after the drain timeout of %s: left to lease expiry", len(leftovers), w.opts.DrainTimeout)
	}
	grace := time.Now().Add(finalAckGrace)
	w.mu.Lock()
	for len(w.held) > 0 && time.Now().Before(grace) {
		w.waitChange(grace)
	}
	unanswered := len(w.held)
	for token, h := range w.held {
		h.state = stateAbandoned
		delete(w.held, token)
	}
	w.mu.Unlock()
	if unanswered > 0 {
		w.logf("%d acknowledgement(s) unanswered at exit: left to lease expiry", unanswered)
	}
	// The half-closed stream ends once the server has answered it.
	t := time.NewTimer(finalAckGrace)
	select {
	case <-w.loopDone:
	case <-t.C:
		w.mu.Lock()
		if w.current != nil {
			w.current.cancel()
		}
		w.mu.Unlock()
		<-w.loopDone
	}
	t.Stop()
}
