"""Stand-in of opentelemetry.trace.propagation (see ../../../README.md)."""

from opentelemetry.trace import get_current_span, set_span_in_context

__all__ = ["get_current_span", "set_span_in_context"]
