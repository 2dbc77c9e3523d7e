"""The Work stream: leases (and cancellations of running jobs) down, acknowledgements up, on one bidirectional stream."""

from __future__ import annotations

import collections
import time
from typing import Any, Callable, Deque

import grpc

from leasequeue import _wire
from leasequeue._acks import _Pending
from leasequeue._ports import WorkStreamHost
from leasequeue._wire import pb


class _WorkStream:
    """The worker's side of one Work stream: the request messages, and what waits for results, in order."""

    def __init__(self, host: WorkStreamHost) -> None:
        self.host = host
        self.awaiting: Deque[_Pending] = collections.deque()
        self.ended = False
        self.cancelled = False  # by the watchdog
        self.call: Any = None

    def requests(self) -> Any:
        w = self.host
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
        w = self.host
        for result in results:
            with w._lock:
                p = self.awaiting.popleft() if self.awaiting else None
            if p is None or p.ack.job_id != result.job_id:
                due = "no acknowledgement" if p is None else f"job {p.ack.job_id}"
                raise _ProtocolError(f"the Work stream answered job {result.job_id} where {due} was due")
            w._settle(p, result.status.code, result.status.message, _wire.status_reason(result.status))

    def fail(self, why: str) -> None:
        """The stream is over: every unanswered acknowledgement may or may not have been applied."""
        w = self.host
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


class _Work:
    """The part of Worker that runs one Work stream."""

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
                for job_id in message.cancelled_job_ids:
                    self._job_cancelled(job_id)
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
