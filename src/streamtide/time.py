"""Durations and clocks.

Every public API that takes a duration accepts a ``datetime.timedelta`` or an ``int`` of
milliseconds; ``to_millis`` is the single place that converts and validates them.
"""

from __future__ import annotations

import time as _time
from datetime import timedelta
from typing import Protocol

Duration = timedelta | int

#: Stream time before any record was processed.
UNKNOWN_TIME = -1


def to_millis(duration: Duration, name: str = "duration") -> int:
    """Convert a timedelta or int milliseconds to int milliseconds."""
    if isinstance(duration, bool):
        raise TypeError(f"{name} must be a timedelta or int milliseconds, got bool")
    if isinstance(duration, timedelta):
        return duration.days * 86_400_000 + duration.seconds * 1000 + duration.microseconds // 1000
    if isinstance(duration, int):
        return duration
    raise TypeError(
        f"{name} must be a timedelta or int milliseconds, got {type(duration).__name__}"
    )


def non_negative_millis(duration: Duration, name: str) -> int:
    """``to_millis`` that rejects negative durations with a ValueError naming ``name``."""
    ms = to_millis(duration, name)
    if ms < 0:
        raise ValueError(f"{name} must not be negative, got {ms} ms")
    return ms


class Clock(Protocol):
    """A source of wall-clock time in epoch milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The machine's wall clock."""

    def now_ms(self) -> int:
        return _time.time_ns() // 1_000_000


class MockClock:
    """A wall clock that moves only when told to; used by tests and the test driver."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, duration: Duration) -> int:
        """Move the clock forward and return the new time."""
        ms = non_negative_millis(duration, "advance")
        self._now += ms
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError(f"a mock clock cannot go back from {self._now} to {now_ms}")
        self._now = now_ms
