"""The processors behind windowed aggregations and windowed ``distinct``.

Each emits ``Windowed(key, window)`` table updates through the record cache (``EmitCache``).
Records with a None key or value are dropped and counted in ``dropped-records``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.dsl.cache import EmitCache
from streamtide.dsl.windows import SessionWindows, TimeWindows
from streamtide.processor import drops
from streamtide.processor.api import Processor, ProcessorContext
from streamtide.record import Record
from streamtide.window import Window, Windowed

#: ``reduce`` has no initializer: the first value is the aggregate.

Aggregator = Callable[[Any, Any, Any], Any]
Merger = Callable[[Any, Any, Any], Any]


class _WindowedProcessor(Processor):
    """Store and cache lookup shared by the windowed processors."""

    def __init__(self, store_name: str, caching_allowed: bool) -> None:
        self.store_name = store_name
        self.caching_allowed = caching_allowed

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed)

    def _accept(self, record: Record) -> bool:
        if record.key is None or record.value is None:
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return False
        return True

    def _emit(self, record: Record, key: Windowed, value: Any, timestamp: int) -> None:
        self.cache.emit(Record(key, value, timestamp, record.headers))


class TimeWindowDistinctProcessor(_WindowedProcessor):
    """Forwards only the first record of each (key, tumbling window); drops the rest."""

    def __init__(self, store_name: str, windows: TimeWindows, caching_allowed: bool) -> None:
        super().__init__(store_name, caching_allowed)
        self.windows = windows

    def process(self, record: Record) -> None:
        if not self._accept(record):
            return
        (window,) = self.windows.windows_for(record.timestamp)
        if window.end <= self.context.current_stream_time_ms() - self.windows.grace_ms:
            drops.record_drop(self.context.metrics, drops.LATE)
            return
        if self.store.get(record.key, window.start) is not None:
            return
        self.store.put(record.key, window.start, record.value)
        self._emit(record, Windowed(record.key, window), record.value, record.timestamp)


class SessionWindowDistinctProcessor(_WindowedProcessor):
    """Forwards only a record that starts a new session; records that fall into or merge
    with an existing session are dropped (the session still grows, so later records keep
    merging). A merged session keeps the value of the merged session that ended first."""

    def __init__(
        self, store_name: str, windows: SessionWindows, retention_ms: int, caching_allowed: bool
    ) -> None:
        super().__init__(store_name, caching_allowed)
        self.gap = windows.gap_ms
        self.retention_ms = retention_ms

    def process(self, record: Record) -> None:
        if not self._accept(record):
            return
        key, t = record.key, record.timestamp
        merged = self.store.find_sessions(key, t - self.gap, t + self.gap)
        if not merged:
            new = Windowed(key, Window(t, t))
            if t >= self.context.current_stream_time_ms() - self.retention_ms:
                self.store.put(new, record.value)
            self._emit(record, new, record.value, t)
            return
        start = min(t, *(s.window.start for s, _ in merged))
        end = max(t, *(s.window.end for s, _ in merged))
        window = Window(start, end)
        if len(merged) == 1 and merged[0][0].window == window:
            return  # inside an existing session: nothing changes
        for session, _ in merged:
            self.store.remove(session)
        self.store.put(Windowed(key, window), merged[0][1])
