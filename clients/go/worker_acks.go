package leasequeue

// Acknowledgements and heartbeats: queued, batched, sent, and their answers.

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

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
	w.logWarn("not acknowledged: left to lease expiry", "job_id", h.job.ID, "task", h.job.Task, "outcome", p.kind, "reason", why)
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
			if h.progress != nil && next > w.progressDelay {
				next = w.progressDelay
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
		w.logWarn("heartbeat failed, will retry", "job_id", h.job.ID, "code", code, "error", st.Message())
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
		w.logError("the server refused the result", "job_id", h.job.ID, "task", h.job.Task, "error", st.Message())
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
				w.reportDone(p, "applied by an earlier send")
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
	if w.opts.LogJobs {
		keyvals := []any{"job_id", p.h.job.ID, "task", p.h.job.Task}
		if p.note != "" {
			keyvals = append(keyvals, "note", p.note)
		}
		if how != "" {
			keyvals = append(keyvals, "how", how)
		}
		w.logInfo(kind, keyvals...)
	}
	w.emit(Event{Kind: kind, JobID: p.h.job.ID, Task: p.h.job.Task, Message: p.note})
}
