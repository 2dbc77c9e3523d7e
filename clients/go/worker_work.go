package leasequeue

// The Work stream: leases (and cancellations of running jobs) down,
// acknowledgements up, on one stream.

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

// workStream is the worker's side of one Work stream.
type workStream struct {
	awaiting  []*pending // sent, waiting for results, in order
	ended     bool       // no more messages go on it
	cancelled bool       // by the watchdog
	cancel    context.CancelFunc
}

// workOnce runs one Work stream to its end.
func (w *Worker) workOnce(connected func()) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := w.service.Work(ctx)
	if err != nil {
		return err
	}
	side := &workStream{cancel: cancel}
	w.mu.Lock()
	w.current = side
	w.mu.Unlock()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		w.sendOn(side, stream)
	}()
	var result error
	why := "the Work stream ended"
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err != nil {
			if err != io.EOF {
				result = err
				why = fmt.Sprintf("the Work stream broke: %s %s", status.Code(err), status.Convert(err).Message())
			} else if !w.isStopping() {
				result = errServerEnded
			}
			break
		}
		if first {
			w.mu.Lock()
			if !w.stopping {
				w.stream = side
			}
			w.notify()
			w.mu.Unlock()
			connected()
		}
		// Leases first: a lease cancelled before this message went is in it
		// with its cancellation. Cancellations before results: an
		// acknowledgement of a job cancelled meanwhile is refused, and that
		// refusal is no lost lease.
		for _, lease := range msg.GetLeases() {
			w.accept(lease)
		}
		for _, id := range msg.GetCancelledJobIds() {
			w.jobCancelled(id)
		}
		if err := w.takeResults(side, msg.GetResults()); err != nil {
			result, why = err, err.Error()
			break
		}
	}
	cancel()
	w.failStream(side, why)
	<-sent
	return result
}

// sendOn is the only goroutine sending on stream: start, then batches of
// acknowledgements; it half-closes once stopping and everything queued went out.
func (w *Worker) sendOn(side *workStream, stream lqv1.LeaseQueueService_WorkClient) {
	start := &lqv1.WorkRequest{Start: &lqv1.WorkStart{
		Queue:         w.opts.Queue,
		WorkerId:      w.opts.WorkerID,
		LeaseDuration: durationpb.New(w.opts.LeaseDuration),
		MaxInFlight:   int32(w.opts.Concurrency),
	}}
	if err := stream.Send(start); err != nil {
		return // Recv reports why
	}
	for {
		w.mu.Lock()
		for {
			if side.ended {
				w.mu.Unlock()
				return
			}
			if w.stream == side && len(w.outbox) > 0 {
				break
			}
			if w.stopping {
				// Everything queued went out: the server answers it and ends the stream.
				if w.stream == side {
					w.stream = nil
					w.notify()
				}
				side.ended = true
				w.mu.Unlock()
				_ = stream.CloseSend()
				return
			}
			w.waitChange(time.Time{})
		}
		w.mu.Unlock()
		batch := w.takeAfterWindow(func() bool { return w.stream == side }, func(batch []*pending) {
			now := time.Now()
			for _, p := range batch {
				p.sentAt = now
			}
			side.awaiting = append(side.awaiting, batch...)
		})
		if batch == nil {
			continue
		}
		if err := stream.Send(&lqv1.WorkRequest{Acks: acksOf(batch)}); err != nil {
			return // Recv reports why; failStream sends the batch again
		}
	}
}

func (w *Worker) takeResults(side *workStream, results []*lqv1.AcknowledgementResult) error {
	for _, r := range results {
		w.mu.Lock()
		var p *pending
		if len(side.awaiting) > 0 {
			p = side.awaiting[0]
			side.awaiting[0] = nil
			side.awaiting = side.awaiting[1:]
		}
		w.mu.Unlock()
		if p == nil || p.ack.GetJobId() != r.GetJobId() {
			due := "no acknowledgement"
			if p != nil {
				due = "job " + p.ack.GetJobId()
			}
			return status.Errorf(codes.Internal, "the Work stream answered job %s where %s was due", r.GetJobId(), due)
		}
		w.settle(p, r.GetStatus())
	}
	return nil
}

// failStream ends a stream: every unanswered acknowledgement may or may not have been applied.
func (w *Worker) failStream(side *workStream, why string) {
	w.mu.Lock()
	side.ended = true
	if w.stream == side {
		w.stream = nil
	}
	if w.current == side {
		w.current = nil
	}
	unanswered := side.awaiting
	side.awaiting = nil
	w.notify()
	w.mu.Unlock()
	for _, p := range unanswered {
		w.unanswered(p, why)
	}
}
