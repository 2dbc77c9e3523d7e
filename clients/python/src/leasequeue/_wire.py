"""The generated stubs, and conversions between Python values and their messages.

The stubs are copied into the package when it is built (setup.py); this is the
only module that imports them. Limits follow docs/api.md "Bounds".
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any, Optional

import grpc
from google.protobuf import duration_pb2, struct_pb2

from leasequeue._google_rpc import error_details_pb2  # type: ignore[attr-defined]
from leasequeue.v1 import leasequeue_pb2 as pb  # type: ignore[attr-defined]
from leasequeue.v1 import leasequeue_pb2_grpc as pb_grpc  # type: ignore[attr-defined]

__all__ = ["pb", "pb_grpc", "error_details_pb2"]

#: Bytes of a payload or result as compact JSON.
MAX_JSON_BYTES = 64 * 1024
#: Bytes of a progress report as compact JSON (docs/api.md, Progress).
MAX_PROGRESS_BYTES = 4 * 1024
#: Nesting levels of a payload, result or progress (`1` is level 0, `[1]` level 1).
MAX_JSON_DEPTH = 32
#: Characters of an error text.
MAX_TEXT_CHARS = 4096
#: Acknowledgements in one Acknowledge request, Work message or Claim.
MAX_ACKS = 1000
#: Leases one Claim may ask for (max_jobs).
MAX_JOBS = 100
#: Snooze and submit delays: up to 30 days.
MAX_DELAY_SECONDS = 30 * 24 * 3600
#: WaitJob's timeout: at most 15 minutes.
MAX_WAIT_JOB_SECONDS = 15 * 60
#: Lease durations: 1 s .. 12 h.
LEASE_SECONDS = (1.0, 12 * 3600.0)
#: max_in_flight of a Work stream, and so a worker's concurrency.
CONCURRENCY = (1, 1000)
#: Integers a float64 holds exactly: JSON numbers within this come back as int.
_EXACT = 2**53

# google.rpc.Status.code -> grpc.StatusCode
STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


def to_value(obj: Any) -> Any:
    """A JSON-like Python object (dict, list, str, int, float, bool, None) as google.protobuf.Value."""
    v = struct_pb2.Value()
    _fill(v, obj, 0)
    return v


def _fill(v: Any, obj: Any, depth: int) -> None:
    if depth > MAX_JSON_DEPTH + 1:
        raise ValueError(f"is nested more than {MAX_JSON_DEPTH} levels deep")
    if obj is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        v.bool_value = obj
    elif isinstance(obj, (int, float)):
        if isinstance(obj, float) and not math.isfinite(obj):
            raise ValueError(f"{obj!r} is not a JSON number")
        v.number_value = obj
    elif isinstance(obj, str):
        v.string_value = obj
    elif isinstance(obj, dict):
        fields = v.struct_value.fields
        v.struct_value.SetInParent()
        for key, item in obj.items():
            if not isinstance(key, str):
                raise TypeError(f"object keys must be strings, got {type(key).__name__}")
            _fill(fields[key], item, depth + 1)
    elif isinstance(obj, (list, tuple)):
        values = v.list_value.values
        v.list_value.SetInParent()
        for item in obj:
            _fill(values.add(), item, depth + 1)
    else:
        raise TypeError(f"{type(obj).__name__} is not a JSON value")


def from_value(v: Any) -> Any:
    """A google.protobuf.Value as Python: numbers that are whole come back as int."""
    kind = v.WhichOneof("kind")
    if kind == "struct_value":
        return {k: from_value(x) for k, x in v.struct_value.fields.items()}
    if kind == "list_value":
        return [from_value(x) for x in v.list_value.values]
    if kind == "string_value":
        return v.string_value
    if kind == "number_value":
        n = v.number_value
        return int(n) if n.is_integer() and -_EXACT <= n <= _EXACT else n
    if kind == "bool_value":
        return v.bool_value
    return None


def checked_json(obj: Any, field: str, max_bytes: int) -> Any:
    """`obj` as a Value after checking what the server checks (size as compact JSON, nesting); else ValueError naming `field`."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{field}: is not a JSON value ({err})") from None
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ValueError(f"{field}: is {size} bytes of JSON; the limit is {max_bytes} bytes")
    depth = json_depth(obj)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{field}: is nested more than {MAX_JSON_DEPTH} levels deep")
    return to_value(obj)


def json_depth(obj: Any) -> int:
    """Nesting as docs/api.md counts it: `1` is 0, `[1]` and `{}` are 1."""
    deepest = 0
    pending = [(obj, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        level = depth + 1
        deepest = max(deepest, level)
        if level > MAX_JSON_DEPTH:
            return level
        pending.extend((child, level) for child in children)
    return deepest


def duration(seconds: float) -> Any:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(round(seconds * 1e9)))
    return d


def seconds_of(value: "float | int | datetime.timedelta", field: str, low: float, high: float) -> float:
    """A span in seconds (a number or a timedelta) within low..high; else ValueError naming `field`."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{field}: must be seconds (a number) or a datetime.timedelta, got {type(value).__name__}")
    if not (math.isfinite(seconds) and low <= seconds <= high):
        raise ValueError(f"{field}: must be within {low:g}..{high:g} seconds, got {seconds:g}")
    return seconds


def truncate(text: str) -> str:
    """At most MAX_TEXT_CHARS characters (an error text the server keeps)."""
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def error_reason(err: grpc.RpcError) -> Optional[str]:
    """The ErrorInfo reason of a failed call (LEASE_EXPIRED, ...), if the server sent one."""
    for key, raw in getattr(err, "trailing_metadata", lambda: None)() or ():
        if key != "grpc-status-details-bin":
            continue
        from leasequeue._google_rpc import status_pb2  # type: ignore[attr-defined]

        return status_reason(status_pb2.Status.FromString(raw))
    return None


def status_reason(status: Any) -> Optional[str]:
    """The ErrorInfo reason in a google.rpc.Status, if any."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return str(info.reason)
    return None
