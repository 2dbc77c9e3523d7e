"""OpenTelemetry, when the application has it: the CONSUMER span of each attempt, and the producer's trace context.

Through the OpenTelemetry API package (`opentelemetry-api`, import name
`opentelemetry`) alone: the application configures its own SDK (a tracer
provider and exporter); without one the API is a no-op. When the package is
not importable, ENABLED is False, nothing else is imported, and every function
here does nothing.

Each attempt's span (docs/writing-a-worker.md "Tracing", the same span the
TypeScript SDK opens) is named `process <queue>`, of kind CONSUMER, a child of
the job's trace context (Job.trace_context, docs/api.md "Trace context") or,
with `link`, the root of a new trace linked to it. Attributes, after
OpenTelemetry's messaging semantic conventions: messaging.system `leasequeue`,
messaging.destination.name (the queue), messaging.message.id (the job's id),
messaging.operation.type and messaging.operation.name `process`; and
leasequeue.job.id, leasequeue.job.task, leasequeue.job.attempt (the job's
attempts count, this attempt included), leasequeue.worker.id and, at the end,
leasequeue.attempt.outcome (complete, fail or snooze). A failed attempt's span
has the error status and the error's text.

The job's context is W3C Trace Context whatever propagators the application
set globally, so it is read and written with the API's
TraceContextTextMapPropagator itself.

Tracing never decides a job's fate: an error raised by the application's
tracer provider or its spans is logged (leasequeue.worker) and the attempt
runs, and reports its outcome, without a span.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, ContextManager, Dict, Mapping, Optional

from leasequeue._ports import SpanJob

try:
    from opentelemetry import trace as _trace
    from opentelemetry.context import Context as _Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator as _Propagator
except ImportError:
    ENABLED = False
else:
    ENABLED = True
    _PROPAGATOR = _Propagator()

#: The instrumentation scope of the SDK's spans (the TypeScript SDK's too).
SCOPE = "leasequeue-worker"

_log = logging.getLogger("leasequeue.worker")


def start_attempt(job: SpanJob, worker_id: str, link: bool) -> Any:
    """Starts the CONSUMER span of one attempt of `job`; None without OpenTelemetry."""
    if not ENABLED:
        return None
    try:
        return _start_span(job, worker_id, link)
    except Exception:  # noqa: BLE001 - the application's tracer failing is no reason to drop the attempt
        _log.warning("job %s: the attempt's span did not start", job.id, exc_info=True, extra={"job_id": job.id})
        return None


def _start_span(job: SpanJob, worker_id: str, link: bool) -> Any:
    carrier: Dict[str, str] = dict(job.proto.trace_context)
    parent = _PROPAGATOR.extract(carrier)
    producer = _trace.get_current_span(parent).get_span_context()
    links = None
    if link and producer.is_valid:
        parent, links = _Context(), [_trace.Link(producer)]
    attributes = {
        "messaging.system": "leasequeue",
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.id,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "leasequeue.job.id": job.id,
        "leasequeue.job.task": job.task,
        "leasequeue.job.attempt": job.attempts,
        "leasequeue.worker.id": worker_id,
    }
    tracer = _trace.get_tracer(SCOPE)
    return tracer.start_span(
        f"process {job.queue}", context=parent, kind=_trace.SpanKind.CONSUMER, attributes=attributes, links=links
    )


def within(span: Any) -> ContextManager[Any]:
    """The handler runs inside this: the attempt's span is the current one (the spans it opens are its children)."""
    if span is None:
        return contextlib.nullcontext()
    # The outcome, not the exception, decides the status (a Snooze is no error): end_attempt sets it.
    return _trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)


def end_attempt(span: Any, kind: str, error: str, permanent: bool) -> None:
    """Ends the span with how the attempt ended (`kind`: complete, fail or snooze)."""
    if span is None:
        return
    try:
        span.set_attribute("leasequeue.attempt.outcome", kind)
        if kind == "fail":
            span.set_status(_trace.Status(_trace.StatusCode.ERROR, error))
            if permanent:
                span.set_attribute("leasequeue.attempt.permanent", True)
        span.end()
    except Exception:  # noqa: BLE001 - the outcome is already queued; only the span is lost
        _log.warning("the attempt's span did not end", exc_info=True)


def current_trace_context() -> Dict[str, str]:
    """The current span's context as SubmitRequest.trace_context takes it (traceparent, tracestate); {} without one."""
    if not ENABLED:
        return {}
    carrier: Dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return {key: carrier[key] for key in ("traceparent", "tracestate") if carrier.get(key)}


def checked_trace_context(value: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """submit()'s `trace_context`: None takes the current span's; a mapping is sent as given."""
    if value is None:
        return current_trace_context()
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError("trace_context: must be a mapping of str to str (traceparent, tracestate)")
    unknown = sorted(set(value) - {"traceparent", "tracestate"})
    if unknown:
        raise ValueError(f"trace_context: unknown key {unknown[0]!r} (only traceparent and tracestate)")
    return dict(value)
