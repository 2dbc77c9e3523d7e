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
// and Acknowledge calls for acknowledgements. While no stream is open
// (reconnecting with jittered backoff, or draining) acknowledgements go by
// Acknowledge, so held leases stay heartbeated and finished jobs are reported
// once the server is back. The protocol is the one docs/writing-a-worker.md
// describes.
//
// The package builds in GOPATH mode against the generated code in the
// repository's gen/go (import path leasequeue/gen/go/leasequeue/v1, the
// proto's go_package): see README.md.
package leasequeue
