// Command go-worker is a LeaseQueue example worker in Go: grpc-go over the
// Work stream (api.md section A).
//
// One bidirectional Work stream carries leases down, many per message, never
// more than LEASEQUEUE_CONCURRENCY unfinished at a time, and
// acknowledgements up: the completions, failures and heartbeats of all
// running jobs wait in one queue, and the stream's sender goroutine sends
// everything pending in one WorkRequest (at most 1000). Their results come
// back on the stream in the order they were sent. A busy worker makes no
// unary call at all.
//
// Each lease runs in its own goroutine; another goroutine queues a heartbeat
// every third of the lease while the handler runs. A handler's result
// completes the job; an error wrapping ErrPermanent dead-letters it at once;
// any other error fails it for a retry with the server's backoff.
//
// If the stream breaks, the worker reconnects with jittered backoff; running
// jobs go on, their heartbeats and outcomes are sent on the new stream, or
// batched into Acknowledge calls while no stream is open. Outcomes the broken
// stream left unanswered are sent again.
//
// SIGTERM or SIGINT: stop taking work (the stream half-closes once what is
// queued is sent; a lease the server pushed meanwhile is released), let
// running jobs finish and acknowledge them with Acknowledge, then exit 0. A
// job still running after LEASEQUEUE_SHUTDOWN_SECONDS is failed (retry now)
// so another worker gets it at once instead of after its lease expires. A
// second signal skips the wait.
//
// Environment (all optional):
//
//	LEASEQUEUE_URL               http://127.0.0.1:8080 (https:// uses TLS; host:port works too)
//	LEASEQUEUE_QUEUE             default
//	LEASEQUEUE_WORKER_ID         go-<hostname>-<pid>
//	LEASEQUEUE_CONCURRENCY       4      jobs at once (the Work stream's max_in_flight)
//	LEASEQUEUE_LEASE_SECONDS     30     lease duration; heartbeats every third of it
//	LEASEQUEUE_SHUTDOWN_SECONDS  30     how long a shutdown waits for running jobs
//	LEASEQUEUE_MAX_JOBS          0      stop after this many leases (0: never)
//	LEASEQUEUE_TOKEN             none   bearer token for a server with authentication on (bearer.go); never logged
//
// Builds offline with Debian's Go packages in GOPATH mode: see README.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	lq "leasequeue/gen/go/leasequeue/v1"
)

// ---------------------------------------------------------------------------
// Your code. The demo tasks below show the three outcomes.

// ErrPermanent marks input that will never work: return an error wrapping it
// (fmt.Errorf("...: %w", ErrPermanent)) and the job is dead-lettered at once.
var ErrPermanent = errors.New("permanent failure")

// handle runs one job and returns its result (any JSON-like value: nil, bool,
// float64, string, []interface{}, map[string]interface{}).
//
// payload is the job's JSON payload (numbers are float64). ctx is cancelled
// when the lease is lost (expired or taken over) or a shutdown gives up
// waiting: stop early, another worker may already run the job. Side effects
// must be idempotent: a job can run again after a crash or a lost lease.
func handle(ctx context.Context, job *lq.Job, payload interface{}) (interface{}, error) {
	fields, _ := payload.(map[string]interface{})
	switch job.GetTask() {
	case "demo.add":
		a, okA := fields["a"].(float64)
		b, okB := fields["b"].(float64)
		if !okA || !okB {
			return nil, fmt.Errorf("demo.add needs numbers a and b: %w", ErrPermanent)
		}
		return map[string]interface{}{"sum": a + b}, nil
	case "demo.sleep":
		seconds := 1.0
		if v, ok := fields["seconds"]; ok {
			s, isNumber := v.(float64)
			if !isNumber || s < 0 || s > 3600 {
				return nil, fmt.Errorf("demo.sleep needs seconds in 0..3600: %w", ErrPermanent)
			}
			seconds = s
		}
		select {
		case <-time.After(time.Duration(seconds * float64(time.Second))):
			return map[string]interface{}{"slept": seconds}, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped while sleeping: %w", ctx.Err())
		}
	case "demo.flaky":
		succeedOn := 2.0
		if v, ok := fields["succeedOnAttempt"].(float64); ok {
			succeedOn = v
		}
		if float64(job.GetAttempts()) < succeedOn {
			return nil, fmt.Errorf("transient failure on attempt %d", job.GetAttempts())
		}
		return map[string]interface{}{"attempt": job.GetAttempts()}, nil
	}
	return nil, fmt.Errorf("unknown task %q: %w", job.GetTask(), ErrPermanent)
}

