//go:build !go1.20

package leasequeue

import "context"

// haveCause: before Go 1.20 there is no context.Cause to read.
const haveCause = false

func causeOf(context.Context) error { return nil }
