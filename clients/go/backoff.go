package leasequeue

import (
	"math/rand"
	"time"
)

// Backoff is jittered exponential backoff for reconnecting: the cap doubles
// from Initial to Max, and each wait is drawn from [cap/2, cap] ("equal
// jitter"), so a fleet of workers cut off by one server restart does not
// reconnect in lockstep.
type Backoff struct {
	Initial time.Duration // default 250 ms
	Max     time.Duration // default 30 s
}

// Delay is the wait before reconnect attempt number attempt (0 first).
func (b Backoff) Delay(attempt int, random func() float64) time.Duration {
	initial, max := b.Initial, b.Max
	if initial <= 0 {
		initial = 250 * time.Millisecond
	}
	if max <= 0 {
		max = 30 * time.Second
	}
	if attempt > 30 {
		attempt = 30
	}
	cap := initial << uint(attempt)
	if cap > max || cap <= 0 {
		cap = max
	}
	if random == nil {
		random = rand.Float64
	}
	return cap/2 + time.Duration(random()*float64(cap/2))
}