// ---------------------------------------------------------------------------
// The worker loop.

const callTimeout = 10 * time.Second // unary calls

// Acknowledgements go up the Work stream while one is open, many per
// message (at most ackBatchMax). Without a stream (between reconnects, and
// after a shutdown half-closed it) they go in Acknowledge calls: the batcher
// sends what is pending ackFlushInterval after the first of a batch arrives.
const (
	ackFlushInterval = 5 * time.Millisecond
	ackBatchMax      = 1000 // per WorkRequest or AcknowledgeRequest (api.md)
	unaryRetry       = 500 * time.Millisecond
)

// pendingAck is one acknowledgement on its way, and where its result goes.
type pendingAck struct {
	ack        *lq.Acknowledgement
	reply      chan error
	retryUntil time.Time // an outcome is sent again after a failed call until then (its lease surely ended)
	resent     bool      // an earlier send got no answer: it may have been applied
}

// ackStream is one Work stream as the acknowledger sees it: the
// acknowledgements sent on it that wait for their results, in order.
type ackStream struct {
	accepting bool // its sender still sends acknowledgements
	awaiting  []*pendingAck
}

// acknowledger carries the acknowledgements of every job: on the open Work
// stream, or batched into Acknowledge calls while none is open. Each is
// answered on its own: nil, or exactly the error the single RPC (Complete,
// Fail, Heartbeat, Release) would have returned.
type acknowledger struct {
	client lq.LeaseQueueServiceClient

	mu         sync.Mutex
	changed    *sync.Cond // something was queued, a stream came or went, a half-close was asked
	queue      []*pendingAck
	stream     *ackStream // the stream that takes acknowledgements, if any
	halfClosed bool       // stopping: streams half-close once the queue is sent
}

func newAcknowledger(client lq.LeaseQueueServiceClient) *acknowledger {
	a := &acknowledger{client: client}
	a.changed = sync.NewCond(&a.mu)
	go a.sendUnary()
	return a
}

// acknowledge queues ack and waits for its result. An outcome whose send
// fails as a whole is sent again until retryUntil.
func (a *acknowledger) acknowledge(ack *lq.Acknowledgement, retryUntil time.Time) error {
	p := &pendingAck{ack: ack, reply: make(chan error, 1), retryUntil: retryUntil}
	a.mu.Lock()
	a.queue = append(a.queue, p)
	a.changed.Broadcast()
	a.mu.Unlock()
	return <-p.reply
}

// halfClose makes the open stream (and any later one) half-close once what
// is queued is sent; acknowledgements after that go by Acknowledge.
func (a *acknowledger) halfClose() {
	a.mu.Lock()
	a.halfClosed = true
	a.changed.Broadcast()
	a.mu.Unlock()
}

// take removes up to ackBatchMax acknowledgements from the queue (a.mu held).
func (a *acknowledger) take() []*pendingAck {
	n := len(a.queue)
	if n > ackBatchMax {
		n = ackBatchMax
	}
	batch := append([]*pendingAck(nil), a.queue[:n]...)
	a.queue = a.queue[n:]
	return batch
}

func acksOf(batch []*pendingAck) []*lq.Acknowledgement {
	acks := make([]*lq.Acknowledgement, len(batch))
	for i, p := range batch {
		acks[i] = p.ack
	}
	return acks
}

// attach makes a new stream the one that takes acknowledgements.
func (a *acknowledger) attach() *ackStream {
	s := &ackStream{accepting: true}
	a.mu.Lock()
	a.stream = s
	a.changed.Broadcast()
	a.mu.Unlock()
	return s
}

