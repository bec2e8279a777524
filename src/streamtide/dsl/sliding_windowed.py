"""Sliding-window aggregations: ``KGroupedStream.windowed_by(SlidingWindows...)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtide.dsl.params import Materialized
from streamtide.dsl.sliding_operator import (
    SlidingWindowAggregateOperator,
    SlidingWindowFinalOperator,
)
from streamtide.dsl.windowed import FixedWindowAggregations
from streamtide.dsl.windows import DEFAULT_RETENTION_MS, SlidingWindows

if TYPE_CHECKING:
    from streamtide.dsl.kgrouped import KGroupedStream


class SlidingWindowedKStream(FixedWindowAggregations):
    """A grouped stream aggregated over sliding windows (``SlidingWindows``): one window per
    distinct set of a key's records at most the time difference apart."""

    _processors = (SlidingWindowAggregateOperator, SlidingWindowFinalOperator)

    def __init__(self, grouped: KGroupedStream, windows: SlidingWindows) -> None:
        super().__init__(grouped)
        self.windows = windows
        self._close_after_ms = windows.grace_ms

    def _retention(self, materialized: Materialized) -> int:
        """At least ``2 * time difference + grace``: a record reads the windows starting up to
        two differences before it (one day by default)."""
        needed = 2 * self.windows.time_difference_ms + self.windows.grace_ms
        if materialized.retention is None:
            return max(needed, DEFAULT_RETENTION_MS)
        if materialized.retention < needed:
            raise ValueError(
                f"window store retention ({materialized.retention} ms) must be at least twice "
                f"the time difference plus the grace period ({needed} ms) for sliding windows"
            )
        return materialized.retention

    def _window_size_ms(self) -> int:
        return self.windows.time_difference_ms
