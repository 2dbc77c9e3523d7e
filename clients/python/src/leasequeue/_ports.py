"""The small interfaces the worker's components take instead of the Worker, which composes them. Imports nothing of the package."""

from __future__ import annotations

import threading
from typing import Any, ContextManager, Deque, List, Optional, Protocol


class SpanJob(Protocol):
    """What an attempt's span reads of its job (_tracing.py); a LeasedJob is one."""

    id: str
    queue: str
    task: str
    attempts: int
    proto: Any  # the leasequeue.v1.Job, for its trace_context


class WorkStreamHost(Protocol):
    """What one Work stream (_work.py's _WorkStream) uses of the worker: its settings, the outbox, and the answers."""

    queue: str
    worker_id: str
    concurrency: int
    _lease_seconds: float
    _ack_batch_window: float
    _lock: ContextManager[Any]
    _outbox_changed: threading.Condition  # on _lock
    _outbox: Deque[Any]  # acknowledgements queued (_acks.py's _Pending)
    _stream: Optional[Any]  # the stream that takes the outbox, if any
    _stopping: bool

    def _take_batch(self) -> List[Any]: ...

    def _settle(self, p: Any, code_number: int, message: str, reason: Optional[str]) -> None: ...

    def _unanswered(self, p: Any, why: str) -> None: ...
