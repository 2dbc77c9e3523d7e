//go:build go1.20

package leasequeue

import "context"

// withCancelCause is context.WithCancelCause (Go 1.20 and later), so that
// context.Cause of a handler's ctx says why it ended (ErrJobCancelled).
// context_cause_go119.go is the other side.
func withCancelCause(parent context.Context) (context.Context, func(cause error)) {
	return context.WithCancelCause(parent)
}
