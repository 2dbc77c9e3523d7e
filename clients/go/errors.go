package leasequeue

import (
	"errors"
	"fmt"
	"time"
)

// maxDelay bounds Snooze and a submit's Delay: 30 days.
const maxDelay = 30 * 24 * time.Hour

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks a handler's error as one that can never succeed (a
// malformed payload, a deleted account): the job is dead-lettered at once,
// whatever attempts are left. Its text is the job's last_error.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or an error it wraps) came from Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// SnoozeError is what Snooze returns.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze ends the attempt without failing it: return it from a handler and
// the job is queued again after d (0..30 days), the attempt refunded. A d out
// of range is clamped into it.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	if d > maxDelay {
		d = maxDelay
	}
	return &SnoozeError{Delay: d}
}
