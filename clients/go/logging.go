package leasequeue

// What the worker logs, as structured records: a level, a message, and
// key-value pairs.

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Logger receives the worker's log records: a message that does not change
// from one record to the next, then alternating keys (strings) and values,
// such as "job_id", id. The method set is the one of *slog.Logger (Go 1.21
// and later), so one can be given as it is; for another logging library,
// three methods that forward to it are enough. The default, LogfmtLogger,
// writes them as logfmt lines to standard error.
type Logger interface {
	Info(msg string, keyvals ...any)
	Warn(msg string, keyvals ...any)
	Error(msg string, keyvals ...any)
}

// LogfmtLogger writes each record as one logfmt line to w:
//
//	time=2026-12-02T04:00:00.123Z level=info msg="connected" path=Work queue=emails worker_id=go-host-42
//
// A value is quoted (as Go quotes strings) when it is empty or holds a
// space, a '=', a '"' or a character that is not printable. Records from
// several goroutines are written whole, one Write each. LogfmtLogger(io.Discard)
// logs nothing.
func LogfmtLogger(w io.Writer) Logger {
	return &logfmtLogger{w: w}
}

type logfmtLogger struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time // time.Now, but for tests
}

func (l *logfmtLogger) Info(msg string, keyvals ...any)  { l.write("info", msg, keyvals) }
func (l *logfmtLogger) Warn(msg string, keyvals ...any)  { l.write("warn", msg, keyvals) }
func (l *logfmtLogger) Error(msg string, keyvals ...any) { l.write("error", msg, keyvals) }

func (l *logfmtLogger) write(level, msg string, keyvals []any) {
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	var b strings.Builder
	b.WriteString("time=")
	b.WriteString(now().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteString(" level=")
	b.WriteString(level)
	b.WriteString(" msg=")
	b.WriteString(logfmtValue(msg))
	for i := 0; i < len(keyvals); i += 2 {
		key, value := fmt.Sprint(keyvals[i]), any("")
		if i+1 < len(keyvals) {
			value = keyvals[i+1]
		} else {
			key, value = "!BADKEY", keyvals[i] // as slog writes a key without a value
		}
		b.WriteByte(' ')
		b.WriteString(logfmtKey(key))
		b.WriteByte('=')
		b.WriteString(logfmtValue(fmt.Sprint(value)))
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, b.String())
}

// logfmtKey keeps a key one bare word: what would end it becomes '_'.
func logfmtKey(key string) string {
	if key == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == '=' || r == '"' || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, key)
}

func logfmtValue(v string) string {
	if v == "" || strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r == '=' || r == '"' || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(v)
	}
	return v
}

// defaultLogger is WorkerOptions.Logger when none is given.
func defaultLogger() Logger { return LogfmtLogger(os.Stderr) }

// The worker's own records carry its queue and id after their own keys.

func (w *Worker) logInfo(msg string, keyvals ...any) {
	w.opts.Logger.Info(msg, w.withWorker(keyvals)...)
}
func (w *Worker) logWarn(msg string, keyvals ...any) {
	w.opts.Logger.Warn(msg, w.withWorker(keyvals)...)
}
func (w *Worker) logError(msg string, keyvals ...any) {
	w.opts.Logger.Error(msg, w.withWorker(keyvals)...)
}

func (w *Worker) withWorker(keyvals []any) []any {
	return append(keyvals[:len(keyvals):len(keyvals)], "queue", w.opts.Queue, "worker_id", w.opts.WorkerID)
}