// sendOn is the only goroutine that sends on stream: start, then every
// queued acknowledgement, many per message; it half-closes when asked to and
// the queue is empty. It returns when the stream is over.
func (a *acknowledger) sendOn(s *ackStream, stream lq.LeaseQueueService_WorkClient, start *lq.WorkRequest) {
	if err := stream.Send(start); err != nil {
		return // Recv reports why
	}
	for {
		a.mu.Lock()
		for s.accepting && len(a.queue) == 0 && !a.halfClosed {
			a.changed.Wait()
		}
		if !s.accepting {
			a.mu.Unlock()
			return
		}
		if len(a.queue) == 0 {
			// Stopping, and everything queued went out: the server sends the
			// remaining results and ends the stream.
			s.accepting = false
			if a.stream == s {
				a.stream = nil
			}
			a.changed.Broadcast()
			a.mu.Unlock()
			_ = stream.CloseSend()
			return
		}
		batch := a.take()
		s.awaiting = append(s.awaiting, batch...)
		a.mu.Unlock()
		if err := stream.Send(&lq.WorkRequest{Acks: acksOf(batch)}); err != nil {
			return // the stream is over: Recv reports why, detach sends the batch again
		}
	}
}

// answer hands a result from the stream to the acknowledgement it answers.
func (a *acknowledger) answer(s *ackStream, result *lq.AcknowledgementResult) {
	a.mu.Lock()
	if len(s.awaiting) == 0 {
		a.mu.Unlock()
		log.Printf("result for job %s matches no acknowledgement sent on this stream", result.GetJobId())
		return
	}
	p := s.awaiting[0]
	s.awaiting = s.awaiting[1:]
	a.mu.Unlock()
	if p.ack.GetJobId() != result.GetJobId() {
		log.Printf("result for job %s answers the acknowledgement of job %s", result.GetJobId(), p.ack.GetJobId())
	}
	p.reply <- resultError(p, status.ErrorProto(result.GetStatus()))
}

// resultError notes on a refusal of an acknowledgement sent twice that the
// first send may have been applied.
func resultError(p *pendingAck, err error) error {
	if err == nil || !p.resent {
		return err
	}
	st := status.Convert(err)
	return status.Errorf(st.Code(), "%s (sent again: the first send may have been applied)", st.Message())
}

// detach ends a stream: outcomes it left unanswered are queued again at the
// front; unanswered heartbeats fail (the next one comes at its tick).
func (a *acknowledger) detach(s *ackStream) {
	a.mu.Lock()
	s.accepting = false
	if a.stream == s {
		a.stream = nil
	}
	var again []*pendingAck
	for _, p := range s.awaiting {
		if p.ack.GetHeartbeat() != nil {
			p.reply <- status.Error(codes.Unavailable, "the stream ended before the heartbeat was answered")
			continue
		}
		p.resent = true
		again = append(again, p)
	}
	s.awaiting = nil
	a.queue = append(again, a.queue...)
	a.changed.Broadcast()
	a.mu.Unlock()
	if len(again) > 0 {
		log.Printf("sending %d unanswered acknowledgement(s) again", len(again))
	}
}

// sendUnary sends what is queued with Acknowledge while no stream takes
// acknowledgements, each batch in its own goroutine so that a slow call
// does not hold up the next batch.
func (a *acknowledger) sendUnary() {
	for {
		a.mu.Lock()
		for len(a.queue) == 0 || a.stream != nil {
			a.changed.Wait()
		}
		a.mu.Unlock()
		time.Sleep(ackFlushInterval) // let the rest of the batch arrive
		a.mu.Lock()
		if len(a.queue) == 0 || a.stream != nil {
			a.mu.Unlock()
			continue
		}
		batch := a.take()
		a.mu.Unlock()
		go a.sendBatch(batch)
	}
}

func (a *acknowledger) sendBatch(batch []*pendingAck) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := a.client.Acknowledge(ctx, &lq.AcknowledgeRequest{Acks: acksOf(batch)})
	if err == nil && len(res.GetResults()) != len(batch) {
		err = status.Errorf(codes.Internal, "Acknowledge answered %d of %d acknowledgements", len(res.GetResults()), len(batch))
	}
	if err == nil {
		for i, p := range batch {
			// A refused one carries the single RPC's code, message and details.
			p.reply <- resultError(p, status.ErrorProto(res.GetResults()[i].GetStatus()))
		}
		return
	}
	// The call failed as a whole: outcomes are sent again while their lease
	// may still hold; the rest get the error.
	var again []*pendingAck
	for _, p := range batch {
		if !fatal(status.Code(err)) && time.Now().Before(p.retryUntil) {
			p.resent = true
			again = append(again, p)
			continue
		}
		p.reply <- err
	}
	if len(again) > 0 {
		log.Printf("Acknowledge failed, will retry %d acknowledgement(s): %s %s", len(again), status.Code(err), status.Convert(err).Message())
		time.AfterFunc(unaryRetry, func() {
			a.mu.Lock()
			a.queue = append(again, a.queue...)
			a.changed.Broadcast()
			a.mu.Unlock()
		})
	}
}

