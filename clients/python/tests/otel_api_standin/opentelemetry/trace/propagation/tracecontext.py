"""Stand-in of opentelemetry.trace.propagation.tracecontext (see ../../../README.md): W3C Trace Context."""

import re
import typing

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators import textmap


class TraceContextTextMapPropagator:
    """Extracts and injects the traceparent and tracestate headers (W3C Trace Context Level 1)."""

    _TRACEPARENT_HEADER_NAME = "traceparent"
    _TRACESTATE_HEADER_NAME = "tracestate"
    _TRACEPARENT_HEADER_FORMAT = (
        "^[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*$"
    )
    _TRACEPARENT_HEADER_FORMAT_RE = re.compile(_TRACEPARENT_HEADER_FORMAT)

    def extract(
        self,
        carrier: typing.Any,
        context: typing.Optional[Context] = None,
        getter: typing.Any = textmap.default_getter,
    ) -> Context:
        if context is None:
            context = Context()
        header = getter.get(carrier, self._TRACEPARENT_HEADER_NAME)
        if not header:
            return context
        match = re.search(self._TRACEPARENT_HEADER_FORMAT_RE, header[0])
        if not match:
            return context
        version, trace_id, span_id, trace_flags = match.group(1), match.group(2), match.group(3), match.group(4)
        if trace_id == "0" * 32 or span_id == "0" * 16:
            return context
        if version == "00" and match.group(5):
            return context
        if version == "ff":
            return context
        tracestate_headers = getter.get(carrier, self._TRACESTATE_HEADER_NAME)
        tracestate = trace.TraceState.from_header(tracestate_headers) if tracestate_headers else None
        span_context = trace.SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(int(trace_flags, 16)),
            trace_state=tracestate,
        )
        return trace.set_span_in_context(trace.NonRecordingSpan(span_context), context)

    def inject(
        self,
        carrier: typing.Any,
        context: typing.Optional[Context] = None,
        setter: typing.Any = textmap.default_setter,
    ) -> None:
        span = trace.get_current_span(context)
        span_context = span.get_span_context()
        if span_context == trace.INVALID_SPAN_CONTEXT:
            return
        traceparent = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
        setter.set(carrier, self._TRACEPARENT_HEADER_NAME, traceparent)
        if span_context.trace_state:
            setter.set(carrier, self._TRACESTATE_HEADER_NAME, span_context.trace_state.to_header())

    @property
    def fields(self) -> typing.Set[str]:
        return {self._TRACEPARENT_HEADER_NAME, self._TRACESTATE_HEADER_NAME}
