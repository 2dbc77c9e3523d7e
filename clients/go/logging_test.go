package leasequeue

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLogfmtLoggerWritesOneLineOfKeyValuePairsPerRecord(t *testing.T) {
	var out bytes.Buffer
	l := LogfmtLogger(&out).(*logfmtLogger)
	l.now = func() time.Time { return time.Date(2026, 12, 2, 4, 0, 0, 123e6, time.UTC) }
	l.Info("connected", "path", "Work", "queue", "emails")
	l.Warn("stream broke, reconnecting", "reason", `unavailable "gone" a=b`, "retry_in", 250*time.Millisecond, "empty", "")
	l.Error("odd", "bad key", 1, "dangling")
	want := `time=2026-12-02T04:00:00.123Z level=info msg=connected path=Work queue=emails
time=2026-12-02T04:00:00.123Z level=warn msg="stream broke, reconnecting" reason="unavailable \"gone\" a=b" retry_in=250ms empty=""
time=2026-12-02T04:00:00.123Z level=error msg=odd bad_key=1 !BADKEY=dangling
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// recordingLogger keeps the records it is given, as "level msg k=v k=v".
type recordingLogger struct {
	mu      sync.Mutex
	records []string
	changed chan struct{} // closed and replaced at each record, for waitFor
}

func (r *recordingLogger) add(level, msg string, keyvals []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	record := level + " " + msg
	for i := 0; i+1 < len(keyvals); i += 2 {
		record += fmt.Sprintf(" %v=%v", keyvals[i], keyvals[i+1])
	}
	r.records = append(r.records, record)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// waitFor waits for a record containing text, failing the test after testTimeout.
func (r *recordingLogger) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		r.mu.Lock()
		for _, record := range r.records {
			if strings.Contains(record, text) {
				r.mu.Unlock()
				return
			}
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("waited %s for a record %q in\n%s", testTimeout, text, strings.Join(r.records, "\n"))
		}
	}
}

func (r *recordingLogger) Info(msg string, keyvals ...any)  { r.add("info", msg, keyvals) }
func (r *recordingLogger) Warn(msg string, keyvals ...any)  { r.add("warn", msg, keyvals) }
func (r *recordingLogger) Error(msg string, keyvals ...any) { r.add("error", msg, keyvals) }

func TestTheWorkerLogsRecordsWithTheJobQueueAndWorker(t *testing.T) {
	done := lease("done", nil)
	f := newFake(t, true, done)
	logs := &recordingLogger{}
	w := NewWorker(dial(t, f), WorkerOptions{Queue: "q", WorkerID: "unit-log", Logger: logs, LogJobs: true})
	w.Handle("done", func(ctx context.Context, job *Job) (any, error) { return "ok", nil })
	stop := runWorker(t, w)
	f.outcomes(t, 1)
	stop()

	logs.mu.Lock()
	defer logs.mu.Unlock()
	all := strings.Join(logs.records, "\n")
	for _, want := range []string{
		"info worker starting concurrency=1 lease=1m0s queue=q worker_id=unit-log",
		"info connected path=Work queue=q worker_id=unit-log",
		"info completed job_id=" + done.Job.Id + " task=done queue=q worker_id=unit-log",
		"info stopping: taking no new work running=0 queue=q worker_id=unit-log",
		"info stopped queue=q worker_id=unit-log",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no record %q in\n%s", want, all)
		}
	}
}
