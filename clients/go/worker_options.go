package leasequeue

// The options of a worker, their defaults and checks, and what it reports.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"
)

var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
	workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,128}$`)
)

// Event is what the worker reports to WorkerOptions.OnEvent, for metrics,
// tests and logs of your own. Kind is one of connected, disconnected, lease,
// completed, failed, snoozed, released, lease-lost, cancelled (the job was
// cancelled while the worker held it: its handler's ctx ended with
// ErrJobCancelled, and no outcome is sent), abandoned (left to lease expiry at
// the drain timeout), error (the server refused the worker in a way no retry
// can cure, Code and Message say how: the worker stops, and Run returns a
// *RefusedError), stopping, stopped.
type Event struct {
	Kind    string
	JobID   string
	Task    string
	Message string
	Code    string
	RetryIn time.Duration // of disconnected: the reconnect delay
}

// HandlerFunc runs one job. Its result (anything encoding/json marshals, at
// most 64 KiB) becomes the job's result; an error fails the attempt with its
// text (retried with backoff while attempts remain); an error from Permanent
// dead-letters the job at once; one from Snooze queues it again with the
// attempt refunded. ctx ends when the worker no longer owns the job (the
// lease was lost, or the drain timeout passed): stop, another worker may run
// it, and whatever the handler returns is dropped. It ends too when the job
// is cancelled while it runs (Cancel with include_running; context.Cause is
// ErrJobCancelled from Go 1.20 on): stop, nothing is sent for the job.
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// WorkerOptions configure NewWorker. Zero values take the defaults written on each field.
type WorkerOptions struct {
	Queue             string        // required: the queue to work
	Concurrency       int           // handlers at once (1..1000), the stream's max_in_flight; default 1
	WorkerID          string        // names the worker in leases and events; default go-<host>-<pid>
	LeaseDuration     time.Duration // 1s..12h; default 60s
	HeartbeatInterval time.Duration // default a third of LeaseDuration
	// DrainTimeout is how long Run waits for running handlers once ctx ends;
	// those still running then are left to lease expiry, never acknowledged.
	// Default 30s; negative: no wait.
	DrainTimeout     time.Duration
	ReconnectBackoff Backoff       // default 250ms doubling to 30s, jittered; Initial no longer than Max
	AckBatchWindow   time.Duration // how long an acknowledgement waits for others to share its message; default 1ms, negative: none
	Logger           Logger        // where records go (see Logger); default LogfmtLogger(os.Stderr)
	LogJobs          bool          // also log each job's outcome; default: only connections, stops and problems
	OnEvent          func(Event)   // called for each Event (from the worker's goroutines)
	// TraceLink, in a build with -tags otel (README.md "Tracing"), starts each
	// attempt's CONSUMER span as the root of a new trace linked to the job's
	// trace context instead of as its child. Without the tag there are no spans.
	TraceLink bool
}

// checkOptions fills in the defaults, and names the first option it cannot use.
func (w *Worker) checkOptions() error {
	o := &w.opts
	if o.Queue == "" {
		return errors.New("Queue: is required")
	}
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
	if b := o.ReconnectBackoff; b.Initial < 0 || b.Max < 0 || (b.Initial > 0 && b.Max > 0 && b.Initial > b.Max) {
		return fmt.Errorf("ReconnectBackoff: give Initial <= Max, both > 0 (or 0 for the defaults), got %s and %s", b.Initial, b.Max)
	}
	if o.AckBatchWindow == 0 {
		o.AckBatchWindow = time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = defaultLogger()
	}
	if len(w.handlers) == 0 {
		return errors.New("Run: register a handler first (Handle)")
	}
	return nil
}
