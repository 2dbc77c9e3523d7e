"""The producer side: submit jobs and read them back.

    client = leasequeue.Client("http://127.0.0.1:8080", token=None)
    job = client.submit("emails", "welcome", {"user": 42})
    print(client.get_job(job.id).state)

Calls raise grpc.RpcError with the server's code and message (docs/api.md
"Errors"); arguments the server would refuse raise ValueError or TypeError
naming the argument before anything is sent.
"""

from __future__ import annotations

import datetime
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from leasequeue import _channel, _tracing, _wire
from leasequeue._jobs import DependencyFailurePolicy as DependencyFailurePolicy
from leasequeue._jobs import Job as Job
from leasequeue._jobs import JobState as JobState
from leasequeue._wire import pb, pb_grpc


def _ids(value: Optional[Sequence[str]], field: str) -> List[str]:
    """Job ids or refs as a list; TypeError naming `field` for a lone string or a non-string."""
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(one, str) for one in value):
        raise TypeError(f"{field}: must be a list of strings, got {value!r}")
    return list(value)


def _policy(value: Union[DependencyFailurePolicy, str, None]) -> DependencyFailurePolicy:
    if value is None:
        return DependencyFailurePolicy.UNSPECIFIED
    if isinstance(value, str) and value.upper() in ("WAIT", "CANCEL", "IGNORE"):
        return DependencyFailurePolicy[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool) and value in DependencyFailurePolicy._value2member_map_:
        return DependencyFailurePolicy(value)
    raise ValueError(f"on_dependency_failure: must be a DependencyFailurePolicy or one of 'wait', 'cancel', 'ignore', got {value!r}")


def _submit_request(
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
    depends_on: Optional[Sequence[str]] = None,
    on_dependency_failure: Union[DependencyFailurePolicy, str, None] = None,
    ref: Optional[str] = None,
    depends_on_refs: Optional[Sequence[str]] = None,
) -> Any:
    """A SubmitRequest of submit()'s and submit_batch()'s arguments, checked as the server checks them."""
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
    request.depends_on.extend(_ids(depends_on, "depends_on"))
    request.on_dependency_failure = _policy(on_dependency_failure)
    if ref is not None:
        request.ref = ref
    request.depends_on_refs.extend(_ids(depends_on_refs, "depends_on_refs"))
    return request


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
        depends_on: Optional[Sequence[str]] = None,
        on_dependency_failure: Union[DependencyFailurePolicy, str, None] = None,
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
        `depends_on` (job ids) makes the job WAITING until each has
        completed; `on_dependency_failure` (a DependencyFailurePolicy, or
        "wait", "cancel", "ignore") says what one ending DEAD or CANCELLED
        does to it (docs/api.md "Dependencies").
        """
        request = _submit_request(
            queue,
            task,
            payload,
            idempotency_key=idempotency_key,
            priority=priority,
            max_attempts=max_attempts,
            delay=delay,
            group_key=group_key,
            trace_context=trace_context,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
        )
        return Job.from_proto(self._stub.Submit(request, timeout=self._timeout).job)

    def submit_batch(self, jobs: Sequence[Mapping[str, Any]]) -> List[Job]:
        """Creates 1..500 jobs at once, all or none (SubmitBatch), and returns them in order.

        Each entry is a mapping of submit()'s arguments (`queue`, `task`,
        `payload` and its keyword options), plus `ref`, the job's name within
        the batch, and `depends_on_refs`, the refs of jobs of the batch it
        depends on (before or after it): a whole graph in one call. The
        returned jobs show the refs resolved to ids in `depends_on`. An
        argument the server would refuse raises ValueError or TypeError
        naming it as `jobs[i].<argument>` before anything is sent.
        """
        if isinstance(jobs, Mapping) or not 1 <= len(jobs) <= 500:
            raise ValueError("jobs: must be a list of 1..500 mappings of submit()'s arguments")
        request = pb.SubmitBatchRequest()
        for i, job in enumerate(jobs):
            if not isinstance(job, Mapping):
                raise TypeError(f"jobs[{i}]: must be a mapping of submit()'s arguments, got {type(job).__name__}")
            try:
                request.jobs.append(_submit_request(**job))
            except (TypeError, ValueError) as err:
                text = str(err)
                # A missing or unknown argument: Python names the function, not the field.
                named = text.startswith("_submit_request() ")
                raise type(err)(f"jobs[{i}]: {text[len('_submit_request() '):]}" if named else f"jobs[{i}].{text}") from None
        reply = self._stub.SubmitBatch(request, timeout=self._timeout)
        return [Job.from_proto(one.job) for one in reply.results]

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
