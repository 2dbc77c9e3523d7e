"""The producer side: submit jobs and read them back.

    client = leasequeue.Client("http://127.0.0.1:8080", token=None)
    job = client.submit("emails", "welcome", {"user": 42})
    print(client.get_job(job.id).state)

Calls raise grpc.RpcError with the server's code and message (docs/api.md
"Errors"); arguments the server would refuse raise ValueError or TypeError
naming the argument before anything is sent.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from leasequeue import _channel, _tracing, _wire
from leasequeue._wire import pb, pb_grpc


class JobState(enum.IntEnum):
    """leasequeue.v1.JobState, without its prefix."""

    UNSPECIFIED = 0
    QUEUED = 1
    RUNNING = 2
    RETRY = 3
    COMPLETED = 4
    DEAD = 5
    CANCELLED = 6
    WAITING = 7


def _time(message: Any, field: str) -> Optional[datetime.datetime]:
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class Job:
    """A job as the server last reported it. `payload`, `result` and `progress` are Python values."""

    id: str
    queue: str
    task: str
    state: JobState
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    deliveries: int
    last_error: str
    result: Any
    progress: Any
    worker_id: str
    create_time: Optional[datetime.datetime]
    schedule_time: Optional[datetime.datetime]
    finish_time: Optional[datetime.datetime]
    lease_expire_time: Optional[datetime.datetime]
    trace_context: Dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_proto(cls, job: Any) -> "Job":
        def value(field: str) -> Any:
            return _wire.from_value(getattr(job, field)) if job.HasField(field) else None

        return cls(
            id=job.id,
            queue=job.queue,
            task=job.task,
            state=JobState(job.state) if job.state in JobState._value2member_map_ else JobState.UNSPECIFIED,
            payload=value("payload"),
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            deliveries=job.deliveries,
            last_error=job.last_error,
            result=value("result"),
            progress=value("progress"),
            worker_id=job.worker_id,
            create_time=_time(job, "create_time"),
            schedule_time=_time(job, "schedule_time"),
            finish_time=_time(job, "finish_time"),
            lease_expire_time=_time(job, "lease_expire_time"),
            trace_context=dict(job.trace_context),
        )


class Client:
    """Submits jobs and reads them. `target` is http://host:port, https://host:port (TLS) or host:port.

    `token` is a bearer token with the `producer` role (and `reader` for
    get_job) for a server with authentication on. `root_certificates` (PEM)
    replaces the system's CAs for https://. `timeout` is each call's deadline
    in seconds. Use it as a context manager, or call close().
    """

    def __init__(
        self,
        target: str,
        token: Optional[str] = None,
        *,
        root_certificates: Optional[bytes] = None,
        timeout: float = 10.0,
    ) -> None:
        self._channel, channel = _channel.open_channel(target, token, root_certificates)
        self._stub = pb_grpc.LeaseQueueServiceStub(channel)
        self._timeout = timeout

    def submit(
        self,
        queue: str,
        task: str,
        payload: Any = None,
        *,
        idempotency_key: Optional[str] = None,
        priority: int = 0,
        max_attempts: Optional[int] = None,
        delay: Union[float, datetime.timedelta, None] = None,
        group_key: Optional[str] = None,
        trace_context: Optional[Mapping[str, str]] = None,
    ) -> Job:
        """Creates a job (or returns the original for a repeated idempotency key) and returns it.

        `payload` is any JSON-like value (at most 64 KiB as JSON). `delay` is
        seconds (or a timedelta, up to 30 days) before it becomes eligible.
        `max_attempts` None takes the server's default (3). `group_key` needs
        a server whose API has job groups (SubmitRequest.group_key); with
        stubs that lack the field it raises ValueError rather than drop it.
        `trace_context` (W3C traceparent and tracestate, docs/api.md "Trace
        context") defaults to the current OpenTelemetry span's context when
        the `opentelemetry` package is importable (none without it, or
        without a current span); a mapping is sent as given, `{}` for none.
        """
        request = pb.SubmitRequest(queue=queue, task=task, priority=priority)
        request.payload.CopyFrom(_wire.checked_json(payload, "payload", _wire.MAX_JSON_BYTES))
        if max_attempts is not None:
            if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts <= 100:
                raise ValueError(f"max_attempts: must be an integer within 1..100, got {max_attempts!r}")
            request.max_attempts = max_attempts
        if delay is not None:
            request.delay.CopyFrom(_wire.duration(_wire.seconds_of(delay, "delay", 0, _wire.MAX_DELAY_SECONDS)))
        if idempotency_key is not None:
            request.idempotency_key = idempotency_key
        if group_key is not None:
            if "group_key" not in pb.SubmitRequest.DESCRIPTOR.fields_by_name:
                raise ValueError("group_key: this build of leasequeue has no SubmitRequest.group_key (the server's API predates job groups)")
            request.group_key = group_key
        request.trace_context.update(_tracing.checked_trace_context(trace_context))
        return Job.from_proto(self._stub.Submit(request, timeout=self._timeout).job)

    def get_job(self, id: str) -> Job:
        """The job as stored now; grpc.RpcError NOT_FOUND for an unknown id."""
        return Job.from_proto(self._stub.GetJob(pb.GetJobRequest(job_id=id), timeout=self._timeout).job)

    def wait_job(self, id: str, timeout: Union[float, datetime.timedelta] = 30.0) -> Tuple[Job, bool]:
        """Waits for the job to end (COMPLETED, DEAD or CANCELLED), at most `timeout` seconds (or a timedelta; up to 15 minutes).

        Returns the job and whether it has ended: at the timeout, the job as
        it is then and False. The server wakes the call when the job ends,
        through whichever server it ends (docs/api.md "Workflows"); nothing
        polls. grpc.RpcError NOT_FOUND for an unknown id.
        """
        seconds = _wire.seconds_of(timeout, "timeout", 0, _wire.MAX_WAIT_JOB_SECONDS)
        request = pb.WaitJobRequest(job_id=id)
        request.timeout.CopyFrom(_wire.duration(seconds))
        # The call's own deadline leaves the server time to answer at its timeout.
        reply = self._stub.WaitJob(request, timeout=seconds + self._timeout)
        return Job.from_proto(reply.job), reply.finished

    def submit_and_wait(
        self,
        queue: str,
        task: str,
        payload: Any = None,
        *,
        wait_timeout: Union[float, datetime.timedelta] = 30.0,
        **options: Any,
    ) -> Tuple[Job, bool]:
        """submit() (with the same keyword options), then wait_job() for the new job: its end, or the job at `wait_timeout`."""
        job = self.submit(queue, task, payload, **options)
        return self.wait_job(job.id, wait_timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
