package leasequeue

// Connecting and reconnecting: the Work stream, or StreamClaims and
// Acknowledge on a server without it, or Claims carrying the acknowledgements
// where neither stream is served, with backoff between attempts; stopping
// instead on a refusal no retry can cure (RefusedError).

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errServerEnded = errors.New("the server ended the stream")

// RefusedError is what Run returns when the server refused the worker in a
// way no retry can cure: Code is InvalidArgument (a request the server does
// not accept), Unauthenticated (no token, or one the server's auth file does
// not have), PermissionDenied (the token lacks the worker role or the queue)
// or Unimplemented (the server serves none of the worker's paths); Message is
// the server's. The worker stopped and drained before Run returned it. Other
// failures (Unavailable, a dropped connection, ...) never end Run: the worker
// reconnects with backoff. status.Code and status.Convert read it as the
// server's status.
type RefusedError struct {
	Code    codes.Code
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("leasequeue: the server refused the worker: %s: %s", e.Code, e.Message)
}

// GRPCStatus is the server's status, for status.Code and status.Convert.
func (e *RefusedError) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// isFinal reports whether a stream's end is a refusal the worker stops on. An
// InvalidArgument naming an acknowledgement (acks[i]...) is about that one,
// not the worker: the stream is reopened as for a passing failure.
func isFinal(code codes.Code, message string) bool {
	switch code {
	case codes.InvalidArgument:
		return !strings.HasPrefix(message, "acks[")
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented:
		return true
	}
	return false
}

// The paths, fastest first: each is taken when the server answers the one
// before it Unimplemented.
const (
	pathWork = iota
	pathStreamClaims
	pathUnary
)

var pathNames = [...]string{"Work", "StreamClaims and Acknowledge", "Claim with acknowledgements"}

func (w *Worker) connectLoop() {
	defer close(w.loopDone)
	failures, path := 0, pathWork
	connected := func() {
		failures = 0
		w.logInfo("connected", "path", pathNames[path])
		w.emit(Event{Kind: "connected"})
	}
	for !w.isStopping() {
		var err error
		switch path {
		case pathWork:
			err = w.workOnce(connected)
		case pathStreamClaims:
			err = w.claimsOnce(connected)
		default:
			err = w.unaryOnce(connected)
		}
		if w.isStopping() {
			return
		}
		code := status.Code(err)
		if path != pathUnary && code == codes.Unimplemented {
			w.logInfo("the server has no such stream: taking the next path", "missing", [...]string{"Work", "StreamClaims"}[path], "path", pathNames[path+1])
			path++
			continue
		}
		if isFinal(code, status.Convert(err).Message()) {
			w.refused(code, status.Convert(err).Message())
			return
		}
		delay := w.opts.ReconnectBackoff.Delay(failures, nil)
		failures++
		why := errServerEnded.Error()
		if err != nil && err != errServerEnded {
			why = fmt.Sprintf("%s %s", code, status.Convert(err).Message())
		}
		w.logWarn("stream broke, reconnecting", "reason", why, "retry_in", delay.Round(time.Millisecond))
		w.emit(Event{Kind: "disconnected", Message: why, Code: code.String(), RetryIn: delay})
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.stopCh:
		}
		t.Stop()
	}
}

// refused records a refusal no retry can cure and wakes Run, which stops the
// worker, drains it and returns the RefusedError.
func (w *Worker) refused(code codes.Code, message string) {
	advice := "the server does not accept the worker's request: check its options"
	switch code {
	case codes.Unauthenticated:
		advice = "give the worker a token (WithToken) that is in the server's LEASEQUEUE_AUTH_FILE"
	case codes.PermissionDenied:
		advice = "the token's entry needs the role worker and, if it lists queues, " + w.opts.Queue
	case codes.Unimplemented:
		advice = "the server serves none of the worker's paths: check the target"
	}
	w.logError("the server refused the worker, stopping", "code", code, "error", message, "advice", advice)
	w.mu.Lock()
	w.failure = &RefusedError{Code: code, Message: message}
	w.mu.Unlock()
	w.emit(Event{Kind: "error", Message: message, Code: code.String()})
	close(w.refusedCh)
}
