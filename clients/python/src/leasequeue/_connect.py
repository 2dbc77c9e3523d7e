"""Connecting and reconnecting: the Work stream, or StreamClaims on a server without it, or Claims where
neither stream is served, with backoff between attempts."""

from __future__ import annotations

from typing import Optional

import grpc

from leasequeue._backoff import backoff_delay
from leasequeue._common import _REFUSED, WorkerEvent, _log
from leasequeue._work import _ProtocolError


class _Connect:
    """The part of Worker that keeps a stream open while it works."""

    def _connect_loop(self) -> None:
        failures = [0]
        path = "work"
        names = {"work": "Work", "stream_claims": "StreamClaims and Acknowledge", "unary": "Claim with acknowledgements"}

        def connected() -> None:
            failures[0] = 0
            _log.info("connected (%s)", names[path])
            self._emit(WorkerEvent("connected"))

        while not self._stopping:
            code: Optional[grpc.StatusCode] = None
            try:
                if path == "work":
                    self._work_once(connected)
                elif path == "stream_claims":
                    self._stream_claims_once(connected)
                else:
                    self._unary_once(connected)
                why = "the server ended the stream"
            except grpc.RpcError as err:
                code = err.code()
                why = f"{code.name} {err.details()}"
                if path != "unary" and code == grpc.StatusCode.UNIMPLEMENTED:
                    path = "stream_claims" if path == "work" else "unary"
                    _log.info("the server has no %s stream: using %s", "Work" if path == "stream_claims" else "StreamClaims", names[path])
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
