package leasequeue

// The timer: heartbeats when due, local lease deadlines, the Work stream's watchdog.

import (
	"fmt"
	"time"
)

// tick sends heartbeats when due, enforces local lease deadlines, and runs
// the Work stream's watchdog.
func (w *Worker) tick() {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		now := time.Now()
		wake := now.Add(time.Second)
		for _, h := range w.held {
			if (h.state == stateWaiting || h.state == stateRunning) && !now.Before(h.expiresAt) {
				w.lose(h, "EXPIRED_LOCALLY", fmt.Sprintf("no heartbeat succeeded within the lease duration of %s", w.opts.LeaseDuration))
				continue
			}
			if h.beatInFlight || !now.Before(h.expiresAt) {
				continue
			}
			if !now.Before(h.nextBeat) {
				w.queueHeartbeat(h)
				continue
			}
			if h.nextBeat.Before(wake) {
				wake = h.nextBeat
			}
			if h.expiresAt.Before(wake) {
				wake = h.expiresAt
			}
		}
		side := w.current
		stale := side != nil && !side.cancelled && len(side.awaiting) > 0 && now.Sub(side.awaiting[0].sentAt) > ackAnswerTimeout
		if stale {
			side.cancelled = true
		}
		w.unlock()
		if stale {
			w.logWarn("the Work stream left an acknowledgement unanswered: reconnecting", "after", ackAnswerTimeout)
			side.cancel()
			continue
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-t.C:
		case <-w.timerWake:
		}
		t.Stop()
	}
}
