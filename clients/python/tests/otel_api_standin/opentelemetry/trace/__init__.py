"""Stand-in of opentelemetry.trace (see ../../README.md): the API's types and functions, no SDK."""

import abc
import contextlib
import enum
import re
import typing

from opentelemetry import context as context_api
from opentelemetry.trace.status import Status, StatusCode

__all__ = [
    "INVALID_SPAN",
    "INVALID_SPAN_CONTEXT",
    "Link",
    "NonRecordingSpan",
    "Span",
    "SpanContext",
    "SpanKind",
    "Status",
    "StatusCode",
    "TraceFlags",
    "TraceState",
    "Tracer",
    "TracerProvider",
    "get_current_span",
    "get_tracer",
    "get_tracer_provider",
    "set_span_in_context",
    "set_tracer_provider",
    "use_span",
]


class SpanKind(enum.Enum):
    INTERNAL = 0
    SERVER = 1
    CLIENT = 2
    PRODUCER = 3
    CONSUMER = 4


class TraceFlags(int):
    DEFAULT = 0x00
    SAMPLED = 0x01

    @classmethod
    def get_default(cls) -> "TraceFlags":
        return cls(cls.DEFAULT)

    @property
    def sampled(self) -> bool:
        return bool(self & TraceFlags.SAMPLED)


_KEY = re.compile(r"^([a-z0-9][_0-9a-z\-\*\/]{0,255}|[a-z0-9][_0-9a-z\-\*\/]{0,240}@[a-z][_0-9a-z\-\*\/]{0,13})$")
_VALUE = re.compile(r"^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$")


class TraceState(typing.Mapping[str, str]):
    """W3C tracestate as an ordered, immutable mapping."""

    def __init__(self, entries: typing.Optional[typing.Sequence[typing.Tuple[str, str]]] = None) -> None:
        self._dict: typing.Dict[str, str] = {}
        for key, value in entries or ():
            if _KEY.match(key) and _VALUE.match(value) and key not in self._dict:
                self._dict[key] = value

    def __getitem__(self, key: str) -> str:
        return self._dict[key]

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __repr__(self) -> str:
        return f"TraceState({list(self._dict.items())!r})"

    def to_header(self) -> str:
        return ",".join(f"{key}={value}" for key, value in self._dict.items())

    @classmethod
    def from_header(cls, header_list: typing.List[str]) -> "TraceState":
        pairs: typing.List[typing.Tuple[str, str]] = []
        for header in header_list:
            for member in header.split(","):
                member = member.strip()
                if not member:
                    continue
                key, sep, value = member.partition("=")
                if not sep or not _KEY.match(key) or not _VALUE.match(value):
                    return cls()  # the real API drops a malformed tracestate whole
                pairs.append((key, value))
        return cls(pairs)


DEFAULT_TRACE_OPTIONS = TraceFlags.get_default()
DEFAULT_TRACE_STATE = TraceState()
INVALID_SPAN_ID = 0
INVALID_TRACE_ID = 0


class SpanContext(typing.Tuple[int, int, bool, TraceFlags, TraceState, bool]):
    """The immutable part of a span that propagates: ids, flags, state."""

    def __new__(
        cls,
        trace_id: int,
        span_id: int,
        is_remote: bool,
        trace_flags: typing.Optional[TraceFlags] = DEFAULT_TRACE_OPTIONS,
        trace_state: typing.Optional[TraceState] = DEFAULT_TRACE_STATE,
    ) -> "SpanContext":
        if trace_flags is None:
            trace_flags = DEFAULT_TRACE_OPTIONS
        if trace_state is None:
            trace_state = DEFAULT_TRACE_STATE
        is_valid = INVALID_TRACE_ID < trace_id <= 2**128 - 1 and INVALID_SPAN_ID < span_id <= 2**64 - 1
        return tuple.__new__(cls, (trace_id, span_id, is_remote, trace_flags, trace_state, is_valid))  # type: ignore[arg-type]

    @property
    def trace_id(self) -> int:
        return self[0]

    @property
    def span_id(self) -> int:
        return self[1]

    @property
    def is_remote(self) -> bool:
        return self[2]

    @property
    def trace_flags(self) -> TraceFlags:
        return self[3]

    @property
    def trace_state(self) -> TraceState:
        return self[4]

    @property
    def is_valid(self) -> bool:
        return self[5]


INVALID_SPAN_CONTEXT = SpanContext(trace_id=INVALID_TRACE_ID, span_id=INVALID_SPAN_ID, is_remote=False)


class Link:
    """A reference from one span to another span's context."""

    def __init__(self, context: SpanContext, attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None) -> None:
        self._context = context
        self._attributes = attributes

    @property
    def context(self) -> SpanContext:
        return self._context

    @property
    def attributes(self) -> typing.Optional[typing.Mapping[str, typing.Any]]:
        return self._attributes


