// Command go-worker is a LeaseQueue worker on the Go SDK (clients/go): demo.add.
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
	conn, err := leasequeue.Dial(getenv("LEASEQUEUE_URL", "http://127.0.0.1:8080"), leasequeue.WithToken(os.Getenv("LEASEQUEUE_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	w := leasequeue.NewWorker(conn, leasequeue.WorkerOptions{Queue: getenv("LEASEQUEUE_QUEUE", "demo"), Concurrency: 4})
	w.Handle("demo.add", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		var in struct{ A, B *float64 }
		if err := job.Decode(&in); err != nil || in.A == nil || in.B == nil {
			return nil, leasequeue.Permanent(errors.New("demo.add needs numbers a and b"))
		}
		return map[string]float64{"sum": *in.A + *in.B}, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil { // drains when ctx ends
		log.Fatal(err)
	}
}

func getenv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