type config struct {
	url, target     string
	tls             bool
	queue, workerID string
	concurrency     int
	lease, shutdown time.Duration
	maxJobs         int
	token           string // LEASEQUEUE_TOKEN; never logged
}

type runningJob struct {
	lease   *lq.Lease
	ctx     context.Context
	cancel  context.CancelFunc // the lease is lost, or shutdown gave up
	mu      sync.Mutex
	lost    bool
	acked   bool      // complete or fail was sent (once)
	expires time.Time // when the lease surely ends without another heartbeat
}

// extend records a successful heartbeat sent at sent.
func (r *runningJob) extend(sent time.Time, lease time.Duration) {
	r.mu.Lock()
	r.expires = sent.Add(lease)
	r.mu.Unlock()
}

func (r *runningJob) leaseEnd() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expires
}

func (r *runningJob) markLost() {
	r.mu.Lock()
	r.lost = true
	r.mu.Unlock()
	r.cancel()
}

func (r *runningJob) isLost() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

type worker struct {
	cfg    config
	client lq.LeaseQueueServiceClient
	acks   *acknowledger

	mu           sync.Mutex
	changed      *sync.Cond             // a job finished, a stop was asked, the grace period ended
	running      map[string]*runningJob // by lease token: after an expiry a job can come back on a new lease while its old handler winds down
	received     int
	stopping     bool
	force        bool
	stopped      chan struct{} // closed by the first stop
	cancelStream context.CancelFunc
	exitCode     int
}

func newWorker(cfg config, client lq.LeaseQueueServiceClient) *worker {
	w := &worker{cfg: cfg, client: client, acks: newAcknowledger(client), running: map[string]*runningJob{}, stopped: make(chan struct{})}
	w.changed = sync.NewCond(&w.mu)
	return w
}

// stop stops taking work: the stream half-closes once what is queued is
// sent, running jobs go on.
func (w *worker) stop(why string) {
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		return
	}
	w.stopping = true
	close(w.stopped)
	running := len(w.running)
	w.changed.Broadcast()
	w.mu.Unlock()
	log.Printf("stopping (%s): taking no new work, finishing %d running job(s)", why, running)
	w.acks.halfClose()
}

// forceStop ends the wait for running jobs (second signal).
func (w *worker) forceStop(why string) {
	log.Printf("%s again: not waiting for running jobs", why)
	w.mu.Lock()
	w.force = true
	cancel := w.cancelStream
	w.changed.Broadcast()
	w.mu.Unlock()
	if cancel != nil {
		cancel() // a stream still open after the half-close
	}
}

// room waits until fewer than concurrency jobs run and returns how many more
// may start (0: stopping).
func (w *worker) room() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.running) >= w.cfg.concurrency && !w.stopping {
		w.changed.Wait()
	}
	if w.stopping {
		return 0
	}
	room := w.cfg.concurrency - len(w.running)
	if w.cfg.maxJobs > 0 && w.cfg.maxJobs-w.received < room {
		room = w.cfg.maxJobs - w.received
	}
	return room
}

// refusalHint says what to check when the server refuses the worker's
// token (never the token itself).
func refusalHint(code codes.Code, token string) string {
	switch {
	case code != codes.Unauthenticated && code != codes.PermissionDenied:
		return ""
	case token == "":
		return " (LEASEQUEUE_TOKEN is not set: the server has authentication on)"
	case code == codes.Unauthenticated:
		return " (check LEASEQUEUE_TOKEN: the server's auth file does not have it)"
	}
	return " (check the token's entry in the server's auth file: role worker, and this queue if it lists queues)"
}

