//go:build go1.20

package leasequeue

import "context"

// haveCause: from Go 1.20 on, context.Cause says why a context ended.
const haveCause = true

func causeOf(ctx context.Context) error { return context.Cause(ctx) }
