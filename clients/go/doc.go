// Package leasequeue is the Go worker and producer SDK for LeaseQueue, a
// durable background-job server, over its gRPC API (leasequeue.v1).
//
//	conn, err := leasequeue.Dial("http://127.0.0.1:8080")
//	w := leasequeue.NewWorker(conn, leasequeue.WorkerOptions{Queue: "emails", Concurrency: 8})
//	w.Handle("welcome", func(ctx context.Context, job *leasequeue.Job) (any, error) {
//		return map[string]any{"sent": true}, nil
//	})
//	err = w.Run(ctx) // drains when ctx ends
//
// The worker takes one Work stream (leases down in batches, acknowledgements
// up in batches); on a server without Work it takes StreamClaims for leases
// and Acknowledge calls for acknowledgements; where neither stream is served
// (a proxy that passes only unary calls) it sends Claims that carry the
// acknowledgements queued since the last one (docs/api.md, Claim with acks),
// one at a time for as many leases as slots are free: such a Claim does not
// wait, one carrying nothing long-polls, and acknowledgements due during a
// long-poll (or heartbeats while every slot is busy) go by Acknowledge at
// once. While no stream is open
// (reconnecting with jittered backoff, or draining) acknowledgements go by
// Acknowledge, so held leases stay heartbeated and finished jobs are reported
// once the server is back. The protocol is the one docs/writing-a-worker.md
// describes.
//
// The package builds in GOPATH mode against the generated code in the
// repository's gen/go (import path leasequeue/gen/go/leasequeue/v1, the
// proto's go_package): see README.md.
package leasequeue