func fatal(code codes.Code) bool {
	switch code {
	case codes.InvalidArgument, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

func (w *worker) run() int {
	withToken := "without a token"
	if w.cfg.token != "" {
		withToken = "with a bearer token"
	}
	log.Printf("worker %s: queue %s at %s, concurrency %d, lease %s, %s",
		w.cfg.workerID, w.cfg.queue, w.cfg.url, w.cfg.concurrency, w.cfg.lease, withToken)
	backoff := 500 * time.Millisecond
	for {
		// Leases of an earlier stream still count: ask only for the room left.
		room := w.room()
		if room <= 0 {
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		w.mu.Lock()
		stopping := w.stopping
		w.cancelStream = cancel
		w.mu.Unlock()
		if stopping {
			cancel()
			break
		}
		err := w.consume(ctx, int32(room), &backoff)
		cancel()
		w.mu.Lock()
		w.cancelStream = nil
		stopping = w.stopping
		w.mu.Unlock()
		if stopping {
			break // we half-closed (every result has arrived), or the stream broke: Acknowledge carries the rest
		}
		if err == io.EOF {
			log.Printf("the server ended the stream")
		} else if code := status.Code(err); fatal(code) {
			log.Printf("Work refused: %s %s%s", code, status.Convert(err).Message(), refusalHint(code, w.cfg.token))
			w.mu.Lock()
			w.exitCode = 1
			w.mu.Unlock()
			w.stop("fatal error")
			break
		} else {
			log.Printf("stream broke: %s %s", code, status.Convert(err).Message())
		}
		delay := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		log.Printf("reconnecting in %s", delay.Round(time.Millisecond))
		select {
		case <-time.After(delay):
		case <-w.stopped:
		}
		if backoff *= 2; backoff > 30*time.Second {
			backoff = 30 * time.Second
		}
	}
	w.drain()
	log.Printf("stopped")
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exitCode
}

// consume runs one Work stream until it ends: leases start jobs, results
// answer the acknowledgements sent on it.
func (w *worker) consume(ctx context.Context, room int32, backoff *time.Duration) error {
	stream, err := w.client.Work(ctx)
	if err != nil {
		return err
	}
	s := w.acks.attach()
	defer w.acks.detach(s)
	go w.acks.sendOn(s, stream, &lq.WorkRequest{Start: &lq.WorkStart{
		Queue:         w.cfg.queue,
		WorkerId:      w.cfg.workerID,
		LeaseDuration: durationpb.New(w.cfg.lease),
		MaxInFlight:   room,
	}})
	opened := false
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		if !opened {
			log.Printf("Work stream open: max_in_flight %d", room)
			opened = true
		}
		*backoff = 500 * time.Millisecond // the stream works
		// A message without results or leases is a keepalive.
		for _, result := range msg.GetResults() {
			w.acks.answer(s, result)
		}
		for _, lease := range msg.GetLeases() {
			w.take(lease)
		}
	}
}

// take starts a job for the lease, or gives the lease back when the worker
// is stopping (the server pushed it before it saw the half-close).
func (w *worker) take(lease *lq.Lease) {
	w.mu.Lock()
	refuse := w.stopping || (w.cfg.maxJobs > 0 && w.received >= w.cfg.maxJobs)
	w.mu.Unlock()
	if refuse {
		go w.release(lease)
		return
	}
	w.start(lease)
	w.mu.Lock()
	reached := w.cfg.maxJobs > 0 && w.received >= w.cfg.maxJobs
	received := w.received
	w.mu.Unlock()
	if reached {
		w.stop(fmt.Sprintf("received %d job(s), LEASEQUEUE_MAX_JOBS", received))
	}
}

func (w *worker) release(lease *lq.Lease) {
	id := lease.GetJob().GetId()
	ack := &lq.Acknowledgement{JobId: id, LeaseToken: lease.GetLeaseToken(), Outcome: &lq.Acknowledgement_Release{Release: &lq.AckRelease{}}}
	if err := w.acks.acknowledge(ack, time.Time{}); err != nil {
		log.Printf("job %s: release refused: %s %s", id, status.Code(err), status.Convert(err).Message())
		return
	}
	log.Printf("released job %s (the worker is stopping)", id)
}

// drain waits for running jobs; those that outlast the grace period are
// failed for a prompt retry.
func (w *worker) drain() {
	timedOut := false
	timer := time.AfterFunc(w.cfg.shutdown, func() {
		w.mu.Lock()
		timedOut = true
		w.changed.Broadcast()
		w.mu.Unlock()
	})
	defer timer.Stop()
	w.mu.Lock()
	for len(w.running) > 0 && !w.force && !timedOut {
		w.changed.Wait()
	}
	leftovers := make([]*runningJob, 0, len(w.running))
	for _, r := range w.running {
		leftovers = append(leftovers, r)
	}
	w.mu.Unlock()
	for _, r := range leftovers {
		r.markLost() // the handler should give up; its outcome is no longer reported
		w.fail(r, "worker shut down before the job finished", false, true)
	}
}

func (w *worker) start(lease *lq.Lease) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningJob{lease: lease, ctx: ctx, cancel: cancel, expires: time.Now().Add(w.cfg.lease)}
	job := lease.GetJob()
	w.mu.Lock()
	w.running[lease.GetLeaseToken()] = r
	w.received++
	w.mu.Unlock()
	log.Printf("claimed job %s task=%s attempt=%d", job.GetId(), job.GetTask(), job.GetAttempts())
	go w.work(r)
}

func (w *worker) work(r *runningJob) {
	job := r.lease.GetJob()
	defer func() {
		r.cancel()
		w.mu.Lock()
		delete(w.running, r.lease.GetLeaseToken())
		w.changed.Broadcast()
		w.mu.Unlock()
	}()

	done := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		w.heartbeat(r, done)
	}()

	var payload interface{}
	if job.GetPayload() != nil {
		payload = job.GetPayload().AsInterface()
	}
	result, err := safeHandle(r.ctx, job, payload)
	close(done)
	<-beating

	switch {
	case r.isLost():
		log.Printf("job %s: lease lost; its outcome is not reported", job.GetId())
	case err == nil:
		w.complete(r, result)
	default:
		w.fail(r, err.Error(), errors.Is(err, ErrPermanent), false)
	}
}

