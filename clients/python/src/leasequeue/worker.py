"""The worker: leases in, a handler per lease, outcomes and heartbeats out in batches.

    worker = leasequeue.Worker("http://127.0.0.1:8080", queue="emails", concurrency=8)

    @worker.task("welcome")
    def welcome(job):
        send_mail(job.payload["user"])
        return {"sent": True}

    worker.run()   # until SIGTERM, SIGINT or worker.stop()

The path (the protocol is docs/writing-a-worker.md's): one Work stream
(leases down in batches, acknowledgements up in batches, `max_in_flight` =
`concurrency`); on a server without Work, StreamClaims for leases and
Acknowledge calls for acknowledgements. While no stream is open (reconnecting
with jittered backoff, or draining), acknowledgements go by Acknowledge, so
held leases stay heartbeated and finished jobs are reported once the server is
back.

Each lease is in one state at a time:

    waiting --start--> running --handler returns--> finishing --answered--> done
       |                  |                            |
       +------------------+-----lease refused----------+--> lost (nothing is sent for it)
                          +-----drain timeout------------> abandoned (left to lease expiry)

A lease waits only while `concurrency` handlers already run (handlers of an
earlier stream that broke). Heartbeats go every `heartbeat_interval` in every
live state; a progress report brings the next one forward to a second away.
The local deadline (a lease duration from arrival, or from the last heartbeat
the server took) errs early: past it the handler is told (`job.lease_lost`)
before another worker can get the job.

An outcome whose answer never came (the stream broke, the call failed) is sent
again while its lease may still hold. A second send of an outcome that the
first one applied is refused by the server (the lease token is spent), so a
job is never acknowledged twice.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import inspect
import logging
import os
import queue as queue_module
import re
import signal
import socket
import threading
import time
from typing import Any, Awaitable, Callable, Deque, Dict, List, NoReturn, Optional, TypeVar, Union

import grpc

from leasequeue import _channel, _wire
from leasequeue._backoff import backoff_delay
from leasequeue._wire import pb, pb_grpc
from leasequeue.errors import Permanent, Snooze

_log = logging.getLogger("leasequeue.worker")

Handler = Callable[["LeasedJob"], Union[Any, Awaitable[Any]]]
H = TypeVar("H", bound=Handler)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
_WORKER_ID = re.compile(r"[A-Za-z0-9._:@/-]{1,128}")

#: Deadline of one Acknowledge call, and how long the Work stream may leave an
#: acknowledgement unanswered before the worker takes it for dead and reconnects.
ACK_ANSWER_TIMEOUT = 10.0
#: After the drain timeout, how long the last outcomes on their way get for their answers.
FINAL_ACK_GRACE = 5.0
#: A progress report goes with a heartbeat at most this long after it was made.
PROGRESS_DELAY = 1.0
#: After a heartbeat fails for a passing reason, the next one goes this soon.
HEARTBEAT_RETRY = 1.0
#: Pause before an outcome that could not be sent goes again.
RESEND_PAUSE = 0.5

_LEASE_GONE = (grpc.StatusCode.ABORTED, grpc.StatusCode.NOT_FOUND)
_REFUSED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
_OUTCOMES = ("complete", "fail", "snooze", "release")


@dataclasses.dataclass(frozen=True)
class WorkerEvent:
    """What the worker reports to `on_event`: for metrics, tests and logs of your own.

    `kind` is one of connected, disconnected, refused (the server refused the
    worker's token: `code` says how), lease, completed, failed, snoozed,
    released, lease_lost, abandoned (left to lease expiry at the drain
    timeout), error, stopping, stopped. `retry_in` is the reconnect delay of
    disconnected and refused.
    """

    kind: str
    job_id: str = ""
    task: str = ""
    message: str = ""
    code: str = ""
    retry_in: float = 0.0


class LeasedJob:
    """A job this worker holds a lease on: what a handler gets.

    `payload` is the job's JSON as Python values (whole numbers as int).
    `lease_lost` is set when the worker no longer owns the job (the lease was
    lost, or the drain timeout passed): stop, another worker may run it, and
    whatever the handler returns is dropped. `proto` is the leasequeue.v1.Job.
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
        self.lease_lost = threading.Event()

    def progress(self, value: Any) -> None:
        """Stores `value` (JSON, at most 4 KiB) as the job's progress, sent with the next heartbeat.

        Returns at once; the heartbeat goes within a second, and reports made in
        between replace each other. The last one before the handler ends is sent
        ahead of its outcome. ValueError for a value the server would refuse.
        """
        self._held.worker._report_progress(self._held, _wire.checked_json(value, "progress", _wire.MAX_PROGRESS_BYTES))

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
    """One lease, from arrival until the worker is done with it (the module docstring's states)."""

    def __init__(self, worker: "Worker", lease: Any, now: float) -> None:
        self.worker = worker
        self.token: str = lease.lease_token
        self.job = LeasedJob(self, lease)
        self.state = "waiting"
        self.expires_at = now + worker._lease_seconds
        self.next_beat = now + worker._heartbeat_interval
        self.beat_in_flight = False
        self.progress: Any = None  # a Value not yet carried by a heartbeat the server took
        self.snoozed: Optional[Snooze] = None


class _Pending:
    """One acknowledgement on its way: queued, sent, until answered."""

    __slots__ = ("kind", "held", "ack", "progress", "queued_at", "sent_at", "resent", "note")

    def __init__(self, kind: str, held: _Held, ack: Any, progress: Any = None, note: str = "") -> None:
        self.kind = kind
        self.held = held
        self.ack = ack
        self.progress = progress
        self.queued_at = time.monotonic()
        self.sent_at = 0.0
        self.resent = False  # an earlier send got no answer: it may have been applied
        self.note = note


class _WorkStream:
    """The worker's side of one Work stream: the request messages, and what waits for results, in order."""

    def __init__(self, worker: "Worker") -> None:
        self.worker = worker
        self.awaiting: Deque[_Pending] = collections.deque()
        self.ended = False
        self.cancelled = False  # by the watchdog
        self.call: Any = None

    def requests(self) -> Any:
        w = self.worker
        yield pb.WorkRequest(
            start=pb.WorkStart(
                queue=w.queue,
                worker_id=w.worker_id,
                lease_duration=_wire.duration(w._lease_seconds),
                max_in_flight=w.concurrency,
            )
        )
        while True:
            with w._lock:
                while True:
                    if self.ended:
                        return
                    if w._stream is self and w._outbox:
                        break
                    if w._stopping and not (w._stream is self and w._outbox):
                        # Everything queued went out: the server answers it and ends the stream.
                        if w._stream is self:
                            w._stream = None
                            w._outbox_changed.notify_all()
                        self.ended = True
                        return
                    w._outbox_changed.wait()
            if w._ack_batch_window > 0 and len(w._outbox) < _wire.MAX_ACKS:
                time.sleep(w._ack_batch_window)
            with w._lock:
                if w._stream is not self or not w._outbox:
                    continue
                batch = w._take_batch()
                now = time.monotonic()
                for p in batch:
                    p.sent_at = now
                self.awaiting.extend(batch)
            yield pb.WorkRequest(acks=[p.ack for p in batch])

    def take_results(self, results: Any) -> None:
        w = self.worker
        for result in results:
            with w._lock:
                p = self.awaiting.popleft() if self.awaiting else None
            if p is None or p.ack.job_id != result.job_id:
                due = "no acknowledgement" if p is None else f"job {p.ack.job_id}"
                raise _ProtocolError(f"the Work stream answered job {result.job_id} where {due} was due")
            w._settle(p, result.status.code, result.status.message, _wire.status_reason(result.status))

    def fail(self, why: str) -> None:
        """The stream is over: every unanswered acknowledgement may or may not have been applied."""
        w = self.worker
        with w._lock:
            self.ended = True
            if w._stream is self:
                w._stream = None
            unanswered = list(self.awaiting)
            self.awaiting.clear()
            w._outbox_changed.notify_all()
        for p in unanswered:
            w._unanswered(p, why)


class _ProtocolError(Exception):
    pass


def _ignore_connectivity(_state: Any) -> None:
    pass


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
            finally:
                with self._lock:
                    self._busy -= 1

    def close(self) -> None:
        for _ in range(self._threads):
            self._work.put(None)


class Worker:
    """Runs handlers for the jobs of one queue. See the module docstring.

    target             http://host:port, https://host:port (TLS) or host:port
    queue              the queue to work
    concurrency        handlers at once (1..1000), the stream's max_in_flight
    token              bearer token with the `worker` role, for a server with authentication on
    lease_duration     seconds (1..43200) a lease lasts without a heartbeat
    worker_id          names the worker in leases and events; default py-<host>-<pid>
    heartbeat_interval seconds between a lease's heartbeats; default a third of lease_duration
    drain_timeout      seconds run() waits for running handlers after a stop; those still
                       running then are left to lease expiry (never acknowledged)
    root_certificates  PEM CAs for https:// instead of the system's
    reconnect_backoff  (first, largest) wait in seconds between reconnects, jittered
    ack_batch_window   seconds an acknowledgement waits for others to share its message
    on_event           called with a WorkerEvent for each thing the worker reports (exceptions ignored)
    handle_signals     run() stops on SIGTERM and SIGINT when called from the main thread;
                       a second signal skips the drain
    """

    def __init__(
        self,
        target: str,
        *,
        queue: str,
        concurrency: int = 1,
        token: Optional[str] = None,
        lease_duration: float = 60,
        worker_id: Optional[str] = None,
        heartbeat_interval: Optional[float] = None,
        drain_timeout: float = 30.0,
        root_certificates: Optional[bytes] = None,
        reconnect_backoff: "tuple[float, float]" = (0.25, 30.0),
        ack_batch_window: float = 0.002,
        on_event: Optional[Callable[[WorkerEvent], None]] = None,
        handle_signals: bool = True,
    ) -> None:
        if not isinstance(queue, str) or not _NAME.fullmatch(queue):
            raise ValueError(f"queue: {queue!r} must match {_NAME.pattern}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= _wire.CONCURRENCY[1]:
            raise ValueError(f"concurrency: must be an integer within 1..{_wire.CONCURRENCY[1]}, got {concurrency!r}")
        lease = _wire.seconds_of(lease_duration, "lease_duration", *_wire.LEASE_SECONDS)
        interval = lease / 3 if heartbeat_interval is None else _wire.seconds_of(heartbeat_interval, "heartbeat_interval", 0.01, lease)
        if interval >= lease:
            raise ValueError("heartbeat_interval: must be shorter than lease_duration")
        if worker_id is None:
            worker_id = f"py-{socket.gethostname()}-{os.getpid()}"[:128]
        if not isinstance(worker_id, str) or not _WORKER_ID.fullmatch(worker_id):
            raise ValueError("worker_id: must be 1-128 characters of [A-Za-z0-9._:@/-]")
        drain = _wire.seconds_of(drain_timeout, "drain_timeout", 0, 7 * 24 * 3600)
        first, largest = reconnect_backoff
        if not 0 < first <= largest:
            raise ValueError("reconnect_backoff: give (first, largest) seconds with 0 < first <= largest")
        if not 0 <= ack_batch_window <= 1:
            raise ValueError("ack_batch_window: must be within 0..1 seconds")

        self.target = target
        self.queue = queue
        self.concurrency = concurrency
        self.worker_id = worker_id
        self._host, self._tls = _channel.parse_target(target)
        self._token = _channel.check_token(token)
        self._root_certificates = root_certificates
        self._lease_seconds = lease
        self._heartbeat_interval = interval
        self._drain_timeout = drain
        self._backoff = (float(first), float(largest))
        self._ack_batch_window = float(ack_batch_window)
        self._on_event = on_event
        self._handle_signals = handle_signals
        self._handlers: Dict[str, Handler] = {}

        self._lock = threading.RLock()
        self._outbox_changed = threading.Condition(self._lock)  # acks queued, a stream came or went, stopping
        self._timer_wake = threading.Condition(self._lock)  # a heartbeat is due sooner
        self._idle_changed = threading.Condition(self._lock)  # a handler returned, a lease was settled
        self._held: Dict[str, _Held] = {}  # live leases (waiting, running, finishing) by token
        self._waiting: Deque[_Held] = collections.deque()
        self._running = 0  # handlers that have not returned, whatever their lease's state
        self._outbox: Deque[_Pending] = collections.deque()
        self._stream: Optional[_WorkStream] = None  # the Work stream that takes acknowledgements
        self._current: Optional[_WorkStream] = None  # the Work stream open now (taking acks or not)
        self._claims_call: Any = None  # the StreamClaims call open now
        self._stopping = False
        self._force = False
        self._closed = False
        self._stop_event = threading.Event()
        self._started = False
        self._pool = _Pool(concurrency)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stub: Any = None

    # -- registering -------------------------------------------------------

    def task(self, name: str) -> Callable[[H], H]:
        """Registers the decorated function as the handler of task `name`.

        A plain function runs on a pool of `concurrency` threads, an `async def`
        on the worker's asyncio loop. Its return value (JSON, at most 64 KiB) is
        the job's result; an exception fails the attempt with its text (retried
        with backoff while attempts remain); Permanent dead-letters at once;
        job.snooze() / Snooze queues it again with the attempt refunded. A job
        whose task has no handler here fails (retried, in case another worker
        of the queue has one).
        """
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"task: {name!r} must match {_NAME.pattern}")

        def register(fn: H) -> H:
            if not callable(fn):
                raise TypeError(f"task {name!r}: the handler must be callable")
            if name in self._handlers:
                raise ValueError(f"task {name!r}: a handler is registered already")
            self._handlers[name] = fn
            return fn

        return register

    # -- running -----------------------------------------------------------

    def run(self) -> None:
        """Works until stop(), SIGTERM or SIGINT; then drains (see drain_timeout) and returns."""
        if self._started:
            raise RuntimeError("run: a Worker runs once")
        if not self._handlers:
            raise RuntimeError("run: register a handler first (@worker.task(name))")
        self._started = True
        raw, channel = _channel.open_channel(self.target, self._token, self._root_certificates)
        # A connectivity watch keeps a thread polling the channel, so a redial
        # after the server comes back completes at once; without one, calls
        # that fail fast leave the connection attempt to grpc's backup poller
        # (every 5 s), and an outcome may wait past its lease.
        raw.subscribe(_ignore_connectivity, try_to_connect=True)
        self._stub = pb_grpc.LeaseQueueServiceStub(channel)
        previous = self._install_signals()
        if any(inspect.iscoroutinefunction(fn) for fn in self._handlers.values()):
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="leasequeue-asyncio", daemon=True).start()
        _log.info(
            "worker %s: queue %s at %s, concurrency %d, lease %gs, %s",
            self.worker_id,
            self.queue,
            self.target,
            self.concurrency,
            self._lease_seconds,
            "with a bearer token" if self._token else "without a token",
            extra={"worker_id": self.worker_id, "queue": self.queue},
        )
        if self._token and _channel.sent_in_clear(self._host, self._tls):
            _log.warning("the token goes to %s in clear text: use https:// outside a private network", self._host)
        threads = [
            threading.Thread(target=self._connect_loop, name="leasequeue-stream", daemon=True),
            threading.Thread(target=self._send_unary, name="leasequeue-acknowledge", daemon=True),
            threading.Thread(target=self._tick, name="leasequeue-heartbeats", daemon=True),
        ]
        for t in threads:
            t.start()
        try:
            self._stop_event.wait()
            self._drain(threads[0])
        finally:
            with self._lock:
                self._closed = True
                self._outbox_changed.notify_all()
                self._timer_wake.notify_all()
            for t in threads:
                t.join(timeout=ACK_ANSWER_TIMEOUT)
            self._pool.close()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
            raw.unsubscribe(_ignore_connectivity)
            raw.close()
            self._restore_signals(previous)
            _log.info("stopped")
            self._emit(WorkerEvent("stopped"))

    def stop(self) -> None:
        """Stops taking work; run() then drains and returns. Safe from any thread; a second call skips the drain."""
        with self._lock:
            if self._stopping:
                if not self._force:
                    self._force = True
                    self._idle_changed.notify_all()
                    _log.warning("stopping again: not waiting for running jobs")
                return
            self._stopping = True
            running = self._running
            unstarted = [h for h in self._waiting if h.state == "waiting"]
            self._waiting.clear()
            for h in unstarted:
                self._queue_outcome(h, "release", pb.Acknowledgement(job_id=h.job.id, lease_token=h.token, release=pb.AckRelease()))
            claims = self._claims_call
            self._outbox_changed.notify_all()
        _log.info("stopping: taking no new work, finishing %d running job(s)", running)
        self._emit(WorkerEvent("stopping"))
        if claims is not None:
            claims.cancel()
        self._stop_event.set()

    def _install_signals(self) -> Dict[int, Any]:
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    @staticmethod
    def _restore_signals(previous: Dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Runs between two bytecodes of the main thread: hand the work to another thread.
        _log.info("%s received", signal.Signals(signum).name)
        threading.Thread(target=self.stop, name="leasequeue-stop", daemon=True).start()

    def _emit(self, event: WorkerEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - an observer's bug must not stop the worker
            pass

    # -- the stream --------------------------------------------------------

    def _connect_loop(self) -> None:
        failures = [0]
        use_work = True

        def connected() -> None:
            failures[0] = 0
            _log.info("connected (%s)", "Work" if use_work else "StreamClaims and Acknowledge")
            self._emit(WorkerEvent("connected"))

        while not self._stopping:
            code: Optional[grpc.StatusCode] = None
            try:
                if use_work:
                    self._work_once(connected)
                else:
                    self._stream_claims_once(connected)
                why = "the server ended the stream"
            except grpc.RpcError as err:
                code = err.code()
                why = f"{code.name} {err.details()}"
                if use_work and code == grpc.StatusCode.UNIMPLEMENTED:
                    _log.info("the server has no Work stream: using StreamClaims and Acknowledge")
                    use_work = False
                    continue
            except _ProtocolError as err:
                why = str(err)
            if self._stopping:
                break
            delay = backoff_delay(failures[0], *self._backoff)
            failures[0] += 1
            if code in _REFUSED:
                advice = (
                    "give the worker a token that is in the server's LEASEQUEUE_AUTH_FILE"
                    if code == grpc.StatusCode.UNAUTHENTICATED
                    else f"the token's entry needs the role worker and, if it lists queues, {self.queue}"
                )
                _log.error("the server refused the worker: %s; %s; trying again in %.2fs", why, advice, delay)
                self._emit(WorkerEvent("refused", message=why, code=code.name, retry_in=delay))  # type: ignore[union-attr]
            else:
                _log.warning("stream broke: %s; reconnecting in %.2fs", why, delay)
                self._emit(WorkerEvent("disconnected", message=why, code=code.name if code else "", retry_in=delay))
            self._stop_event.wait(delay)

    def _work_once(self, connected: Callable[[], None]) -> None:
        side = _WorkStream(self)
        why = "the Work stream ended"
        try:
            side.call = self._stub.Work(side.requests())
            with self._lock:
                self._current = side
            first = True
            for message in side.call:
                if first:
                    first = False
                    with self._lock:
                        if not self._stopping:
                            self._stream = side
                        self._outbox_changed.notify_all()
                    connected()
                if message.results:
                    side.take_results(message.results)
                for lease in message.leases:
                    self._accept(lease)
        except grpc.RpcError as err:
            why = f"the Work stream broke: {err.code().name} {err.details()}"
            raise
        except _ProtocolError:
            side.call.cancel()
            raise
        finally:
            with self._lock:
                if self._current is side:
                    self._current = None
            side.fail(why)

    def _stream_claims_once(self, connected: Callable[[], None]) -> None:
        request = pb.StreamClaimsRequest(
            queue=self.queue,
            worker_id=self.worker_id,
            lease_duration=_wire.duration(self._lease_seconds),
            max_in_flight=self.concurrency,
        )
        call = self._stub.StreamClaims(request)
        with self._lock:
            if self._stopping:
                call.cancel()
            self._claims_call = call
        try:
            first = True
            for message in call:
                if first:
                    first = False
                    connected()
                if message.HasField("lease"):
                    self._accept(message.lease)
        except grpc.RpcError as err:
            if not (self._stopping and err.code() == grpc.StatusCode.CANCELLED):
                raise
        finally:
            with self._lock:
                self._claims_call = None

    # -- leases and handlers -------------------------------------------------

    def _accept(self, lease: Any) -> None:
        h = _Held(self, lease, time.monotonic())
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
                self._pool.submit(lambda h=h: self._returned(h, ("fail", f"no handler for task {h.job.task!r} on worker {self.worker_id}", False)))
            elif inspect.iscoroutinefunction(fn) and self._loop is not None:
                future = asyncio.run_coroutine_threadsafe(self._run_async(h, fn), self._loop)
                future.add_done_callback(lambda f: f.exception())
            else:
                self._pool.submit(lambda h=h, fn=fn: self._run_sync(h, fn))

    def _run_sync(self, h: _Held, fn: Handler) -> None:
        try:
            outcome = ("complete", fn(h.job), False)
        except BaseException as exc:  # noqa: BLE001 - every handler error is the job's outcome
            outcome = self._failure_of(exc)
        self._returned(h, outcome)

    async def _run_async(self, h: _Held, fn: Handler) -> None:
        try:
            outcome = ("complete", await fn(h.job), False)  # type: ignore[misc]
        except BaseException as exc:  # noqa: BLE001 - every handler error is the job's outcome
            outcome = self._failure_of(exc)
        self._returned(h, outcome)

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
            elif h.state == "lost":
                _log.warning("job %s: lease lost; its outcome is not reported", h.job.id, extra={"job_id": h.job.id})
            else:
                _log.warning("job %s: finished after the drain timeout; left to lease expiry", h.job.id, extra={"job_id": h.job.id})
            self._start_waiting()
            self._idle_changed.notify_all()

    def _queue_outcome(self, h: _Held, kind: str, ack: Any, note: str = "") -> None:
        """Queues Complete, Fail, Snooze or Release (lock held)."""
        h.state = "finishing"
        self._outbox.append(_Pending(kind, h, ack, note=note))
        self._outbox_changed.notify_all()

    def _queue_heartbeat(self, h: _Held) -> None:
        """Queues a heartbeat carrying any progress not yet sent (lock held)."""
        beat = pb.AckHeartbeat(lease_duration=_wire.duration(self._lease_seconds))
        progress, h.progress = h.progress, None
        if progress is not None:
            beat.progress.CopyFrom(progress)
        h.beat_in_flight = True
        self._outbox.append(_Pending("heartbeat", h, pb.Acknowledgement(job_id=h.job.id, lease_token=h.token, heartbeat=beat), progress))
        self._outbox_changed.notify_all()

    def _report_progress(self, h: _Held, value: Any) -> None:
        with self._lock:
            if h.state != "running":
                return
            h.progress = value
            h.next_beat = min(h.next_beat, time.monotonic() + PROGRESS_DELAY)
            self._timer_wake.notify_all()

    def _lose(self, h: _Held, reason: str, detail: str) -> None:
        """The lease is gone: tell the handler, send nothing more for it (lock held)."""
        if h.state in ("lost", "done", "abandoned"):
            return
        h.state = "lost"
        self._held.pop(h.token, None)
        h.job.lease_lost.set()
        self._idle_changed.notify_all()
        _log.warning("job %s: lease lost (%s): %s", h.job.id, reason, detail, extra={"job_id": h.job.id})
        self._emit(WorkerEvent("lease_lost", job_id=h.job.id, task=h.job.task, message=detail, code=reason))

    def _done(self, h: _Held) -> None:
        with self._lock:
            if h.state == "finishing":
                h.state = "done"
            self._held.pop(h.token, None)
            self._idle_changed.notify_all()

    # -- acknowledgements ------------------------------------------------------

    def _take_batch(self) -> List[_Pending]:
        """Up to 1000 queued acknowledgements (lock held)."""
        n = min(len(self._outbox), _wire.MAX_ACKS)
        return [self._outbox.popleft() for _ in range(n)]

    def _send_unary(self) -> None:
        """Sends queued acknowledgements with Acknowledge while no Work stream takes them."""
        while True:
            with self._lock:
                while not self._closed and not (self._outbox and self._stream is None):
                    self._outbox_changed.wait()
                if self._closed:
                    return
            if self._ack_batch_window > 0:
                time.sleep(self._ack_batch_window)
            with self._lock:
                if self._stream is not None or not self._outbox:
                    continue
                batch = self._take_batch()
            try:
                response = self._stub.Acknowledge(pb.AcknowledgeRequest(acks=[p.ack for p in batch]), timeout=ACK_ANSWER_TIMEOUT)
            except grpc.RpcError as err:
                why = f"Acknowledge failed: {err.code().name} {err.details()}"
                _log.warning("%s; will retry %d acknowledgement(s) while their leases hold", why, len(batch))
                for p in batch:
                    self._unanswered(p, why)
                time.sleep(RESEND_PAUSE)
                continue
            if len(response.results) != len(batch):
                for p in batch:
                    self._unanswered(p, f"Acknowledge answered {len(response.results)} of {len(batch)}")
                continue
            for p, result in zip(batch, response.results):
                self._settle(p, result.status.code, result.status.message, _wire.status_reason(result.status))

    def _unanswered(self, p: _Pending, why: str) -> None:
        """No answer came for `p`: it may have been applied. Outcomes go again while their lease may hold."""
        h = p.held
        with self._lock:
            if p.kind == "heartbeat":
                h.beat_in_flight = False
                if h.progress is None:
                    h.progress = p.progress
                h.next_beat = time.monotonic() + HEARTBEAT_RETRY
                self._timer_wake.notify_all()
                return
            if h.state != "finishing":
                return
            if time.monotonic() < h.expires_at and not self._closed:
                p.resent = True
                self._outbox.appendleft(p)
                self._outbox_changed.notify_all()
                return
            h.state = "abandoned"
            self._held.pop(h.token, None)
            self._idle_changed.notify_all()
        _log.error("job %s: %s not acknowledged (%s): left to lease expiry", h.job.id, p.kind, why, extra={"job_id": h.job.id})
        self._emit(WorkerEvent("abandoned", job_id=h.job.id, task=h.job.task, message=why))

    def _settle(self, p: _Pending, code_number: int, message: str, reason: Optional[str]) -> None:
        """Acts on the answer to one acknowledgement, from the stream or from Acknowledge."""
        code = _wire.STATUS_CODES.get(code_number, grpc.StatusCode.UNKNOWN)
        h = p.held
        job_id = h.job.id
        if p.kind == "heartbeat":
            with self._lock:
                h.beat_in_flight = False
                now = time.monotonic()
                if code == grpc.StatusCode.OK:
                    h.expires_at = p.queued_at + self._lease_seconds
                    soon = h.progress is not None
                    h.next_beat = now + (min(self._heartbeat_interval, PROGRESS_DELAY) if soon else self._heartbeat_interval)
                    self._timer_wake.notify_all()
                    return
                if h.progress is None:
                    h.progress = p.progress
                if h.state not in ("waiting", "running"):
                    return  # finishing: the outcome's answer decides
                if code in _LEASE_GONE:
                    self._lose(h, reason or code.name, f"the server refused the heartbeat: {message}")
                    return
                h.next_beat = now + min(self._heartbeat_interval, HEARTBEAT_RETRY)
                self._timer_wake.notify_all()
            _log.warning("job %s: heartbeat failed, will retry: %s %s", job_id, code.name, message, extra={"job_id": job_id})
            return
        if code == grpc.StatusCode.OK:
            self._done(h)
            self._report_done(p)
            return
        if code in _LEASE_GONE and p.resent:
            # The first send may have been applied: then this refusal is its echo.
            threading.Thread(target=self._check_applied, args=(p, code, message), daemon=True).start()
            return
        if code in _LEASE_GONE:
            with self._lock:
                self._lose(h, reason or code.name, f"the server refused the {p.kind}: {message}")
            return
        if p.kind == "complete" and code == grpc.StatusCode.INVALID_ARGUMENT:
            _log.error("job %s: the server refused the result: %s", job_id, message, extra={"job_id": job_id})
            ack = pb.Acknowledgement(job_id=job_id, lease_token=h.token)
            ack.fail.error = _wire.truncate(f"the server refused the result: {message}")
            with self._lock:
                self._queue_outcome(h, "fail", ack, f"retry: {ack.fail.error}")
            return
        self._unanswered(p, f"{code.name} {message}")

    def _check_applied(self, p: _Pending, code: grpc.StatusCode, message: str) -> None:
        """A resent outcome was refused: read the job to tell an earlier send that was applied from a lost lease."""
        h = p.held
        try:
            job = self._stub.GetJob(pb.GetJobRequest(job_id=h.job.id), timeout=ACK_ANSWER_TIMEOUT).job
        except grpc.RpcError:
            job = None
        expected = {
            "complete": (pb.JOB_STATE_COMPLETED,),
            "fail": (pb.JOB_STATE_RETRY, pb.JOB_STATE_DEAD),
            "snooze": (pb.JOB_STATE_QUEUED,),
            "release": (pb.JOB_STATE_QUEUED, pb.JOB_STATE_RETRY),
        }[p.kind]
        if job is not None and job.deliveries == h.job.deliveries and job.state in expected:
            self._done(h)
            self._report_done(p, " (applied by an earlier send)")
            return
        with self._lock:
            self._lose(h, code.name, f"the server refused the {p.kind}: {message}")
            self._done(h)

    def _report_done(self, p: _Pending, how: str = "") -> None:
        h = p.held
        kind = {"complete": "completed", "fail": "failed", "snooze": "snoozed", "release": "released"}[p.kind]
        _log.info("%s job %s%s%s", kind, h.job.id, f" ({p.note})" if p.note else "", how, extra={"job_id": h.job.id})
        self._emit(WorkerEvent(kind, job_id=h.job.id, task=h.job.task, message=p.note))

    # -- timers --------------------------------------------------------------

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

    # -- draining ------------------------------------------------------------

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
