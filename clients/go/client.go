package leasequeue

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	lqv1 "leasequeue/gen/go/leasequeue/v1"
)

// Client submits jobs and reads them back. Calls return grpc status errors
// with the server's code and message (docs/api.md "Errors"); arguments the
// server would refuse are refused before anything is sent, naming the field.
type Client struct {
	// Service is the generated client, for every other RPC.
	Service lqv1.LeaseQueueServiceClient
}

// NewClient makes a Client on a connection from Dial (or any grpc connection
// to the server).
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{Service: lqv1.NewLeaseQueueServiceClient(conn)}
}

// SubmitOptions are the optional fields of Submit; zero values take the
// server's defaults.
type SubmitOptions struct {
	IdempotencyKey string
	Priority       int32         // -100..100, higher first
	MaxAttempts    int32         // 0: the server's default (3)
	Delay          time.Duration // before the job becomes eligible, up to 30 days
	// TraceContext is SubmitRequest.trace_context (W3C traceparent and
	// tracestate, docs/api.md "Trace context"). Nil: in a build with -tags
	// otel, the context of the span in Submit's ctx (none without one);
	// without the tag, none. An empty map sends none.
	TraceContext map[string]string
	// DependsOn are job ids the job waits for: it is WAITING until each has
	// completed (docs/api.md "Dependencies").
	DependsOn []string
	// OnDependencyFailure is what a dependency ending DEAD or CANCELLED does
	// to the job; zero: DEPENDENCY_FAILURE_POLICY_WAIT. A graph of jobs
	// named by ref goes in one Service.SubmitBatch.
	OnDependencyFailure lqv1.DependencyFailurePolicy
}

// Submit creates a job (or returns the original for a repeated idempotency
// key). payload is anything encoding/json marshals (at most 64 KiB as JSON).
func (c *Client) Submit(ctx context.Context, queue, task string, payload any, opts *SubmitOptions) (*lqv1.Job, error) {
	value, err := jsonValue(payload, "payload", maxJSONBytes)
	if err != nil {
		return nil, err
	}
	req := &lqv1.SubmitRequest{Queue: queue, Task: task, Payload: value}
	if opts == nil || opts.TraceContext == nil {
		req.TraceContext = currentTraceContext(ctx)
	} else {
		for key := range opts.TraceContext {
			if key != "traceparent" && key != "tracestate" {
				return nil, fmt.Errorf("TraceContext: unknown key %q (only traceparent and tracestate)", key)
			}
		}
		req.TraceContext = opts.TraceContext
	}
	if opts != nil {
		req.IdempotencyKey, req.Priority, req.MaxAttempts = opts.IdempotencyKey, opts.Priority, opts.MaxAttempts
		req.DependsOn, req.OnDependencyFailure = opts.DependsOn, opts.OnDependencyFailure
		if _, known := lqv1.DependencyFailurePolicy_name[int32(opts.OnDependencyFailure)]; !known {
			return nil, fmt.Errorf("OnDependencyFailure: unknown policy %d", opts.OnDependencyFailure)
		}
		if opts.MaxAttempts < 0 || opts.MaxAttempts > 100 {
			return nil, fmt.Errorf("MaxAttempts: must be within 1..100 (0: the default), got %d", opts.MaxAttempts)
		}
		if opts.Delay != 0 {
			if err := checkDelay("Delay", opts.Delay); err != nil {
				return nil, err
			}
			req.Schedule = &lqv1.SubmitRequest_Delay{Delay: durationpb.New(opts.Delay)}
		}
	}
	res, err := c.Service.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.GetJob(), nil
}

// GetJob returns the job as stored now (codes.NotFound for an unknown id).
func (c *Client) GetJob(ctx context.Context, id string) (*lqv1.Job, error) {
	res, err := c.Service.GetJob(ctx, &lqv1.GetJobRequest{JobId: id})
	if err != nil {
		return nil, err
	}
	return res.GetJob(), nil
}

// maxWaitJob is WaitJob's longest timeout (docs/api.md "Workflows").
const maxWaitJob = 15 * time.Minute

// WaitJob waits for the job to end (COMPLETED, DEAD or CANCELLED) for at
// most timeout (0..15m; 0 answers at once) and returns it with whether it
// has ended: at the timeout, the job as it is then and false. The server
// wakes the call when the job ends, through whichever server it ends;
// nothing polls. codes.NotFound for an unknown id.
func (c *Client) WaitJob(ctx context.Context, id string, timeout time.Duration) (*lqv1.Job, bool, error) {
	if timeout < 0 || timeout > maxWaitJob {
		return nil, false, fmt.Errorf("timeout: must be within 0..15m, got %s", timeout)
	}
	res, err := c.Service.WaitJob(ctx, &lqv1.WaitJobRequest{JobId: id, Timeout: durationpb.New(timeout)})
	if err != nil {
		return nil, false, err
	}
	return res.GetJob(), res.GetFinished(), nil
}

// SubmitAndWait is Submit, then WaitJob for the new job: its end, or the
// job as it is at waitTimeout and false.
func (c *Client) SubmitAndWait(ctx context.Context, queue, task string, payload any, opts *SubmitOptions, waitTimeout time.Duration) (*lqv1.Job, bool, error) {
	if waitTimeout < 0 || waitTimeout > maxWaitJob {
		return nil, false, fmt.Errorf("waitTimeout: must be within 0..15m, got %s", waitTimeout)
	}
	job, err := c.Submit(ctx, queue, task, payload, opts)
	if err != nil {
		return nil, false, err
	}
	return c.WaitJob(ctx, job.GetId(), waitTimeout)
}
