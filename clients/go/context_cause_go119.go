//go:build !go1.20

package leasequeue

import "context"

// withCancelCause, before Go 1.20 (no context.WithCancelCause): the cause is
// dropped, and ctx.Err() is context.Canceled as for any end. context_cause.go
// is the other side.
func withCancelCause(parent context.Context) (context.Context, func(cause error)) {
	ctx, cancel := context.WithCancel(parent)
	return ctx, func(error) { cancel() }
}
