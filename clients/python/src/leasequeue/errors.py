"""What a handler raises to steer its job's outcome."""

from __future__ import annotations

import datetime
import math
from typing import Union

import grpc

_MAX_DELAY = 30 * 24 * 3600.0


class Permanent(Exception):
    """Raise from a handler to dead-letter the job now, whatever attempts are left.

    For input that can never succeed: a malformed payload, a deleted account.
    The job's `last_error` is the message.
    """


class Snooze(Exception):
    """Ends the attempt without failing it: the job is queued again after `seconds`, the attempt refunded.

    `job.snooze(seconds)` raises it; raising it yourself does the same. Once
    raised, the job is snoozed however the handler then ends (even if it
    catches this and returns).
    """

    def __init__(self, seconds: Union[float, datetime.timedelta]) -> None:
        if isinstance(seconds, datetime.timedelta):
            seconds = seconds.total_seconds()
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"snooze: seconds must be a number or a datetime.timedelta, got {type(seconds).__name__}")
        if not (math.isfinite(seconds) and 0 <= seconds <= _MAX_DELAY):
            raise ValueError(f"snooze: seconds must be within 0..{_MAX_DELAY:g} (30 days), got {seconds:g}")
        super().__init__(f"snoozed for {seconds:g} s")
        self.seconds = float(seconds)


class Refused(Exception):
    """Raised by Worker.run() when the server refused the worker in a way no retry can cure.

    `code` (a grpc.StatusCode) is INVALID_ARGUMENT (a request the server does
    not accept), UNAUTHENTICATED (no token, or one the server's auth file does
    not have), PERMISSION_DENIED (the token lacks the worker role or the
    queue) or UNIMPLEMENTED (the server serves none of the worker's paths);
    `details` is the server's message. The worker stopped (and drained) before
    run() raised it. Other failures (UNAVAILABLE, a dropped connection, ...)
    never end run(): the worker reconnects with backoff.
    """

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"the server refused the worker: {code.name}: {details}")
        self.code = code
        self.details = details
