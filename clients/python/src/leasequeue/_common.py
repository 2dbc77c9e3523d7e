"""What the parts of the worker share: its logger, its timings, the status codes it tells apart, and WorkerEvent."""

from __future__ import annotations

import dataclasses
import logging

import grpc

_log = logging.getLogger("leasequeue.worker")

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
#: Seconds a Claim carrying no acknowledgement waits for work on the unary path (the server allows 60).
CLAIM_WAIT = 20.0

_LEASE_GONE = (grpc.StatusCode.ABORTED, grpc.StatusCode.NOT_FOUND)
#: Refusals no retry can cure: the worker stops on these (run() raises Refused) instead of reconnecting.
_FINAL = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
)
_OUTCOMES = ("complete", "fail", "snooze", "release")


@dataclasses.dataclass(frozen=True)


class WorkerEvent:
    """What the worker reports to `on_event`: for metrics, tests and logs of your own.

    `kind` is one of connected, disconnected, lease, completed, failed, snoozed,
    released, lease_lost, cancelled (the server cancelled the job while the
    worker held it: `job.cancelled` is set and no outcome is sent), abandoned
    (left to lease expiry at the drain timeout), error (the server refused the
    worker in a way no retry can cure, `code` and `message` say how: the
    worker stops, and run() raises Refused), stopping, stopped.
    `retry_in` is the reconnect delay of disconnected.
    """

    kind: str
    job_id: str = ""
    task: str = ""
    message: str = ""
    code: str = ""
    retry_in: float = 0.0
