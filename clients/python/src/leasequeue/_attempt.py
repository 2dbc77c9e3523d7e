"""One handler attempt: where it runs (a thread of the pool, or the asyncio loop) and the outcome it queues."""

from __future__ import annotations

import asyncio
import inspect
import queue as queue_module
import threading
from typing import Any, Callable, Optional

from leasequeue import _tracing, _wire
from leasequeue._common import _log
from leasequeue._lease import Handler, _Held
from leasequeue._wire import pb
from leasequeue.errors import Permanent, Snooze


#: What _returned gets for a handler not started because its job was cancelled first (nothing is sent for it).
_NOT_STARTED = ("fail", "cancelled before the handler started", False)


class _Pool:
    """Up to `size` daemon threads running plain handlers (daemon: a handler left running at exit does not hold the process)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._threads = 0
        self._busy = 0
        self._work: "queue_module.SimpleQueue[Optional[Callable[[], None]]]" = queue_module.SimpleQueue()
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._busy += 1
            spawn = self._busy > self._threads and self._threads < self._size
            if spawn:
                self._threads += 1
                name = f"leasequeue-handler-{self._threads}"
        if spawn:
            threading.Thread(target=self._loop, name=name, daemon=True).start()
        self._work.put(fn)

    def _loop(self) -> None:
        while True:
            fn = self._work.get()
            if fn is None:
                return
            try:
                fn()
            except Exception:  # noqa: BLE001 - a bug of ours must not take a handler thread (and its slot) away
                _log.exception("a handler thread's task raised")
            finally:
                with self._lock:
                    self._busy -= 1

    def close(self) -> None:
        for _ in range(self._threads):
            self._work.put(None)


class _Attempts:
    """The part of Worker that starts handlers and turns what they return into an outcome."""

    def _start_waiting(self) -> None:
        """Starts waiting leases while fewer than `concurrency` handlers run (lock held)."""
        while self._running < self.concurrency and self._waiting and not self._stopping:
            h = self._waiting.popleft()
            if h.state != "waiting":
                continue
            h.state = "running"
            self._running += 1
            fn = self._handlers.get(h.job.task)
            if fn is None:
                self._pool.submit(lambda h=h: self._run_sync(h, None))
            elif inspect.iscoroutinefunction(fn) and self._loop is not None:
                future = asyncio.run_coroutine_threadsafe(self._run_async(h, fn), self._loop)
                future.add_done_callback(lambda f: f.exception())
            else:
                self._pool.submit(lambda h=h, fn=fn: self._run_sync(h, fn))

    def _run_sync(self, h: _Held, fn: Optional[Handler]) -> None:
        if h.job.cancelled.is_set():
            self._returned(h, _NOT_STARTED)
            return
        h.span = _tracing.start_attempt(h.job, self.worker_id, self._trace_link)
        if fn is None:
            self._returned(h, ("fail", f"no handler for task {h.job.task!r} on worker {self.worker_id}", False))
            return
        try:
            with _tracing.within(h.span):
                outcome = ("complete", fn(h.job), False)
        except BaseException as exc:  # noqa: BLE001 - every handler error is the job's outcome
            outcome = self._failure_of(exc)
        self._returned(h, outcome)

    async def _run_async(self, h: _Held, fn: Handler) -> None:
        # On the worker's loop, as _cancel_task is: a cancellation either finds the task here or the event set below.
        h.task = asyncio.current_task()
        if h.job.cancelled.is_set():
            self._returned(h, _NOT_STARTED)
            return
        h.span = _tracing.start_attempt(h.job, self.worker_id, self._trace_link)
        try:
            with _tracing.within(h.span):
                outcome = ("complete", await fn(h.job), False)  # type: ignore[misc]
        except BaseException as exc:  # noqa: BLE001 - every handler error is the job's outcome
            outcome = self._failure_of(exc)
        self._returned(h, outcome)

    def _cancel_handler(self, h: _Held) -> None:
        """The job of `h` was cancelled while its handler ran: cancel an async handler's task (lock held).

        A plain handler cannot be interrupted: it sees `job.cancelled`.
        """
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._cancel_task, h)
        except RuntimeError:  # the loop is closed: no handler runs on it any more
            pass

    @staticmethod
    def _cancel_task(h: _Held) -> None:
        task = h.task
        if task is not None and not task.done():
            task.cancel()

    @staticmethod
    def _failure_of(exc: BaseException) -> "tuple[str, Any, bool]":
        if isinstance(exc, Snooze):
            return ("snooze", exc.seconds, False)
        text = str(exc) or type(exc).__name__
        return ("fail", text, isinstance(exc, Permanent))

    def _returned(self, h: _Held, outcome: "tuple[str, Any, bool]") -> None:
        """The handler of `h` returned (or raised): queue its outcome, unless the lease is no longer ours."""
        kind, value, permanent = outcome
        if h.snoozed is not None:
            kind, value = "snooze", h.snoozed.seconds
        ack = pb.Acknowledgement(job_id=h.job.id, lease_token=h.token)
        note = ""
        if kind == "complete":
            try:
                result = _wire.checked_json(value, "result", _wire.MAX_JSON_BYTES) if value is not None else None
            except (TypeError, ValueError) as err:
                kind, value, permanent = "fail", f"the worker refused the result: {err}", False
                _log.error("job %s: %s", h.job.id, value, extra={"job_id": h.job.id})
            else:
                ack.complete.SetInParent()
                if result is not None:
                    ack.complete.result.CopyFrom(result)
        if kind == "fail":
            ack.fail.error = _wire.truncate(str(value))
            ack.fail.permanent = permanent
            spent = permanent or h.job.attempts >= h.job.max_attempts
            note = f"{'permanent' if permanent else 'dead' if spent else 'retry'}: {ack.fail.error}"
        elif kind == "snooze":
            ack.snooze.delay.CopyFrom(_wire.duration(value))
            note = f"{value:g}s"
        with self._lock:
            self._running -= 1
            if h.state == "running":
                if h.progress is not None and not h.beat_in_flight:
                    self._queue_heartbeat(h)  # the last progress, applied before the outcome
                self._queue_outcome(h, kind, ack, note)
            elif h.state == "cancelled":
                _log.info("job %s: cancelled; its handler returned, nothing is sent for it", h.job.id, extra={"job_id": h.job.id})
            elif h.state == "lost":
                _log.warning("job %s: lease lost; its outcome is not reported", h.job.id, extra={"job_id": h.job.id})
            else:
                _log.warning("job %s: finished after the drain timeout; left to lease expiry", h.job.id, extra={"job_id": h.job.id})
            self._start_waiting()
            self._idle_changed.notify_all()
            self._outbox_changed.notify_all()  # a slot is free: the unary path may Claim
        _tracing.end_attempt(h.span, kind, ack.fail.error if kind == "fail" else "", permanent)
