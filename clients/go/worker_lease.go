package leasequeue

// A lease the worker holds, from the Work stream or StreamClaims to its end.

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

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

	dependencies []Dependency
	truncated    bool
}

// Decode unmarshals the payload into dst, as encoding/json would the same JSON.
func (j *Job) Decode(dst any) error { return decodeValue(j.Proto.GetPayload(), dst) }

// Dependency is one direct dependency's outcome when the job was leased
// (docs/api.md "Dependencies").
type Dependency struct {
	JobID string
	// State is COMPLETED (DEAD or CANCELLED too for a job submitted with
	// DEPENDENCY_FAILURE_POLICY_IGNORE).
	State     lqv1.JobState
	Result    any    // its result as encoding/json decodes it into an any; nil when none
	LastError string // "" when none
	result    *structpb.Value
}

// Decode unmarshals the dependency's result into dst, as encoding/json
// would the same JSON (null when it has none), as (*Job).Decode does the payload.
func (d Dependency) Decode(dst any) error { return decodeValue(d.result, dst) }

// Dependencies are the outcomes of the jobs this one depends on, the first
// 100 in Proto.DependsOn order; none for a job without dependencies. Each
// call returns a new slice.
func (j *Job) Dependencies() []Dependency { return append([]Dependency(nil), j.dependencies...) }

// DependenciesTruncated is true when the job has more dependencies than the
// 100 of Dependencies.
func (j *Job) DependenciesTruncated() bool { return j.truncated }

func dependenciesOf(lease *lqv1.Lease) []Dependency {
	results := lease.GetDependencies()
	if len(results) == 0 {
		return nil
	}
	deps := make([]Dependency, len(results))
	for i, d := range results {
		deps[i] = Dependency{JobID: d.GetJobId(), State: d.GetState(), Result: valueOf(d.GetResult()), LastError: d.GetLastError(), result: d.GetResult()}
	}
	return deps
}

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
//	   +------------------+-----job cancelled----------+--> cancelled (nothing is sent for it)
//	                      +-----drain timeout------------> abandoned (left to lease expiry)
const (
	stateWaiting leaseState = iota
	stateRunning
	stateFinishing
	stateDone
	stateLost
	stateAbandoned
	stateCancelled
)

type held struct {
	worker       *Worker
	token        string
	job          *Job
	ctx          context.Context
	cancel       func(cause error) // ends ctx; context.Cause(ctx) is cause (Go 1.20 on), or context.Canceled for nil
	state        leaseState
	expiresAt    time.Time // the local deadline: errs early
	nextBeat     time.Time
	beatInFlight bool
	progress     *structpb.Value // not yet carried by a heartbeat the server took
}

func (w *Worker) accept(lease *lqv1.Lease) {
	j := lease.GetJob()
	ctx, cancel := withCancelCause(context.Background())
	now := time.Now()
	h := &held{worker: w, token: lease.GetLeaseToken(), ctx: ctx, cancel: cancel, state: stateWaiting,
		expiresAt: now.Add(w.opts.LeaseDuration), nextBeat: now.Add(w.opts.HeartbeatInterval)}
	h.job = &Job{ID: j.GetId(), Queue: j.GetQueue(), Task: j.GetTask(), Payload: valueOf(j.GetPayload()),
		Attempts: j.GetAttempts(), MaxAttempts: j.GetMaxAttempts(), Deliveries: j.GetDeliveries(), Priority: j.GetPriority(),
		LeaseToken: lease.GetLeaseToken(), Proto: j, held: h, dependencies: dependenciesOf(lease), truncated: lease.GetDependenciesTruncated()}
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

func (w *Worker) reportProgress(h *held, value *structpb.Value) {
	w.mu.Lock()
	if h.state == stateRunning {
		h.progress = value
		if soon := time.Now().Add(w.progressDelay); soon.Before(h.nextBeat) {
			h.nextBeat = soon
		}
	}
	w.mu.Unlock()
	w.pokeTimer()
}

// lose: the lease is gone; tell the handler, send nothing more for it (w.mu held).
func (w *Worker) lose(h *held, reason, detail string) {
	if h.state == stateLost || h.state == stateDone || h.state == stateAbandoned || h.state == stateCancelled {
		return
	}
	h.state = stateLost
	delete(w.held, h.token)
	h.cancel(nil)
	w.notify()
	w.logWarn("lease lost", "job_id", h.job.ID, "task", h.job.Task, "reason", reason, "detail", detail)
	w.emitLocked(Event{Kind: "lease-lost", JobID: h.job.ID, Task: h.job.Task, Message: detail, Code: reason})
}

func (w *Worker) done(h *held) {
	w.mu.Lock()
	if h.state == stateFinishing {
		h.state = stateDone
	}
	delete(w.held, h.token)
	h.cancel(nil)
	w.notify()
	w.mu.Unlock()
}