// safeHandle turns a panic in the handler into an error (retried).
func safeHandle(ctx context.Context, job *lq.Job, payload interface{}) (result interface{}, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return handle(ctx, job, payload)
}

// claimAck marks the job acknowledged; false if it already was.
func (r *runningJob) claimAck() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.acked {
		return false
	}
	r.acked = true
	return true
}

func (w *worker) complete(r *runningJob, result interface{}) {
	id := r.lease.GetJob().GetId()
	outcome := &lq.AckComplete{}
	if result != nil {
		v, err := structpb.NewValue(result)
		if err != nil {
			w.fail(r, "result is not JSON: "+err.Error(), true, false)
			return
		}
		outcome.Result = v
	}
	if !r.claimAck() {
		return
	}
	ack := &lq.Acknowledgement{JobId: id, LeaseToken: r.lease.GetLeaseToken(), Outcome: &lq.Acknowledgement_Complete{Complete: outcome}}
	if err := w.acks.acknowledge(ack, r.leaseEnd()); err != nil {
		// Aborted: the lease expired or was taken over; the job is someone
		// else's now. Anything else: it is retried when the lease expires.
		log.Printf("job %s: complete refused: %s %s", id, status.Code(err), status.Convert(err).Message())
		return
	}
	log.Printf("completed job %s", id)
}

func (w *worker) fail(r *runningJob, message string, permanent, retryNow bool) {
	if !r.claimAck() {
		return
	}
	id := r.lease.GetJob().GetId()
	if len(message) > 4096 {
		message = message[:4096]
	}
	outcome := &lq.AckFail{Error: message, Permanent: permanent}
	if retryNow {
		outcome.RetryDelay = durationpb.New(0)
	}
	ack := &lq.Acknowledgement{JobId: id, LeaseToken: r.lease.GetLeaseToken(), Outcome: &lq.Acknowledgement_Fail{Fail: outcome}}
	retryUntil := r.leaseEnd()
	if retryNow {
		retryUntil = time.Time{} // a shutdown giving up: one try, not a wait
	}
	if err := w.acks.acknowledge(ack, retryUntil); err != nil {
		log.Printf("job %s: fail refused: %s %s", id, status.Code(err), status.Convert(err).Message())
		return
	}
	kind := "retry"
	if permanent {
		kind = "permanent"
	}
	log.Printf("failed job %s (%s): %s", id, kind, message)
}

