package leasequeue

// A job cancelled while the worker holds its lease (Cancel with
// include_running; docs/api.md "Cancelling a running job"): the server says
// so on the stream that holds the lease (Work's cancelled_job_ids, a
// StreamClaims message with cancelled_job_id). On the unary path nothing is
// announced: the next heartbeat or outcome is refused (LEASE_REJECTED) and
// the lease is lost.

import "errors"

// ErrJobCancelled is why a handler's ctx ends when its job was cancelled
// while it ran (Cancel with include_running): ctx.Err() is context.Canceled,
// and, built with Go 1.20 or later, context.Cause(ctx) is ErrJobCancelled
// (for a lost lease or the drain timeout it is context.Canceled). The worker
// sends no outcome for the job, whatever the handler returns.
var ErrJobCancelled = errors.New("the job was cancelled while it ran")

// jobCancelled: the server cancelled job id while this worker held its
// lease. The handler's ctx ends with ErrJobCancelled, the lease's heartbeats
// stop, what was queued for it and not yet sent is dropped, and nothing more
// is sent for it; its slot frees when the handler returns (returned). A job
// the worker no longer holds (answered, lost, abandoned) is ignored.
func (w *Worker) jobCancelled(id string) {
	w.mu.Lock()
	var h *held
	for _, one := range w.held {
		if one.job.ID == id {
			h = one
			break
		}
	}
	if h == nil || (h.state != stateWaiting && h.state != stateRunning && h.state != stateFinishing) {
		w.mu.Unlock()
		return
	}
	h.state = stateCancelled
	delete(w.held, h.token) // the timer beats only held leases
	w.dropQueued(h)
	h.cancel(ErrJobCancelled)
	w.notify() // a lease that had not started leaves room for another (room)
	w.logInfo("job cancelled while running: nothing is sent for it", "job_id", h.job.ID, "task", h.job.Task)
	w.emitLocked(Event{Kind: "cancelled", JobID: h.job.ID, Task: h.job.Task})
	w.unlock()
}

// dropQueued takes the acknowledgements of h that have not gone out off the
// outbox (w.mu held). Those on their way get their answers, which change nothing.
func (w *Worker) dropQueued(h *held) {
	kept := w.outbox[:0:0]
	for _, p := range w.outbox {
		if p.h != h {
			kept = append(kept, p)
		}
	}
	w.outbox = kept
}
