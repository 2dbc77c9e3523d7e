"""Connecting and reconnecting: the Work stream, or StreamClaims on a server without it, or Claims where
neither stream is served, with backoff between attempts; stopping instead on a refusal no retry can cure."""

from __future__ import annotations

from typing import Optional

import grpc

from leasequeue._backoff import backoff_delay
from leasequeue._common import _FINAL, WorkerEvent, _log
from leasequeue._work import _ProtocolError
from leasequeue.errors import Refused


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
            err_details = ""
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
                err_details = err.details() or ""
                why = f"{code.name} {err_details}"
                if path != "unary" and code == grpc.StatusCode.UNIMPLEMENTED:
                    path = "stream_claims" if path == "work" else "unary"
                    _log.info("the server has no %s stream: using %s", "Work" if path == "stream_claims" else "StreamClaims", names[path])
                    continue
            except _ProtocolError as err:
                why = str(err)
            if self._stopping:
                break
            # An INVALID_ARGUMENT naming an acknowledgement (acks[i]...) is about that one, not the worker.
            if code in _FINAL and not (code == grpc.StatusCode.INVALID_ARGUMENT and err_details.startswith("acks[")):
                self._refused(code, err_details)  # type: ignore[arg-type]
                break
            delay = backoff_delay(failures[0], *self._backoff)
            failures[0] += 1
            _log.warning("stream broke: %s; reconnecting in %.2fs", why, delay)
            self._emit(WorkerEvent("disconnected", message=why, code=code.name if code else "", retry_in=delay))
            self._stop_event.wait(delay)

    def _refused(self, code: grpc.StatusCode, details: str) -> None:
        """Stops the worker on a refusal no retry can cure: run() drains, then raises Refused."""
        advice = {
            grpc.StatusCode.UNAUTHENTICATED: "give the worker a token that is in the server's LEASEQUEUE_AUTH_FILE",
            grpc.StatusCode.PERMISSION_DENIED: f"the token's entry needs the role worker and, if it lists queues, {self.queue}",
            grpc.StatusCode.UNIMPLEMENTED: "the server serves none of the worker's paths: check the target",
        }.get(code, "the server does not accept the worker's request: check its options")
        _log.error("the server refused the worker: %s %s; %s; stopping", code.name, details, advice)
        with self._lock:
            self._failure = Refused(code, details)
        self._emit(WorkerEvent("error", message=details, code=code.name))
        self.stop()
