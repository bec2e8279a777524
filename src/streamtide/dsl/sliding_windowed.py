"""Sliding-window aggregations: ``KGroupedStream.windowed_by(SlidingWindows...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.final_results import SlidingWindowFinalProcessor
from streamtide.dsl.ktable import KTable
from streamtide.dsl.params import Materialized, Named
from streamtide.dsl.sliding_processor import SlidingWindowAggregateProcessor
from streamtide.dsl.windowed import FixedWindowAggregations
from streamtide.dsl.windows import DEFAULT_RETENTION_MS, SlidingWindows
from streamtide.serde import Serde
from streamtide.state.window_store import WindowStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.kgrouped import KGroupedStream


class SlidingWindowedKStream(FixedWindowAggregations):
    """A grouped stream aggregated over sliding windows (``SlidingWindows``): one window per
    distinct set of a key's records at most the time difference apart."""

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

    def _aggregate(
        self,
        prefix: str,
        materialized: Materialized | None,
        named: Named | str | None,
        initializer: Any,
        aggregator: Callable[[Any, Any, Any], Any],
        value_serde: Serde | None,
    ) -> KTable:
        materialized = materialized or Materialized()
        windows = self.windows
        retention = self._retention(materialized)
        size = windows.time_difference_ms
        return self._build(
            prefix,
            materialized,
            named,
            value_serde,
            lambda supplier, ks, vs: WindowStoreBuilder(
                supplier, size, retention, ks, vs, timestamped=True
            ),
            (
                (
                    lambda store, _: SlidingWindowFinalProcessor(
                        store, windows, initializer, aggregator, False
                    )
                )
                if self._final
                else lambda store, caching: SlidingWindowAggregateProcessor(
                    store, windows, initializer, aggregator, caching
                )
            ),
        )
