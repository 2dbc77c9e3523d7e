"""Jittered exponential backoff for reconnecting: the cap doubles from `initial`
to `maximum`, and each wait is drawn from [cap/2, cap] ("equal jitter"), so a
fleet of workers cut off by one server restart does not reconnect in lockstep."""

from __future__ import annotations

import random
from typing import Callable


def backoff_delay(attempt: int, initial: float = 0.25, maximum: float = 30.0, rand: Callable[[], float] = random.random) -> float:
    cap = min(maximum, initial * 2 ** min(attempt, 30))
    return cap / 2 + rand() * (cap / 2)
