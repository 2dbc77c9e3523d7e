package leasequeue

// Stopping and the drain.

import (
	"time"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

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
	w.logInfo("stopping: taking no new work", "running", running)
	if claims != nil {
		claims()
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
			h.cancel(nil)
			delete(w.held, token)
			leftovers = append(leftovers, h)
			w.emitLocked(Event{Kind: "abandoned", JobID: h.job.ID, Task: h.job.Task, Message: "drain timeout"})
		}
	}
	w.unlock()
	if len(leftovers) > 0 {
		w.logWarn("still running after the drain timeout: left to lease expiry", "jobs", len(leftovers), "drain_timeout", w.opts.DrainTimeout)
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
		w.logWarn("unanswered at exit: left to lease expiry", "acks", unanswered)
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
