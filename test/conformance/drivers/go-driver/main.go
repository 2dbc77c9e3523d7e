// Command go-driver is the conformance driver for the Go SDK (clients/go),
// run by test/conformance/. It registers the suite's tasks on a
// leasequeue.Worker configured from the environment, runs it until SIGTERM,
// and prints one JSON line per worker event on stdout ({"event": ..., "job":
// ..., "code": ..., "message": ...}) plus a "run" line each time a handler
// starts (none of the per-job lines with LEASEQUEUE_DRIVER_QUIET=1). When
// Run returns a *leasequeue.RefusedError (a refusal no retry can cure) it
// prints an "ended" line with the code and message and exits 1. Without
// LEASEQUEUE_WORKER_ID the worker takes its default id. Logs go to stderr.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	leasequeue "leasequeue/clients/go"
)

var out sync.Mutex

// quiet (LEASEQUEUE_DRIVER_QUIET=1, bench/sdks.mjs): no line per job, only the worker's own events.
var quiet = os.Getenv("LEASEQUEUE_DRIVER_QUIET") == "1"

func emit(fields map[string]any) {
	if job, _ := fields["job"].(string); quiet && job != "" {
		return
	}
	line, _ := json.Marshal(fields)
	out.Lock()
	defer out.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func seconds(name, def string) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	return time.Duration(f * float64(time.Second))
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	var opts []leasequeue.DialOption
	if token := os.Getenv("LEASEQUEUE_TOKEN"); token != "" {
		opts = append(opts, leasequeue.WithToken(token))
	}
	if caFile := os.Getenv("LEASEQUEUE_CA_FILE"); caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			log.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		opts = append(opts, leasequeue.WithTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	}
	conn, err := leasequeue.Dial(os.Getenv("LEASEQUEUE_URL"), opts...)
	if err != nil {
		log.Fatal(err)
	}
	concurrency, _ := strconv.Atoi(os.Getenv("LEASEQUEUE_CONCURRENCY"))
	w := leasequeue.NewWorker(conn, leasequeue.WorkerOptions{
		Queue:            os.Getenv("LEASEQUEUE_QUEUE"),
		Concurrency:      concurrency,
		WorkerID:         os.Getenv("LEASEQUEUE_WORKER_ID"),
		LeaseDuration:    seconds("LEASEQUEUE_LEASE_SECONDS", "10"),
		DrainTimeout:     seconds("LEASEQUEUE_DRAIN_SECONDS", "10"),
		ReconnectBackoff: leasequeue.Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
		LogJobs:          !quiet,
		OnEvent: func(e leasequeue.Event) {
			emit(map[string]any{"event": e.Kind, "job": e.JobID, "code": strings.ToLower(codeName(e.Code)), "message": e.Message})
		},
	})
	started := func(job *leasequeue.Job) {
		emit(map[string]any{"event": "run", "job": job.ID, "attempt": job.Attempts})
	}
	field := func(job *leasequeue.Job, name string) any { return job.Payload.(map[string]any)[name] }
	sleep := func(ctx context.Context, s any) {
		select {
		case <-time.After(time.Duration(s.(float64) * float64(time.Second))):
		case <-ctx.Done():
		}
	}

	w.Handle("echo", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		return map[string]any{"echo": job.Payload}, nil
	})
	w.Handle("fail", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		return nil, errors.New(field(job, "message").(string))
	})
	w.Handle("permanent", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		return nil, leasequeue.Permanent(errors.New(field(job, "message").(string)))
	})
	w.Handle("snooze", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		if job.Deliveries == 1 {
			return nil, leasequeue.Snooze(time.Duration(field(job, "seconds").(float64) * float64(time.Second)))
		}
		return map[string]any{"attempts": job.Attempts, "deliveries": job.Deliveries}, nil
	})
	// hold reports `progress` (if given), then runs until the test creates
	// `file`, or until its ctx ends (the lease was lost, the drain timeout
	// passed, or the job was cancelled while it ran: the worker sends nothing
	// for it then, whatever it returns).
	w.Handle("hold", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		progress := field(job, "progress")
		if progress != nil {
			if err := job.Progress(progress); err != nil {
				return nil, err
			}
		}
		file := field(job, "file").(string)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := os.Stat(file); err == nil {
				break
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return map[string]any{"reported": progress}, nil
			}
		}
		return map[string]any{"reported": progress}, nil
	})
	w.Handle("sleep", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		sleep(ctx, field(job, "seconds"))
		return map[string]any{"slept": field(job, "seconds")}, nil
	})
	w.Handle("noop", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		return nil, nil
	})
	// deps reports the dependencies it sees, and the echo.n of each result
	// an "echo" dependency returned, decoded into a struct.
	w.Handle("deps", func(ctx context.Context, job *leasequeue.Job) (any, error) {
		started(job)
		deps, decoded := []map[string]any{}, []int{}
		for _, d := range job.Dependencies() {
			state := strings.TrimPrefix(d.State.String(), "JOB_STATE_")
			deps = append(deps, map[string]any{"id": d.JobID, "state": state, "result": d.Result, "lastError": d.LastError})
			if d.Result != nil {
				var echoed struct {
					Echo struct{ N int } `json:"echo"`
				}
				if err := d.Decode(&echoed); err != nil {
					return nil, err
				}
				decoded = append(decoded, echoed.Echo.N)
			}
		}
		return map[string]any{"truncated": job.DependenciesTruncated(), "dependencies": deps, "decoded": decoded}, nil
	})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	emit(map[string]any{"event": "ready", "sdk": "go", "pid": os.Getpid()})
	if err := w.Run(ctx); err != nil {
		var refused *leasequeue.RefusedError
		if errors.As(err, &refused) {
			emit(map[string]any{"event": "ended", "code": strings.ToLower(codeName(refused.Code.String())), "message": refused.Message})
			os.Exit(1)
		}
		log.Fatal(err)
	}
	emit(map[string]any{"event": "exit"})
}

// codeName is a grpc code's name in snake case (PermissionDenied -> permission_denied).
func codeName(code string) string {
	var b strings.Builder
	for i, r := range code {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}
