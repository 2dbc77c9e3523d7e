"""What the server says of jobs, shared by the producer and the worker: JobState, DependencyFailurePolicy, Job."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Dict, Optional, Tuple

from leasequeue import _wire


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

    @classmethod
    def of(cls, value: int) -> "JobState":
        """The member of a wire value; UNSPECIFIED for one this release does not know."""
        return cls(value) if value in cls._value2member_map_ else cls.UNSPECIFIED


class DependencyFailurePolicy(enum.IntEnum):
    """leasequeue.v1.DependencyFailurePolicy, without its prefix: what a dependency ending DEAD or CANCELLED does to a job.

    WAIT (the default): stay WAITING while it is DEAD (a redrive lets the flow
    go on), be cancelled when it is CANCELLED. CANCEL: be cancelled. IGNORE:
    count it as finished and run, seeing it in `job.dependencies`.
    """

    UNSPECIFIED = 0
    WAIT = 1
    CANCEL = 2
    IGNORE = 3


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
    depends_on: Tuple[str, ...] = ()

    @classmethod
    def from_proto(cls, job: Any) -> "Job":
        def value(field: str) -> Any:
            return _wire.from_value(getattr(job, field)) if job.HasField(field) else None

        return cls(
            id=job.id,
            queue=job.queue,
            task=job.task,
            state=JobState.of(job.state),
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
            depends_on=tuple(job.depends_on),
        )
