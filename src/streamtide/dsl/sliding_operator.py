"""Sliding-window aggregation (``windowed_by(SlidingWindows...)``) and its emit-final form, on
the column contract.

The rule for a row is Kafka Streams' (``sliding_rule``). A window accepts rows while
``end >= stream_time - grace``; a row too late for its left window is dropped (``late``), a
window too old for a row is skipped (``expired_window``). Results carry the largest record
timestamp in the window and are emitted on every update (through the record cache when it
is on). Rows with a None key or value are dropped.

The emit-final form (``EmitStrategy.on_window_close()``) emits each window once, when stream
time is past ``end + grace`` (its end is inclusive), from its close index
(``final_results.CloseIndex``, ordered by window start, then serialized key; every update
(re)indexes its window, per row, so the index's changelog is that of record-at-a-time
processing); updates of open windows are not emitted.

Read once, write once: before the rows are processed, each key's span of the batch is found
(its earliest and latest row), and a key's windows starting in ``[earliest - 2 * difference,
latest + 1]`` are read in one range on its first row (at that row's stream time; each row
then sees only the windows still live at its own). They are kept in memory serialized (so an
aggregator that changes its aggregate in place cannot alter what was emitted; a value the
aggregator is given is deserialized for that row, as a store read would give it) and written
back with the stream time of each update (``TimestampedWindowStore.write_all_at``), leaving
the store and its changelog as record-at-a-time processing would.
"""

from __future__ import annotations

import bisect
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
from streamtide.dsl.sliding_rule import Agg, Entry, KeyWindows, SlidingRow
from streamtide.dsl.windows import SlidingWindows
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.state.timestamped import encode
from streamtide.window import Window, Windowed


