"""The unary path, where neither stream is served (a proxy that passes only unary calls): Claims that
carry the acknowledgements queued since the last one (docs/api.md, Claim with acks).

One Claim at a time asks for as many leases as slots are free. A Claim carrying acknowledgements does
not wait, so their answers come at once; the next one, carrying none, long-polls (CLAIM_WAIT seconds).
Acknowledgements never wait for a long-poll: those due while one is pending, and heartbeats while every
slot is busy, go by Acknowledge (_claims.py's _send_unary, which asks _claim_takes_acks)."""

from __future__ import annotations

import time
from typing import Callable

import grpc

from leasequeue import _wire
from leasequeue._common import ACK_ANSWER_TIMEOUT, CLAIM_WAIT
from leasequeue._wire import pb


class _Unary:
    """The part of Worker that runs the unary path."""

    def _unary_once(self, connected: Callable[[], None]) -> None:
        """The unary path: Claims carrying the queued acknowledgements, until a stop or a failed Claim."""
        first = True
        try:
            while True:
                with self._lock:
                    self._claim_state = "idle"
                    self._outbox_changed.notify_all()
                    while not self._stopping and self._room() == 0:
                        self._outbox_changed.wait()
                    if self._stopping:
                        return
                    # What is queued rides along now rather than after the batch window.
                    batch = self._take_batch()
                    wait = 0.0 if batch or first else CLAIM_WAIT
                    self._claim_state = "waiting" if wait else "prompt"
                    now = time.monotonic()
                    for p in batch:
                        p.sent_at = now
                    request = pb.ClaimRequest(
                        queue=self.queue,
                        worker_id=self.worker_id,
                        lease_duration=_wire.duration(self._lease_seconds),
                        max_jobs=min(self._room(), _wire.MAX_JOBS),
                        wait=_wire.duration(wait),
                        acks=[p.ack for p in batch],
                    )
                    self._outbox_changed.notify_all()
                call = self._stub.Claim.future(request, timeout=wait + ACK_ANSWER_TIMEOUT)
                with self._lock:
                    if wait:
                        self._claims_call = call
                        if self._stopping:
                            call.cancel()
                try:
                    response = call.result()
                except grpc.FutureCancelledError:
                    return  # stop() cancelled the long-poll, which carried nothing
                except grpc.RpcError as err:
                    for p in batch:
                        self._unanswered(p, f"Claim failed: {err.code().name} {err.details()}")
                    if self._stopping and err.code() == grpc.StatusCode.CANCELLED:
                        return
                    raise
                finally:
                    with self._lock:
                        self._claims_call = None
                if first:
                    first = False
                    connected()
                if len(response.results) != len(batch):
                    for p in batch:
                        self._unanswered(p, f"Claim answered {len(response.results)} of {len(batch)}")
                else:
                    for p, result in zip(batch, response.results):
                        self._settle(p, result.status.code, result.status.message, _wire.status_reason(result.status))
                for lease in response.leases:
                    self._accept(lease)
        finally:
            with self._lock:
                self._claim_state = None
                self._outbox_changed.notify_all()

    def _room(self) -> int:
        """Leases the worker could start now: free slots less the leases waiting for one (lock held)."""
        waiting = sum(1 for h in self._waiting if h.state == "waiting")
        return max(0, self.concurrency - self._running - waiting)

    def _claim_takes_acks(self) -> bool:
        """The unary path sends a Claim soon, which carries what is queued (lock held)."""
        if self._claim_state == "prompt":
            return True
        return self._claim_state == "idle" and not self._stopping and self._room() > 0
