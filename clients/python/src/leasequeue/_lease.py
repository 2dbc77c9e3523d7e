"""A lease the worker holds: the job a handler gets, and the lease from its arrival to its end."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, NoReturn, Optional, TypeVar, Union

from leasequeue import _wire
from leasequeue._common import PROGRESS_DELAY, WorkerEvent, _log
from leasequeue._jobs import JobState
from leasequeue._wire import pb
from leasequeue.errors import Snooze

Handler = Callable[["LeasedJob"], Union[Any, Awaitable[Any]]]
H = TypeVar("H", bound=Handler)


@dataclasses.dataclass(frozen=True)
class Dependency:
    """One direct dependency's outcome when the job was leased (docs/api.md "Dependencies").

    `state` is COMPLETED (DEAD or CANCELLED too for a job submitted with
    on_dependency_failure IGNORE); `result` its JSON as Python values, as
    `job.payload` is (whole numbers as int; None when it has none);
    `last_error` its last error ("" when none).
    """

    job_id: str
    state: JobState
    result: Any
    last_error: str

    @classmethod
    def from_proto(cls, dependency: Any) -> "Dependency":
        result = _wire.from_value(dependency.result) if dependency.HasField("result") else None
        return cls(dependency.job_id, JobState.of(dependency.state), result, dependency.last_error)


class LeasedJob:
    """A job this worker holds a lease on: what a handler gets.

    `payload` is the job's JSON as Python values (whole numbers as int).
    `lease_lost` is set when the worker no longer owns the job (the lease was
    lost, or the drain timeout passed): stop, another worker may run it, and
    whatever the handler returns is dropped. `cancelled` is set when the
    server says the job was cancelled while the worker held it (Cancel with
    include_running; an `async def` handler's task is cancelled too): stop,
    nothing is sent for the job whatever the handler returns or raises.
    `trace_context` is the job's W3C Trace Context (traceparent, tracestate;
    docs/api.md "Trace context"), {} when it has none. `dependencies` are the
    outcomes of the jobs it depends on, the first 100 in `depends_on` order
    (`dependencies_truncated` is True when there are more); `[]` for a job
    without dependencies. `proto` is the leasequeue.v1.Job.
    """

    def __init__(self, held: "_Held", lease: Any) -> None:
        job = lease.job
        self._held = held
        self.proto = job
        self.id: str = job.id
        self.queue: str = job.queue
        self.task: str = job.task
        self.payload: Any = _wire.from_value(job.payload) if job.HasField("payload") else None
        self.attempts: int = job.attempts
        self.max_attempts: int = job.max_attempts
        self.deliveries: int = job.deliveries
        self.priority: int = job.priority
        self.lease_token: str = lease.lease_token
        self.trace_context: Dict[str, str] = dict(job.trace_context)
        self.dependencies: List[Dependency] = [Dependency.from_proto(one) for one in lease.dependencies]
        self.dependencies_truncated: bool = lease.dependencies_truncated
        self.lease_lost = threading.Event()
        self.cancelled = threading.Event()

    def dependency_result(self, job_id: str) -> Any:
        """The result of the dependency `job_id` as Python values, as `payload` is (None when it has none).

        KeyError when `job_id` is not among `dependencies`.
        """
        for one in self.dependencies:
            if one.job_id == job_id:
                return one.result
        if self.dependencies_truncated:
            raise KeyError(f"job {job_id} is not among the first {len(self.dependencies)} dependencies the lease carries")
        raise KeyError(f"job {job_id} is not a dependency of this job")

    def progress(self, value: Any) -> None:
        """Stores `value` (JSON, at most 4 KiB) as the job's progress, sent with the next heartbeat.

        Returns at once; the heartbeat goes within a second, and reports made in
        between replace each other. The last one before the handler ends is sent
        ahead of its outcome. ValueError for a value the server would refuse.
        """
        self._held.report_progress(self._held, _wire.checked_json(value, "progress", _wire.MAX_PROGRESS_BYTES))

    def snooze(self, seconds: Union[float, datetime.timedelta]) -> NoReturn:
        """Ends the attempt here: the job is queued again after `seconds` (up to 30 days), the attempt refunded.

        Raises Snooze; the job is snoozed however the handler then ends.
        """
        exc = Snooze(seconds)
        self._held.snoozed = exc
        raise exc

    def __repr__(self) -> str:
        return f"LeasedJob(id={self.id!r}, task={self.task!r}, attempts={self.attempts})"


class _Held:
    """One lease, from arrival until the worker is done with it (the states of leasequeue.worker's docstring).

    `report_progress(held, value)` takes the job's progress reports (_Leases._report_progress).
    """

    def __init__(
        self, lease: Any, now: float, lease_seconds: float, heartbeat_interval: float, report_progress: Callable[["_Held", Any], None]
    ) -> None:
        self.report_progress = report_progress
        self.token: str = lease.lease_token
        self.job = LeasedJob(self, lease)
        self.state = "waiting"
        self.expires_at = now + lease_seconds
        self.next_beat = now + heartbeat_interval
        self.beat_in_flight = False
        self.progress: Any = None  # a Value not yet carried by a heartbeat the server took
        self.span: Any = None  # the attempt's OpenTelemetry span (_tracing.py), once it starts
        self.snoozed: Optional[Snooze] = None
        self.task: Optional[asyncio.Task[Any]] = None  # an async handler's task, set on the worker's loop once it starts


class _Leases:
    """The part of Worker that takes leases in and lets them go (see leasequeue.worker for the states)."""

    def _accept(self, lease: Any) -> None:
        h = _Held(lease, time.monotonic(), self._lease_seconds, self._heartbeat_interval, self._report_progress)
        _log.debug("lease job %s task=%s attempt=%d", h.job.id, h.job.task, h.job.attempts, extra={"job_id": h.job.id})
        self._emit(WorkerEvent("lease", job_id=h.job.id, task=h.job.task))
        with self._lock:
            self._held[h.token] = h
            if self._stopping:
                # Pushed before the server saw the half-close: give it back, attempt refunded.
                self._queue_outcome(h, "release", pb.Acknowledgement(job_id=h.job.id, lease_token=h.token, release=pb.AckRelease()))
                return
            self._waiting.append(h)
            self._start_waiting()
            self._timer_wake.notify_all()

    def _report_progress(self, h: _Held, value: Any) -> None:
        with self._lock:
            if h.state != "running":
                return
            h.progress = value
            h.next_beat = min(h.next_beat, time.monotonic() + PROGRESS_DELAY)
            self._timer_wake.notify_all()

    def _lose(self, h: _Held, reason: str, detail: str) -> None:
        """The lease is gone: tell the handler, send nothing more for it (lock held)."""
        if h.state in ("lost", "done", "abandoned", "cancelled"):
            return
        h.state = "lost"
        self._held.pop(h.token, None)
        h.job.lease_lost.set()
        self._idle_changed.notify_all()
        _log.warning("job %s: lease lost (%s): %s", h.job.id, reason, detail, extra={"job_id": h.job.id})
        self._emit(WorkerEvent("lease_lost", job_id=h.job.id, task=h.job.task, message=detail, code=reason))

    def _job_cancelled(self, job_id: str) -> None:
        """The server cancelled job `job_id` while this worker held its lease: tell the handler, send nothing more for it.

        Work's cancelled_job_ids and StreamClaims' cancelled_job_id say so. The handler sees job.cancelled (an
        async handler's task is cancelled), the lease's heartbeats stop, and what it had queued is dropped.
        Ignored for a job the worker no longer holds (its outcome answered, its lease lost or abandoned).
        """
        with self._lock:
            h = next((one for one in self._held.values() if one.job.id == job_id), None)
            if h is None or h.state not in ("waiting", "running", "finishing"):
                return
            running = h.state == "running"
            h.state = "cancelled"
            self._held.pop(h.token, None)
            self._drop_queued(h)  # heartbeats, or an outcome, not sent yet
            h.job.cancelled.set()
            if running:
                self._cancel_handler(h)
            # Its slot frees once the handler returns (_returned); a lease that had not started frees room now.
            self._idle_changed.notify_all()
            self._outbox_changed.notify_all()
        _log.info("job %s: cancelled while running; nothing is sent for it", job_id, extra={"job_id": job_id})
        self._emit(WorkerEvent("cancelled", job_id=job_id, task=h.job.task))

    def _done(self, h: _Held) -> None:
        with self._lock:
            if h.state == "finishing":
                h.state = "done"
            self._held.pop(h.token, None)
            self._idle_changed.notify_all()
