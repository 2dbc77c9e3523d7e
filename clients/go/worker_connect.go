package leasequeue

// Connecting and reconnecting: the Work stream, or StreamClaims and
// Acknowledge on a server without it, or Claims carrying the acknowledgements
// where neither stream is served, with backoff between attempts.

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errServerEnded = errors.New("the server ended the stream")

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
			w.logError("the server refused the worker", "code", code, "error", status.Convert(err).Message(), "advice", advice, "retry_in", delay.Round(time.Millisecond))
			w.emit(Event{Kind: "refused", Message: why, Code: code.String(), RetryIn: delay})
		} else {
			w.logWarn("stream broke, reconnecting", "reason", why, "retry_in", delay.Round(time.Millisecond))
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
