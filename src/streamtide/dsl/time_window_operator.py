"""Time-window (tumbling and hopping) aggregation and its emit-final form, on the contract.

Each row is added to every window containing it that still accepts rows (``end > stream time
- grace``); for every window that no longer does, the row is dropped for it and counted in
``dropped-records`` (reason ``late`` when no window took it, else ``expired_window`` per
window). A window's result carries the largest timestamp of the rows added to it, kept with
the aggregate in the timestamped window store, and is emitted on every update (through the
record cache when it is on). Rows with a None key or value are dropped.

The emit-final form (``EmitStrategy.on_window_close()``) emits each window once, when stream
time reaches ``end + grace``, from its close index (``final_results.CloseIndex``, ordered by
window start, then serialized key, and written per row so its changelog is that of
record-at-a-time processing); updates of open windows are not emitted.

Read once, write once: a window's aggregate is read on the batch's first row that updates it
and kept in memory serialized (so an aggregator that changes its aggregate in place cannot
alter what was emitted; exact values such as counts are kept as they are). Before
``process_batch`` returns, the updates go to the store with the stream time they were made at
(``TimestampedWindowStore.write_all_at``), which expires segments at the same points per-row
puts would: the store and its changelog are those of record-at-a-time processing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtide.dsl.cache import EmitCache, emit_as_batch
from streamtide.dsl.final_results import (
    INDEX_SUFFIX,
    CloseIndex,
    emit_closed_windows,
    stored_final,
)
from streamtide.dsl.kept import UNREAD, KeptState
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.windows import TimeWindows
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.record import Record
from streamtide.state.timestamped import decode, encode
from streamtide.window import Window, Windowed

#: A window's aggregate in memory: serialized (None: absent), itself when deserializing gives
#: it back exactly (else ``UNREAD``), and the result's timestamp.
Entry = tuple["bytes | None", Any, int]


class TimeWindowAggregateOperator(ColumnOperator):
    """A time-window aggregation emitting every update (see the module docstring)."""

    def __init__(
        self,
        store_name: str,
        windows: TimeWindows,
        initializer: Callable[[], Any] | Any,
        aggregator: Callable[[Any, Any, Any], Any],
        caching_allowed: bool,
    ) -> None:
        self.store_name = store_name
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.caching_allowed = caching_allowed
        #: per (key ident, window start) of the batch: the window's aggregate
        self._entries: dict[tuple[Any, int], Entry] = {}
        #: (stream time, serialized key, window start, stored value or None), in order
        self._updates: list[tuple[int, bytes, int, bytes | None]] = []

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed, emit_as_batch(self))
        # the aggregate's serde is the store's without timestamps
        self._kept = KeptState(
            store.key_serde, store.value_serde.inner, self.initializer, self.aggregator
        )

    # ---- the rule, in memory ----------------------------------------------------------------

    def _entry(self, ident: Any, key_bytes: bytes, start: int) -> Entry:
        """The window's aggregate, read from the store on the batch's first row for it."""
        entry = self._entries.get((ident, start))
        if entry is None:
            stored = self.store.get_stored(key_bytes, start)
            if stored is None:
                entry = (None, UNREAD, 0)
            else:
                raw, timestamp = decode(stored)
                entry = (raw, UNREAD, timestamp)
            self._entries[(ident, start)] = entry
        return entry

    def _add(
        self, ident: Any, key_bytes: bytes, key: Any, value: Any, t: int, start: int, now: int
    ) -> tuple[Any, int, bool]:
        """Add a row to one window: the new aggregate, its timestamp, and whether the window
        is new. Records the update; changes nothing if the aggregator raises."""
        raw, old, timestamp = self._entry(ident, key_bytes, start)
        kept = self._kept
        created = raw is None
        if created:
            initializer = self.initializer
            if kept.counting:
                new = 1
            elif initializer is NO_INITIALIZER:
                new = value
            else:
                new = self.aggregator(key, value, initializer())
        else:
            old = kept.read(raw, old)  # type: ignore[arg-type]
            new = old + 1 if kept.counting else self.aggregator(key, value, old)
            if timestamp > t:
                t = timestamp
        raw = kept.value_serde.serialize(new)
        self._entries[(ident, start)] = (raw, kept.keep(new), t)
        self._updates.append((now, key_bytes, start, None if raw is None else encode(raw, t)))
        return new, t, created

    def _write_back(self) -> None:
        if self._updates:
            self.store.write_all_at(self._updates)
        self._updates = []
        self._entries.clear()

    def _windows_of(self, t: int) -> list[int]:
        """The starts of the windows containing ``t`` (a tumbling window's directly)."""
        windows = self.windows
        if windows.is_tumbling:
            return [t - t % windows.size_ms]
        return [window.start for window in windows.windows_for(t)]

    # ---- the batch ----------------------------------------------------------------------------

    def process_batch(self, batch: ColumnBatch) -> None:
        out = EmittedRows()
        counts = _DropCounts()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        stream_times = batch.stream_times
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    self._row(
                        batch, p, keys[p], values[p], timestamps[p], stream_times[p], out, counts
                    )
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        counts.record(self.context.metrics)
        self._write_back()
        if out.positions:
            self.emit(out.batch(batch))

    def _row(
        self,
        batch: ColumnBatch,
        p: int,
        key: Any,
        value: Any,
        t: int,
        now: int,
        out: EmittedRows,
        counts: _DropCounts,
    ) -> None:
        if key is None or value is None:
            counts.nulls += 1
            return
        self._before(out, p, now)
        size = self.windows.size_ms
        closed_before = now - self.windows.grace_ms
        starts = self._windows_of(t)
        closed = sum(1 for s in starts if s + size <= closed_before)
        if closed:
            counts.windows += closed
            if closed == len(starts):
                counts.late += 1
                return
            counts.expired += closed
        ident, key_bytes = self._kept.ident(key)
        for s in starts:
            if s + size <= closed_before:
                continue
            new, timestamp, created = self._add(ident, key_bytes, key, value, t, s, now)
            self._updated(out, p, key, key_bytes, s, new, timestamp, created, batch.headers[p])

    def _before(self, out: EmittedRows, p: int, now: int) -> None:
        """What happens for a row before it is added (the emit-final form emits here)."""

    def _updated(
        self,
        out: EmittedRows,
        p: int,
        key: Any,
        key_bytes: bytes,
        start: int,
        value: Any,
        timestamp: int,
        created: bool,
        headers: Any,
    ) -> None:
        """A window's result changed: emit the update."""
        windowed = Windowed(key, Window(start, start + self.windows.size_ms))
        if self.cache.enabled:
            self.cache.emit(Record(windowed, value, timestamp, headers))
        else:
            out.add(p, windowed, value, timestamp)


class TimeWindowFinalOperator(TimeWindowAggregateOperator):
    """A time-window aggregation that emits each window once, at ``stream_time >= end +
    grace`` (see the module docstring); it never caches."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.index = CloseIndex(context.get_state_store(self.store_name + INDEX_SUFFIX).inner)

    def _before(self, out: EmittedRows, p: int, now: int) -> None:
        """Emit every window that ends at or before ``stream_time - grace``."""
        windows = self.windows
        size = windows.size_ms
        last_start = now - windows.grace_ms - size
        emit_closed_windows(self.index, last_start, size, self._final, self._kept.key_serde, out, p)

    def _final(self, key_bytes: bytes, start: int) -> tuple[Any, int] | None:
        """A closing window's aggregate and timestamp (read even though it may have expired:
        from memory when the batch updated it)."""
        entry = self._entries.get((self._kept.ident_of(key_bytes), start))
        if entry is not None:
            raw, value, timestamp = entry
            if raw is None:
                return None
            return self._kept.read(raw, value), timestamp
        return stored_final(self.store, self._kept.value_serde, key_bytes, start)

    def _updated(
        self,
        out: EmittedRows,
        p: int,
        key: Any,
        key_bytes: bytes,
        start: int,
        value: Any,
        timestamp: int,
        created: bool,
        headers: Any,
    ) -> None:
        if created:
            self.index.add(start, key_bytes)


class _DropCounts:
    """A batch's drops, counted once per batch as record-at-a-time processing would."""

    __slots__ = ("expired", "late", "nulls", "windows")

    def __init__(self) -> None:
        self.nulls = 0  # rows without key or value
        self.windows = 0  # windows a row was dropped for
        self.late = 0  # rows no window took
        self.expired = 0  # windows a row was dropped for while others took it

    def record(self, metrics: Any) -> None:
        if self.nulls:
            drops.record_drops(metrics, drops.NULL_KEY_OR_VALUE, self.nulls)
        if self.windows:
            metrics.increment(drops.DROPPED, self.windows)
        if self.late:
            metrics.increment(drops.PREFIX + drops.LATE, self.late)
        if self.expired:
            metrics.increment(drops.PREFIX + drops.EXPIRED_WINDOW, self.expired)