class SlidingWindowAggregateOperator(ColumnOperator):
    """A sliding-window aggregation emitting every update (see the module docstring)."""

    def __init__(
        self,
        store_name: str,
        windows: SlidingWindows,
        initializer: Callable[[], Any] | Any,
        aggregator: Callable[[Any, Any, Any], Any],
        caching_allowed: bool,
    ) -> None:
        self.store_name = store_name
        self.difference = windows.time_difference_ms
        self.grace = windows.grace_ms
        self.initializer = initializer
        self.aggregator = aggregator
        self.caching_allowed = caching_allowed
        #: per key ident of the batch: its windows
        self._keys: dict[Any, KeyWindows] = {}
        #: (stream time, serialized key, window start, stored value or None), in order
        self._updates: list[tuple[int, bytes, int, bytes | None]] = []

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed, emit_as_batch(self))
        self._kept = KeptState(
            store.key_serde, store.value_serde.inner, self.initializer, self.aggregator
        )
        #: how long a window start stays live after stream time (the store's retention plus
        #: the window size: the store expires windows by their end)
        self._live_for = store.retention_ms + self.difference

    # ---- the batch ----------------------------------------------------------------------------

    def process_batch(self, batch: ColumnBatch) -> None:
        out = EmittedRows()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        stream_times = batch.stream_times
        idents, spans = self._spans(keys, values, timestamps)
        self._drops = [0, 0, 0]  # rows without key or value, late rows, expired windows
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, value = keys[p], values[p]
                    if key is None or value is None:
                        self._drops[0] += 1
                        continue
                    self._row(
                        batch, out, p, idents[p], key, value, timestamps[p], stream_times[p], spans
                    )
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        self._record_drops()
        self._write_back()
        if out:
            self.emit(out.batch(batch))

    def _write_back(self) -> None:
        """The batch's window updates to the store."""
        if self._updates:
            self.store.write_all_at(self._updates)
        self._updates = []
        self._keys.clear()

    def _spans(
        self, keys: list[Any], values: list[Any], timestamps: list[int]
    ) -> tuple[list[Any], dict[Any, tuple[bytes, int, int]]]:
        """Each row's key ident (a ``_Failed`` when its key cannot be serialized; None for a
        row without key or value) and each key's bytes and earliest and latest row."""
        ident_of = self._kept.ident
        idents: list[Any] = []
        spans: dict[Any, tuple[bytes, int, int]] = {}
        for key, value, t in zip(keys, values, timestamps):
            if key is None or value is None:
                idents.append(None)
                continue
            try:
                ident, key_bytes = ident_of(key)
            except Exception as error:
                idents.append(_Failed(error))
                continue
            idents.append(ident)
            span = spans.get(ident)
            if span is None:
                spans[ident] = (key_bytes, t, t)
            elif t < span[1]:
                spans[ident] = (key_bytes, t, span[2])
            elif t > span[2]:
                spans[ident] = (key_bytes, span[1], t)
        return idents, spans

    def _record_drops(self) -> None:
        nulls, late, expired = self._drops
        metrics = self.context.metrics
        if nulls:
            drops.record_drops(metrics, drops.NULL_KEY_OR_VALUE, nulls)
        if late:
            drops.record_drops(metrics, drops.LATE, late)
        if expired:
            drops.record_drops(metrics, drops.EXPIRED_WINDOW, expired)

    def _windows(
        self, ident: Any, now: int, spans: dict[Any, tuple[bytes, int, int]]
    ) -> KeyWindows:
        """The key's windows, read on its first row: one range covering every row's."""
        windows = self._keys.get(ident)
        if windows is None:
            key_bytes, earliest, latest = spans[ident]
            low = max(0, earliest - 2 * self.difference)
            found = self.store.fetch_stored(key_bytes, low, latest + 1, now)
            windows = self._keys[ident] = KeyWindows(key_bytes, found)
        return windows

    # ---- the rule -----------------------------------------------------------------------------

    def _row(
        self,
        batch: ColumnBatch,
        out: EmittedRows,
        p: int,
        ident: Any,
        key: Any,
        value: Any,
        t: int,
        now: int,
        spans: dict[Any, tuple[bytes, int, int]],
    ) -> None:
        close = now - self.grace
        self._before(batch, out, p, close)
        if t + self.difference < close:
            self._drops[1] += 1
            return
        if ident.__class__ is _Failed:  # its key could not be serialized to be looked up
            raise ident.error
        windows = self._windows(ident, now, spans)
        row = SlidingRow(self, batch, out, p, windows, key, value, t, now, close)
        if t < self.difference:
            row.early()
        else:
            row.process()

    def _before(self, batch: ColumnBatch, out: EmittedRows, p: int, close: int) -> None:
        """What happens for a row before it is added (the emit-final form emits here)."""

    def _fresh(self, t: int) -> Agg:
        if self.initializer is NO_INITIALIZER:
            return None
        return (self.initializer(), t)

    def _read(self, entry: Entry) -> tuple[Any, int]:
        """A window's aggregate as a store read gives it (a new object for a row)."""
        raw, kept, timestamp = entry
        return self._kept.read(raw, kept), timestamp

    def _put(self, windows: KeyWindows, start: int, value: Any, timestamp: int, now: int) -> None:
        """Record a window's new aggregate (None deletes it)."""
        kept = self._kept
        raw = kept.value_serde.serialize(value)
        existed = windows.exists(start)
        if raw is None:
            windows.entries[start] = (None, UNREAD, 0)
            if existed:
                windows.starts.remove(start)
            self._updates.append((now, windows.key_bytes, start, None))
            return
        windows.entries[start] = (raw, kept.keep(value), timestamp)
        if not existed:
            bisect.insort(windows.starts, start)
        self._updates.append((now, windows.key_bytes, start, encode(raw, timestamp)))

    def _updated(
        self,
        batch: ColumnBatch,
        out: EmittedRows,
        p: int,
        key: Any,
        key_bytes: bytes,
        start: int,
        value: Any,
        timestamp: int,
    ) -> None:
        """A window's result changed: emit the update."""
        end = start + self.difference
        if self.cache.enabled:
            self.cache.emit_window(key, start, end, value, timestamp, batch.headers[p])
        else:
            out.add(p, Windowed(key, Window(start, end)), value, timestamp)


class _Failed:
    """A row whose key could not be serialized: the error, raised in the row's turn."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class SlidingWindowFinalOperator(SlidingWindowAggregateOperator):
    """A sliding-window aggregation that emits each window once, when stream time is past
    ``end + grace`` (see the module docstring); it never caches."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.index = CloseIndex(context.get_state_store(self.store_name + INDEX_SUFFIX).inner)

    def _write_back(self) -> None:
        super()._write_back()
        self.index.write_back()

    def _before(self, batch: ColumnBatch, out: EmittedRows, p: int, close: int) -> None:
        """Emit every indexed window that ends before ``close`` (= stream time - grace)."""
        difference = self.difference
        last_start = close - difference - 1
        emit_closed_windows(
            self.index, last_start, difference, self._final, self._kept.key_serde, out, p
        )

    def _final(self, key_bytes: bytes, start: int) -> tuple[Any, int] | None:
        """A closing window's aggregate and timestamp: from memory when the batch read its
        key and holds it, else from the store."""
        windows = self._keys.get(self._kept.ident_of(key_bytes))
        if windows is not None:
            entry = windows.entries.get(start)
            if entry is not None:
                return None if entry[0] is None else self._read(entry)
        return stored_final(self.store, self._kept.value_serde, key_bytes, start)

    def _updated(
        self,
        batch: ColumnBatch,
        out: EmittedRows,
        p: int,
        key: Any,
        key_bytes: bytes,
        start: int,
        value: Any,
        timestamp: int,
    ) -> None:
        self.index.add(start, key_bytes)
