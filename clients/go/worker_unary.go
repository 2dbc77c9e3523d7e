package leasequeue

// The unary path, where neither stream is served (a proxy that passes only
// unary calls): Claims that carry the acknowledgements queued since the last
// one (docs/api.md, Claim with acks). One Claim at a time asks for as many
// leases as slots are free; one carrying acknowledgements does not wait, so
// their answers come at once, and the next, carrying none, long-polls
// (claimWait). Acknowledgements never wait for a long-poll: those due while
// one is pending, and heartbeats while every slot is busy, go by Acknowledge
// (sendUnary asks claimTakesAcks).

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

// The unary path's Claim (Worker.claimState).
const (
	claimNone    = iota // not on the unary path
	claimIdle           // none on its way
	claimPrompt         // one that answers at once is on its way
	claimWaiting        // a long-poll is pending
)

// unaryOnce runs the unary path (neither stream is served): one Claim at a
// time for as many leases as slots are free, carrying the acknowledgements
// queued since the last one; it returns when the worker stops or a Claim fails.
func (w *Worker) unaryOnce(connected func()) error {
	defer func() {
		w.mu.Lock()
		w.claimState = claimNone
		w.notify()
		w.mu.Unlock()
	}()
	for first := true; ; first = false {
		w.mu.Lock()
		w.claimState = claimIdle
		w.notify()
		for !w.stopping && w.room() == 0 {
			w.waitChange(time.Time{})
		}
		if w.stopping {
			w.mu.Unlock()
			return nil
		}
		// What is queued rides along now rather than after the batch window.
		batch := w.takeBatch()
		wait := time.Duration(0)
		if len(batch) == 0 && !first {
			wait = claimWait
		}
		now := time.Now()
		for _, p := range batch {
			p.sentAt = now
		}
		maxJobs := w.room()
		if maxJobs > maxClaimJobs {
			maxJobs = maxClaimJobs
		}
		req := &lqv1.ClaimRequest{
			Queue:         w.opts.Queue,
			WorkerId:      w.opts.WorkerID,
			LeaseDuration: durationpb.New(w.opts.LeaseDuration),
			MaxJobs:       int32(maxJobs),
			Wait:          durationpb.New(wait),
			Acks:          acksOf(batch),
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait+ackAnswerTimeout)
		w.claimState = claimPrompt
		if wait > 0 {
			w.claimState = claimWaiting
			w.claims = cancel // stop() ends the long-poll
		}
		w.notify()
		w.mu.Unlock()
		res, err := w.service.Claim(ctx, req)
		cancel()
		w.mu.Lock()
		w.claims = nil
		stopping := w.stopping
		w.mu.Unlock()
		if err != nil {
			why := fmt.Sprintf("Claim failed: %s %s", status.Code(err), status.Convert(err).Message())
			for _, p := range batch {
				w.unanswered(p, why)
			}
			if stopping && status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		if first {
			connected()
		}
		if results := res.GetResults(); len(results) != len(batch) {
			why := fmt.Sprintf("Claim answered %d of %d acknowledgements", len(results), len(batch))
			for _, p := range batch {
				w.unanswered(p, why)
			}
		} else {
			for i, p := range batch {
				w.settle(p, results[i].GetStatus())
			}
		}
		for _, lease := range res.GetLeases() {
			w.accept(lease)
		}
	}
}

// room is how many leases the worker could start now: free slots less the
// leases waiting for one (w.mu held).
func (w *Worker) room() int {
	n := w.opts.Concurrency - w.running
	for _, h := range w.waiting {
		if h.state == stateWaiting {
			n--
		}
	}
	if n < 0 {
		return 0
	}
	return n
}

// claimTakesAcks: the unary path sends a Claim soon, which carries what is
// queued (w.mu held).
func (w *Worker) claimTakesAcks() bool {
	return w.claimState == claimPrompt || (w.claimState == claimIdle && !w.stopping && w.room() > 0)
}