// heartbeat extends the lease every third of its duration until done closes,
// in the batcher's next Acknowledge call.
func (w *worker) heartbeat(r *runningJob, done <-chan struct{}) {
	interval := w.cfg.lease / 3
	if interval < 200*time.Millisecond {
		interval = 200 * time.Millisecond
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	id := r.lease.GetJob().GetId()
	// Without lease_duration the server extends by the claim's duration.
	ack := &lq.Acknowledgement{JobId: id, LeaseToken: r.lease.GetLeaseToken(), Outcome: &lq.Acknowledgement_Heartbeat{Heartbeat: &lq.AckHeartbeat{}}}
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
		}
		sent := time.Now()
		err := w.acks.acknowledge(ack, time.Time{})
		if err == nil {
			r.extend(sent, w.cfg.lease)
			continue
		}
		switch status.Code(err) {
		case codes.Aborted, codes.NotFound:
			log.Printf("job %s: lease lost (%s %s)", id, status.Code(err), status.Convert(err).Message())
			r.markLost()
			return
		default:
			log.Printf("job %s: heartbeat failed, will retry: %s %s", id, status.Code(err), status.Convert(err).Message())
		}
	}
}

// ---------------------------------------------------------------------------
// Configuration and main.

func envNumber(name string, def, lo, hi float64) float64 {
	raw := os.Getenv(name)
	if raw == "" {
		return def
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil || v < lo || v > hi {
		log.Fatalf("%s=%q: must be a number within %g..%g", name, raw, lo, hi)
	}
	return v
}

func loadConfig() config {
	cfg := config{url: os.Getenv("LEASEQUEUE_URL"), queue: os.Getenv("LEASEQUEUE_QUEUE"), workerID: os.Getenv("LEASEQUEUE_WORKER_ID")}
	if cfg.url == "" {
		cfg.url = "http://127.0.0.1:8080"
	}
	if !strings.Contains(cfg.url, "://") {
		cfg.target = cfg.url
	} else {
		u, err := url.Parse(cfg.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			log.Fatalf("LEASEQUEUE_URL=%q: use http://host:port, https://host:port or host:port", cfg.url)
		}
		cfg.target, cfg.tls = u.Host, u.Scheme == "https"
	}
	if cfg.queue == "" {
		cfg.queue = "default"
	}
	if cfg.workerID == "" {
		host, _ := os.Hostname()
		cfg.workerID = fmt.Sprintf("go-%s-%d", host, os.Getpid())
	}
	cfg.concurrency = int(envNumber("LEASEQUEUE_CONCURRENCY", 4, 1, 1000))
	cfg.lease = time.Duration(envNumber("LEASEQUEUE_LEASE_SECONDS", 30, 1, 43200) * float64(time.Second))
	cfg.shutdown = time.Duration(envNumber("LEASEQUEUE_SHUTDOWN_SECONDS", 30, 0, 86400) * float64(time.Second))
	cfg.maxJobs = int(envNumber("LEASEQUEUE_MAX_JOBS", 0, 0, 1e9))
	token, err := tokenFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	cfg.token = token
	return cfg
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	cfg := loadConfig()

	// grpc-go 1.33 predates credentials/insecure: WithInsecure is the h2c option.
	creds := grpc.WithInsecure()
	if cfg.tls {
		creds = grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{}))
	}
	// HTTP/2 pings while a call is open: a connection that died silently
	// breaks the Work stream within half a minute, so its acknowledgements
	// are sent again instead of waiting for results that never come. Redials
	// start after 0.5 s and back off to 5 s (grpc's defaults: 1 s to 120 s),
	// so a restarted server gets its outcomes while their leases still hold.
	redial := backoff.DefaultConfig
	redial.BaseDelay, redial.MaxDelay = 500*time.Millisecond, 5*time.Second
	options := []grpc.DialOption{creds,
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: redial, MinConnectTimeout: 20 * time.Second})}
	if cfg.token != "" {
		// Every call (Work, Acknowledge) carries it.
		options = append(options, grpc.WithPerRPCCredentials(newBearerToken(cfg.token, cfg.tls)))
		if sentInClear(cfg.target, cfg.tls) {
			log.Printf("LEASEQUEUE_TOKEN goes to %s in clear text: use https:// outside a private network", cfg.target)
		}
	}
	conn, err := grpc.Dial(cfg.target, options...)
	if err != nil {
		log.Fatalf("dial %s: %v", cfg.target, err)
	}

	w := newWorker(cfg, lq.NewLeaseQueueServiceClient(conn))
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		w.stop(signalName(<-signals))
		w.forceStop(signalName(<-signals))
	}()

	code := w.run()
	conn.Close()
	os.Exit(code)
}
