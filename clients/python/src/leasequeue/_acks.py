"""Acknowledgements and heartbeats: queued, taken in batches, and the answers acted on."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

import grpc

from leasequeue import _wire
from leasequeue._common import ACK_ANSWER_TIMEOUT, HEARTBEAT_RETRY, PROGRESS_DELAY, WorkerEvent, _LEASE_GONE, _log
from leasequeue._lease import _Held
from leasequeue._wire import pb


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


class _Acks:
    """The part of Worker that queues acknowledgements and settles their answers, from either path."""

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

    def _drop_queued(self, h: _Held) -> None:
        """Takes the acknowledgements of `h` that have not gone out yet off the outbox (lock held)."""
        kept = [p for p in self._outbox if p.held is not h]
        if len(kept) != len(self._outbox):
            self._outbox.clear()
            self._outbox.extend(kept)

    def _take_batch(self) -> List[_Pending]:
        """Up to 1000 queued acknowledgements (lock held)."""
        n = min(len(self._outbox), _wire.MAX_ACKS)
        return [self._outbox.popleft() for _ in range(n)]

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
