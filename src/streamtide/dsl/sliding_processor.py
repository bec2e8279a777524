"""The processor behind sliding-window aggregations (``windowed_by(SlidingWindows...)``).

Kafka Streams' algorithm (KStreamSlidingWindowAggregate, its reverse-iterator variant, so
updates are emitted in the same order): for a record at ``t`` it reads the key's windows
starting in ``[t - 2 * difference, t + 1]`` once, newest first, and

- adds the record to every existing window that contains ``t``;
- creates ``t``'s left window ``[t - difference, t]`` (seeded with the aggregate of the
  window just before it when the previous record lies within the difference);
- creates ``t``'s right window ``[t + 1, t + 1 + difference]`` when later records fall in it
  (seeded with the aggregate of the window holding them), and the previous record's right
  window when ``t`` falls in it.

Records earlier than one difference after the epoch cannot have a left window (its start
would be negative): they go to the window ``[0, difference]``. A window accepts records while
``end >= stream_time - grace``. Results carry the largest record timestamp in the window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.windowed_processors import Aggregator, _WindowedProcessor
from streamtide.dsl.windows import SlidingWindows
from streamtide.processor import drops
from streamtide.record import Record
from streamtide.state.timestamped import ValueAndTimestamp
from streamtide.window import Window, Windowed

#: a window's aggregate and timestamp, or None for a window without aggregate yet (reduce)
Agg = ValueAndTimestamp | None


class SlidingWindowAggregateProcessor(_WindowedProcessor):
    """See the module docstring."""

    def __init__(
        self,
        store_name: str,
        windows: SlidingWindows,
        initializer: Callable[[], Any] | Any,
        aggregator: Aggregator,
        caching_allowed: bool,
    ) -> None:
        super().__init__(store_name, caching_allowed)
        self.difference = windows.time_difference_ms
        self.grace = windows.grace_ms
        self.initializer = initializer
        self.aggregator = aggregator

    def _fresh(self, timestamp: int) -> Agg:
        if self.initializer is NO_INITIALIZER:
            return None
        return ValueAndTimestamp(self.initializer(), timestamp)

    def process(self, record: Record) -> None:
        if not self._accept(record):
            return
        t = record.timestamp
        close = self.context.current_stream_time_ms() - self.grace
        if t + self.difference < close:
            drops.record_drop(self.context.metrics, drops.LATE)
            return
        if t < self.difference:
            self._process_early(record, close)
        else:
            self._process(record, close)

    def _process(self, record: Record, close: int) -> None:
        t, difference = record.timestamp, self.difference
        found = self.store.fetch_with_timestamps(record.key, max(0, t - 2 * difference), t + 1)
        starts: set[int] = set()
        left_agg: Agg = None
        right_agg: Agg = None
        left_exists = right_exists = False
        previous: int | None = None
        for start, agg in reversed(found):
            starts.add(start)
            end = start + difference
            if start == t + 1:
                right_exists = True
            elif end > t:
                if right_agg is None:
                    right_agg = agg
                self._update(start, agg, record, close)
            elif end == t:
                left_exists = True
                self._update(start, agg, record, close)
                if agg.timestamp < t:
                    previous = agg.timestamp
                else:
                    return  # a record at t was seen: every window of t exists already
            else:
                left_agg = agg
                previous = agg.timestamp
                break
        if previous is not None:
            previous_right = previous + 1
            if previous_right not in starts and previous_right + difference >= t:
                self._update(previous_right, self._fresh(t), record, close)
        if not left_exists:
            if previous is not None and t - difference <= previous and left_agg is not None:
                seed: Agg = ValueAndTimestamp(left_agg.value, t)
            else:
                seed = self._fresh(t)
            self._update(t - difference, seed, record, close)
        if not right_exists and right_agg is not None and right_agg.timestamp > t:
            self._put_right_window(record, right_agg)

    def _process_early(self, record: Record, close: int) -> None:
        """A record before ``difference``: its windows are kept in ``[0, difference]``."""
        t = record.timestamp
        combined: Agg = None
        has_combined = False
        right_agg: Agg = None
        right_exists = False
        starts: set[int] = set()
        previous: int | None = None
        for start, agg in self.store.fetch_with_timestamps(record.key, 0, t + 1):
            starts.add(start)
            if start == 0:
                combined, has_combined = agg, True
                if agg.timestamp < t:
                    previous = agg.timestamp
            elif start <= t:
                right_agg = agg
                self._update(start, agg, record, close)
            elif start == t + 1:
                right_exists = True
        if right_agg is None and combined is not None and combined.timestamp > t:
            right_agg = combined
        if not right_exists and right_agg is not None and right_agg.timestamp > t:
            self._put_right_window(record, right_agg)
        if previous is not None and previous + 1 not in starts:
            self._update(previous + 1, self._fresh(t), record, close)
        if not has_combined:
            self._update(0, self._fresh(t), record, close)
        else:
            self._update(0, combined, record, close)

    def _put_right_window(self, record: Record, agg: ValueAndTimestamp) -> None:
        """Create ``t``'s right window holding exactly the later records' aggregate."""
        start = record.timestamp + 1
        self.store.put_with_timestamp(record.key, start, agg.value, agg.timestamp)
        window = Window(start, start + self.difference)
        self._emit(record, Windowed(record.key, window), agg.value, agg.timestamp)

    def _update(self, start: int, agg: Agg, record: Record, close: int) -> None:
        """Add the record to the window at ``start`` (holding ``agg``) and emit it."""
        end = start + self.difference
        if end < close:
            metrics = self.context.metrics
            metrics.increment(drops.DROPPED)
            metrics.increment(drops.PREFIX + drops.EXPIRED_WINDOW)
            return
        key, value = record.key, record.value
        if agg is None:
            new, timestamp = value, record.timestamp
        else:
            new = self.aggregator(key, value, agg.value)
            timestamp = max(record.timestamp, agg.timestamp)
        self.store.put_with_timestamp(key, start, new, timestamp)
        self._emit(record, Windowed(key, Window(start, end)), new, timestamp)