class Span(abc.ABC):
    @abc.abstractmethod
    def end(self, end_time: typing.Optional[int] = None) -> None: ...

    @abc.abstractmethod
    def get_span_context(self) -> SpanContext: ...

    @abc.abstractmethod
    def set_attributes(self, attributes: typing.Mapping[str, typing.Any]) -> None: ...

    @abc.abstractmethod
    def set_attribute(self, key: str, value: typing.Any) -> None: ...

    @abc.abstractmethod
    def add_event(
        self, name: str, attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None, timestamp: typing.Optional[int] = None
    ) -> None: ...

    @abc.abstractmethod
    def update_name(self, name: str) -> None: ...

    @abc.abstractmethod
    def is_recording(self) -> bool: ...

    @abc.abstractmethod
    def set_status(self, status: typing.Union[Status, StatusCode], description: typing.Optional[str] = None) -> None: ...

    @abc.abstractmethod
    def record_exception(
        self,
        exception: BaseException,
        attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None,
        timestamp: typing.Optional[int] = None,
        escaped: bool = False,
    ) -> None: ...

    def __enter__(self) -> "Span":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.end()


class NonRecordingSpan(Span):
    """A span that records nothing: the API's spans without an SDK, and remote parents."""

    def __init__(self, context: SpanContext) -> None:
        self._context = context

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return False

    def end(self, end_time: typing.Optional[int] = None) -> None:
        pass

    def set_attributes(self, attributes: typing.Mapping[str, typing.Any]) -> None:
        pass

    def set_attribute(self, key: str, value: typing.Any) -> None:
        pass

    def add_event(self, name: str, attributes: typing.Any = None, timestamp: typing.Optional[int] = None) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass

    def set_status(self, status: typing.Union[Status, StatusCode], description: typing.Optional[str] = None) -> None:
        pass

    def record_exception(self, exception: BaseException, attributes: typing.Any = None, timestamp: typing.Optional[int] = None, escaped: bool = False) -> None:
        pass


INVALID_SPAN = NonRecordingSpan(INVALID_SPAN_CONTEXT)

_SPAN_KEY = context_api.create_key("current-span")


def set_span_in_context(span: Span, context: typing.Optional[context_api.Context] = None) -> context_api.Context:
    return context_api.set_value(_SPAN_KEY, span, context=context)


def get_current_span(context: typing.Optional[context_api.Context] = None) -> Span:
    span = context_api.get_value(_SPAN_KEY, context=context)
    if span is None or not isinstance(span, Span):
        return INVALID_SPAN
    return span


class Tracer(abc.ABC):
    @abc.abstractmethod
    def start_span(
        self,
        name: str,
        context: typing.Optional[context_api.Context] = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None,
        links: typing.Optional[typing.Sequence[Link]] = None,
        start_time: typing.Optional[int] = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span: ...

    # Abstract in the real API too: a Tracer that leaves it out cannot be made.
    @abc.abstractmethod
    def start_as_current_span(
        self,
        name: str,
        context: typing.Optional[context_api.Context] = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None,
        links: typing.Optional[typing.Sequence[Link]] = None,
        start_time: typing.Optional[int] = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> typing.Iterator[Span]: ...


class NoOpTracer(Tracer):
    """Without an SDK: every span is INVALID_SPAN, as in the real API."""

    def start_span(
        self,
        name: str,
        context: typing.Optional[context_api.Context] = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None,
        links: typing.Optional[typing.Sequence[Link]] = None,
        start_time: typing.Optional[int] = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        return INVALID_SPAN

    @contextlib.contextmanager
    def start_as_current_span(self, name: str, *args: typing.Any, **kwargs: typing.Any) -> typing.Iterator[Span]:
        yield INVALID_SPAN


class TracerProvider(abc.ABC):
    @abc.abstractmethod
    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: typing.Optional[str] = None,
        schema_url: typing.Optional[str] = None,
        attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None,
    ) -> Tracer: ...


class NoOpTracerProvider(TracerProvider):
    def get_tracer(self, instrumenting_module_name: str, instrumenting_library_version: typing.Optional[str] = None,
                   schema_url: typing.Optional[str] = None, attributes: typing.Any = None) -> Tracer:
        return NoOpTracer()


_TRACER_PROVIDER: typing.Optional[TracerProvider] = None


def set_tracer_provider(tracer_provider: TracerProvider) -> None:
    """Sets the global provider, once (the real API logs and ignores a second one)."""
    global _TRACER_PROVIDER
    if _TRACER_PROVIDER is None:
        _TRACER_PROVIDER = tracer_provider


def get_tracer_provider() -> TracerProvider:
    return _TRACER_PROVIDER if _TRACER_PROVIDER is not None else NoOpTracerProvider()


def get_tracer(
    instrumenting_module_name: str,
    instrumenting_library_version: typing.Optional[str] = None,
    tracer_provider: typing.Optional[TracerProvider] = None,
    schema_url: typing.Optional[str] = None,
    attributes: typing.Optional[typing.Mapping[str, typing.Any]] = None,
) -> Tracer:
    if tracer_provider is None:
        tracer_provider = get_tracer_provider()
    return tracer_provider.get_tracer(instrumenting_module_name, instrumenting_library_version, schema_url, attributes)


@contextlib.contextmanager
def use_span(
    span: Span, end_on_exit: bool = False, record_exception: bool = True, set_status_on_exception: bool = True
) -> typing.Iterator[Span]:
    """Makes `span` the current span for the block; on an exception, records it and sets the ERROR status unless told not to."""
    try:
        token = context_api.attach(set_span_in_context(span))
        try:
            yield span
        finally:
            context_api.detach(token)
    except BaseException as exc:  # noqa: BLE001 - re-raised
        if isinstance(span, Span) and span.is_recording():
            if record_exception:
                span.record_exception(exc)
            if set_status_on_exception:
                span.set_status(Status(StatusCode.ERROR, description=f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        if end_on_exit:
            span.end()
