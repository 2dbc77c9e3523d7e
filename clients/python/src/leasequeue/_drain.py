"""The drain: after a stop, the wait for running handlers and for the answers to their outcomes."""

from __future__ import annotations

import threading
import time

from leasequeue._common import FINAL_ACK_GRACE, WorkerEvent, _log


class _Drain:
    """The part of Worker that drains it."""

    def _drain(self, stream_thread: threading.Thread) -> None:
        deadline = time.monotonic() + self._drain_timeout
        with self._lock:
            while self._held and not self._force:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._idle_changed.wait(left)
            leftovers = [h for h in self._held.values() if h.state in ("running", "waiting")]
            for h in leftovers:
                h.state = "abandoned"
                self._held.pop(h.token, None)
                h.job.lease_lost.set()
        if leftovers:
            _log.warning(
                "%d job(s) still running after the drain timeout of %gs: left to lease expiry", len(leftovers), self._drain_timeout
            )
            for h in leftovers:
                self._emit(WorkerEvent("abandoned", job_id=h.job.id, task=h.job.task, message="drain timeout"))
        grace = time.monotonic() + FINAL_ACK_GRACE
        with self._lock:
            while self._held and time.monotonic() < grace:
                self._idle_changed.wait(grace - time.monotonic())
            unanswered = list(self._held.values())
            for h in unanswered:
                h.state = "abandoned"
            self._held.clear()
        if unanswered:
            _log.warning("%d acknowledgement(s) unanswered at exit: left to lease expiry", len(unanswered))
        # The half-closed stream ends once the server has answered it.
        stream_thread.join(timeout=FINAL_ACK_GRACE)
        with self._lock:
            side = self._current
        if side is not None and side.call is not None:
            side.call.cancel()
