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
Acknowledge calls for acknowledgements; where neither stream is served (a
proxy that passes only unary calls), Claims that carry the acknowledgements
queued since the last one (docs/api.md, Claim with acks: _unary.py). While no
stream is open (reconnecting with jittered backoff, or draining),
acknowledgements go by Acknowledge, so held leases stay heartbeated and
finished jobs are reported once the server is back.

Each lease is in one state at a time:

    waiting --start--> running --handler returns--> finishing --answered--> done
       |                  |                            |
       +------------------+-----lease refused----------+--> lost (nothing is sent for it)
       +------------------+-----job cancelled----------+--> cancelled (nothing is sent for it)
                          +-----drain timeout------------> abandoned (left to lease expiry)

A lease waits only while `concurrency` handlers already run (handlers of an
earlier stream that broke). Heartbeats go every `heartbeat_interval` in every
live state; a progress report brings the next one forward to a second away.
The local deadline (a lease duration from arrival, or from the last heartbeat
the server took) errs early: past it the handler is told (`job.lease_lost`)
before another worker can get the job.

A job cancelled while the worker holds it (Cancel with include_running) is
announced on the stream (Work's `cancelled_job_ids`, a StreamClaims message
with `cancelled_job_id`): its handler is told (`job.cancelled`; an `async def`
handler's task is cancelled), its heartbeats stop, and no outcome is sent for
it; its slot frees when the handler returns. On the unary path nothing is
announced: the next heartbeat or outcome is refused, and the lease is lost.

An outcome whose answer never came (the stream broke, the call failed) is sent
again while its lease may still hold. A second send of an outcome that the
first one applied is refused by the server (the lease token is spent), so a
job is never acknowledged twice.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import os
import re
import signal
import socket
import threading
from typing import Any, Callable, Deque, Dict, Optional

from leasequeue import _channel, _wire
from leasequeue._acks import _Acks, _Pending
from leasequeue._attempt import _Attempts, _Pool
from leasequeue._claims import _Claims
from leasequeue._common import (  # noqa: F401 - the timings are part of this module's names
    ACK_ANSWER_TIMEOUT,
    CLAIM_WAIT,
    FINAL_ACK_GRACE,
    HEARTBEAT_RETRY,
    PROGRESS_DELAY,
    RESEND_PAUSE,
    WorkerEvent,
    _log,
)
from leasequeue._connect import _Connect
from leasequeue._drain import _Drain
from leasequeue._lease import Dependency, H, Handler, LeasedJob, _Held, _Leases  # noqa: F401 - LeasedJob and Dependency are this module's names
from leasequeue._timers import _Timers
from leasequeue._unary import _Unary
from leasequeue._wire import pb, pb_grpc
from leasequeue._work import _Work, _WorkStream
from leasequeue.errors import Refused

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
_WORKER_ID = re.compile(r"[A-Za-z0-9._:@/-]{1,128}")


def _ignore_connectivity(_state: Any) -> None:
    pass


class Worker(_Connect, _Work, _Claims, _Unary, _Leases, _Attempts, _Acks, _Timers, _Drain):
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
    trace_link         with OpenTelemetry importable, start each attempt's CONSUMER span as the root
                       of a new trace linked to the job's trace context instead of as its child
                       (docs/writing-a-worker.md "Tracing"; _tracing.py)

    Every option is checked here, before anything connects: TypeError naming it for a
    value of the wrong type, ValueError for one out of range.
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
        trace_link: bool = False,
    ) -> None:
        # Each check names its option: TypeError for a value of the wrong type, ValueError for one out of range.
        self._host, self._tls = _channel.parse_target(target)
        if not isinstance(queue, str):
            raise TypeError(f"queue: must be a string, got {type(queue).__name__}")
        if not _NAME.fullmatch(queue):
            raise ValueError(f"queue: {queue!r} must match {_NAME.pattern}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise TypeError(f"concurrency: must be an integer, got {type(concurrency).__name__}")
        if not 1 <= concurrency <= _wire.CONCURRENCY[1]:
            raise ValueError(f"concurrency: must be an integer within 1..{_wire.CONCURRENCY[1]}, got {concurrency!r}")
        token = _channel.check_token(token)
        lease = _wire.seconds_of(lease_duration, "lease_duration", *_wire.LEASE_SECONDS)
        interval = lease / 3 if heartbeat_interval is None else _wire.seconds_of(heartbeat_interval, "heartbeat_interval", 0.01, lease)
        if interval >= lease:
            raise ValueError("heartbeat_interval: must be shorter than lease_duration")
        if worker_id is None:
            worker_id = f"py-{socket.gethostname()}-{os.getpid()}"[:128]
        if not isinstance(worker_id, str):
            raise TypeError(f"worker_id: must be a string, got {type(worker_id).__name__}")
        if not _WORKER_ID.fullmatch(worker_id):
            raise ValueError("worker_id: must be 1-128 characters of [A-Za-z0-9._:@/-]")
        drain = _wire.seconds_of(drain_timeout, "drain_timeout", 0, 7 * 24 * 3600)
        if root_certificates is not None:
            if not isinstance(root_certificates, bytes):
                raise TypeError(f"root_certificates: must be PEM bytes, got {type(root_certificates).__name__}")
            if not self._tls:
                raise ValueError("root_certificates: only with an https:// target")
        if not isinstance(reconnect_backoff, (tuple, list)) or len(reconnect_backoff) != 2:
            raise TypeError(f"reconnect_backoff: give (first, largest) seconds, got {type(reconnect_backoff).__name__}")
        first = _wire.seconds_of(reconnect_backoff[0], "reconnect_backoff", 0, 24 * 3600)
        largest = _wire.seconds_of(reconnect_backoff[1], "reconnect_backoff", 0, 24 * 3600)
        if not 0 < first <= largest:
            raise ValueError("reconnect_backoff: give (first, largest) seconds with 0 < first <= largest")
        window = _wire.seconds_of(ack_batch_window, "ack_batch_window", 0, 1)
        if on_event is not None and not callable(on_event):
            raise TypeError(f"on_event: must be callable, got {type(on_event).__name__}")
        if not isinstance(handle_signals, bool):
            raise TypeError(f"handle_signals: must be True or False, got {type(handle_signals).__name__}")
        if not isinstance(trace_link, bool):
            raise TypeError(f"trace_link: must be True or False, got {type(trace_link).__name__}")

        self.target = target
        self.queue = queue
        self.concurrency = concurrency
        self.worker_id = worker_id
        self._token = token
        self._root_certificates = root_certificates
        self._lease_seconds = lease
        self._heartbeat_interval = interval
        self._drain_timeout = drain
        self._backoff = (first, largest)
        self._ack_batch_window = window
        self._on_event = on_event
        self._handle_signals = handle_signals
        self._trace_link = trace_link
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
        self._claims_call: Any = None  # the StreamClaims call open now, or the Claim long-poll pending
        # The unary path's Claim: None (not on that path), "idle" (none on its
        # way), "prompt" (one that answers at once) or "waiting" (a long-poll).
        self._claim_state: Optional[str] = None
        self._stopping = False
        self._failure: Optional[Refused] = None  # the refusal the worker stopped on, raised by run()
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
        of the queue has one). A job cancelled while it runs sets
        job.cancelled (and cancels an async handler's task); nothing is sent
        for it, whatever the handler then returns or raises.
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
        """Works until stop(), SIGTERM or SIGINT; then drains (see drain_timeout) and returns.

        Raises Refused, after the same drain, when the server refused the worker in a
        way no retry can cure (INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED,
        UNIMPLEMENTED); any other failure is retried with backoff.
        """
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
        with self._lock:
            failure = self._failure
        if failure is not None:
            raise failure

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
