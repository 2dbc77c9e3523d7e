"""The timer: heartbeats when due, local lease deadlines, the Work stream's watchdog."""

from __future__ import annotations

import time

from leasequeue._common import ACK_ANSWER_TIMEOUT, _log


class _Timers:
    """The part of Worker that runs its timer thread."""

    def _tick(self) -> None:
        """Heartbeats when due, local lease deadlines, and the Work stream's watchdog."""
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                wake = now + 1.0
                for h in list(self._held.values()):
                    if h.state in ("waiting", "running") and now >= h.expires_at:
                        self._lose(h, "EXPIRED_LOCALLY", f"no heartbeat succeeded within the lease duration of {self._lease_seconds:g}s")
                        continue
                    if h.beat_in_flight or now >= h.expires_at:
                        continue
                    if now >= h.next_beat:
                        self._queue_heartbeat(h)
                    else:
                        wake = min(wake, h.next_beat, h.expires_at)
                side = self._current
                stale = side is not None and not side.cancelled and side.awaiting and now - side.awaiting[0].sent_at > ACK_ANSWER_TIMEOUT
                if stale:
                    side.cancelled = True  # type: ignore[union-attr]
                else:
                    self._timer_wake.wait(max(0.005, wake - time.monotonic()))
                    continue
            _log.warning("the Work stream left an acknowledgement unanswered for %gs: reconnecting", ACK_ANSWER_TIMEOUT)
            side.call.cancel()  # type: ignore[union-attr]
