// Command go-worker is a LeaseQueue worker on the Go SDK (clients/go) for the task demo.add.
// Settings from the environment: LEASEQUEUE_URL, LEASEQUEUE_QUEUE, LEASEQUEUE_TOKEN (README.md).
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	leasequeue "leasequeue/clients/go"
)

func main() {
	conn, err := leasequeue.Dial(os.Getenv("LEASEQUEUE_URL"), leasequeue.WithToken(os.Getenv("LEASEQUEUE_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	w := leasequeue.NewWorker(conn, leasequeue.WorkerOptions{Queue: os.Getenv("LEASEQUEUE_QUEUE"), Concurrency: 4})
	w.Handle("demo.add", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		var in struct{ A, B *float64 }
		if err := job.Decode(&in); err != nil || in.A == nil || in.B == nil {
			return nil, leasequeue.Permanent(errors.New("demo.add needs numbers a and b"))
		}
		return map[string]float64{"sum": *in.A + *in.B}, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil { // drains when ctx ends, then returns nil
		log.Fatal(err)
	}
}
