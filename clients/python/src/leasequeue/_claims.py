"""The path of a server without Work, and of acknowledgements while no Work stream takes them:
leases (and cancellations of running jobs) from StreamClaims, acknowledgements by Acknowledge."""

from __future__ import annotations

import time
from typing import Callable

import grpc

from leasequeue import _wire
from leasequeue._common import ACK_ANSWER_TIMEOUT, RESEND_PAUSE, _log
from leasequeue._wire import pb


class _Claims:
    """The part of Worker that runs StreamClaims and sends acknowledgements with Acknowledge."""

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
                elif message.cancelled_job_id:
                    self._job_cancelled(message.cancelled_job_id)
        except grpc.RpcError as err:
            if not (self._stopping and err.code() == grpc.StatusCode.CANCELLED):
                raise
        finally:
            with self._lock:
                self._claims_call = None

    def _send_unary(self) -> None:
        """Sends queued acknowledgements with Acknowledge while no Work stream, nor a Claim due soon, takes them."""
        while True:
            with self._lock:
                while not self._closed and not (self._outbox and self._stream is None and not self._claim_takes_acks()):
                    self._outbox_changed.wait()
                if self._closed:
                    return
            if self._ack_batch_window > 0:
                time.sleep(self._ack_batch_window)
            with self._lock:
                if self._stream is not None or not self._outbox or self._claim_takes_acks():
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
