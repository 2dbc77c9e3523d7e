package leasequeue

// The fallback for a server without Work: leases from StreamClaims,
// acknowledgements by Acknowledge (also while no Work stream is open).

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

// claimsOnce runs one StreamClaims stream (a server without Work): leases,
// and cancellations of running jobs, down; acknowledgements go by Acknowledge.
func (w *Worker) claimsOnce(connected func()) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		return nil
	}
	w.claims = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.claims = nil
		w.mu.Unlock()
	}()
	stream, err := w.service.StreamClaims(ctx, &lqv1.StreamClaimsRequest{
		Queue:         w.opts.Queue,
		WorkerId:      w.opts.WorkerID,
		LeaseDuration: durationpb.New(w.opts.LeaseDuration),
		MaxInFlight:   int32(w.opts.Concurrency),
	})
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err == io.EOF {
			return errServerEnded
		}
		if err != nil {
			return err
		}
		if first {
			connected()
		}
		if lease := msg.GetLease(); lease != nil {
			w.accept(lease)
		} else if id := msg.GetCancelledJobId(); id != "" {
			w.jobCancelled(id)
		}
	}
}

// sendUnary sends queued acknowledgements with Acknowledge while no Work
// stream, nor a Claim due soon (worker_unary.go), takes them.
func (w *Worker) sendUnary() {
	mine := func() bool { return w.stream == nil && !w.claimTakesAcks() }
	for {
		w.mu.Lock()
		for !w.closed && !(len(w.outbox) > 0 && mine()) {
			w.waitChange(time.Time{})
		}
		if w.closed {
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		batch := w.takeAfterWindow(mine, nil)
		if batch == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ackAnswerTimeout)
		res, err := w.service.Acknowledge(ctx, &lqv1.AcknowledgeRequest{Acks: acksOf(batch)})
		cancel()
		if err == nil && len(res.GetResults()) != len(batch) {
			err = status.Errorf(codes.Internal, "Acknowledge answered %d of %d acknowledgements", len(res.GetResults()), len(batch))
		}
		if err != nil {
			why := fmt.Sprintf("Acknowledge failed: %s %s", status.Code(err), status.Convert(err).Message())
			w.logWarn("Acknowledge failed, will retry while the leases hold", "acks", len(batch), "code", status.Code(err), "error", status.Convert(err).Message())
			for _, p := range batch {
				w.unanswered(p, why)
			}
			time.Sleep(resendPause)
			continue
		}
		for i, p := range batch {
			w.settle(p, res.GetResults()[i].GetStatus())
		}
	}
}
