package leasequeue

// Connecting and reconnecting: the Work stream, or StreamClaims and
// Acknowledge on a server without it, with backoff between attempts.

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errServerEnded = errors.New("the server ended the stream")

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
