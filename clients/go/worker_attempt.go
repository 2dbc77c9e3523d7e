package leasequeue

// One handler attempt and the outcome it queues.

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/durationpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

func (w *Worker) runHandler(h *held, fn HandlerFunc) {
	// The attempt's span (tracing_otel.go; nothing without the otel tag) is in the handler's ctx.
	ctx, endSpan := w.startAttemptSpan(h.ctx, h.job)
	var result any
	var err error
	if fn == nil {
		err = fmt.Errorf("no handler for task %q on worker %s", h.job.Task, w.opts.WorkerID)
	} else {
		result, err = callHandler(ctx, fn, h)
	}
	endSpan(w.returned(h, result, err))
}

// callHandler runs fn, turning a panic into an error (retried).
func callHandler(ctx context.Context, fn HandlerFunc, h *held) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(ctx, h.job)
}

// returned queues the outcome of a handler, unless the lease is no longer
// ours or the job was cancelled, frees its slot, and says what it was: complete, fail (with the error's text, and
// whether permanent) or snooze.
func (w *Worker) returned(h *held, result any, err error) (kind, errText string, permanent bool) {
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
				w.logError("the worker refused the result", "job_id", h.job.ID, "task", h.job.Task, "error", verr)
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
		permanent = IsPermanent(err)
		fail := &lqv1.AckFail{Error: truncate(text), Permanent: permanent}
		errText = fail.Error
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
		w.logWarn("lease lost: the outcome is not reported", "job_id", h.job.ID, "task", h.job.Task)
	case stateCancelled:
		w.logInfo("cancelled: the handler returned, nothing is sent for it", "job_id", h.job.ID, "task", h.job.Task)
	default:
		w.logWarn("finished after the drain timeout: left to lease expiry", "job_id", h.job.ID, "task", h.job.Task)
	}
	w.startWaiting()
	w.notify()
	w.unlock()
	return kind, errText, permanent
}
