"""Sliding-window aggregation (``windowed_by(SlidingWindows...)``) and its emit-final form, on
the column contract.

Kafka Streams' algorithm (KStreamSlidingWindowAggregate, its reverse-iterator variant, so
updates are emitted in the same order): for a row at ``t`` the key's windows starting in
``[t - 2 * difference, t + 1]`` are looked at once, newest first, and

- the row is added to every existing window that contains ``t``;
- ``t``'s left window ``[t - difference, t]`` is created (seeded with the aggregate of the
  window just before it when the previous record lies within the difference);
- ``t``'s right window ``[t + 1, t + 1 + difference]`` is created when later records fall in
  it (seeded with the aggregate of the window holding them), and the previous record's right
  window when ``t`` falls in it.

Records earlier than one difference after the epoch cannot have a left window (its start
would be negative): they go to the window ``[0, difference]``. A window accepts rows while
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
from streamtide.dsl.final_results import INDEX_SUFFIX, CloseIndex
from streamtide.dsl.kept import UNREAD, KeptState
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.windows import SlidingWindows
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.state.timestamped import decode, encode
from streamtide.window import Window, Windowed

#: A window's aggregate in memory: serialized (None: deleted in this batch), itself when
#: deserializing gives it back exactly (else ``UNREAD``), and the result's timestamp.
Entry = tuple["bytes | None", Any, int]
#: A window's aggregate as a row sees it: the value and the timestamp (None: no aggregate
#: yet, as ``reduce``'s fresh windows).
Agg = "tuple[Any, int] | None"


class _KeyWindows:
    """One key's windows in the batch: their starts in order (windows that exist) and their
    entries (also those the batch deleted)."""

    __slots__ = ("entries", "key_bytes", "starts")

    def __init__(self, key_bytes: bytes, found: list[tuple[int, bytes]]) -> None:
        self.key_bytes = key_bytes
        self.starts = [start for start, _ in found]
        self.entries: dict[int, Entry] = {}
        for start, stored in found:
            raw, timestamp = decode(stored)
            self.entries[start] = (raw, UNREAD, timestamp)

    def between(self, low: int, high: int) -> list[int]:
        """The starts of the existing windows in ``[low, high]``, ascending."""
        starts = self.starts
        return starts[bisect.bisect_left(starts, low) : bisect.bisect_right(starts, high)]

    def exists(self, start: int) -> bool:
        entry = self.entries.get(start)
        return entry is not None and entry[0] is not None


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
        self._keys: dict[Any, _KeyWindows] = {}
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
        if self._updates:
            self.store.write_all_at(self._updates)
        self._updates = []
        self._keys.clear()
        if out.positions:
            self.emit(out.batch(batch))

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
    ) -> _KeyWindows:
        """The key's windows, read on its first row: one range covering every row's."""
        windows = self._keys.get(ident)
        if windows is None:
            key_bytes, earliest, latest = spans[ident]
            low = max(0, earliest - 2 * self.difference)
            found = self.store.fetch_stored(key_bytes, low, latest + 1, now)
            windows = self._keys[ident] = _KeyWindows(key_bytes, found)
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
        row = _Row(self, batch, out, p, windows, key, value, t, now, close)
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
        return self._kept.read(raw, kept), timestamp  # type: ignore[arg-type]

    def _put(self, windows: _KeyWindows, start: int, value: Any, timestamp: int, now: int) -> None:
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


class _Row:
    """The rule for one row (see the module docstring), over its key's windows in memory."""

    __slots__ = (
        "batch",
        "close",
        "key",
        "now",
        "op",
        "out",
        "p",
        "t",
        "value",
        "windows",
    )

    def __init__(
        self,
        op: SlidingWindowAggregateOperator,
        batch: ColumnBatch,
        out: EmittedRows,
        p: int,
        windows: _KeyWindows,
        key: Any,
        value: Any,
        t: int,
        now: int,
        close: int,
    ) -> None:
        self.op, self.batch, self.out, self.p = op, batch, out, p
        self.windows, self.key, self.value, self.t, self.now = windows, key, value, t, now
        self.close = close

    def process(self) -> None:
        """A row at ``t >= difference``."""
        op, windows, t = self.op, self.windows, self.t
        difference = op.difference
        low = max(0, t - 2 * difference, self.now - op._live_for)
        left_agg: Agg = None
        right_agg: Agg = None
        left_exists = right_exists = False
        previous: int | None = None
        entries = windows.entries
        seen = set()  # the windows looked at (a store read's), whatever the row changes
        for start in reversed(windows.between(low, t + 1)):
            seen.add(start)
            end = start + difference
            if start == t + 1:
                right_exists = True
            elif end > t:
                agg = op._read(entries[start])
                if right_agg is None:
                    right_agg = agg
                self.update(start, agg)
            elif end == t:
                left_exists = True
                agg = op._read(entries[start])
                self.update(start, agg)
                if agg[1] < t:
                    previous = agg[1]
                else:
                    return  # a record at t was seen: every window of t exists already
            else:
                left_agg = _Lazy(op, entries[start])
                previous = entries[start][2]
                break
        if previous is not None:
            previous_right = previous + 1
            if previous_right not in seen and previous_right + difference >= t:
                self.update(previous_right, op._fresh(t))
        if not left_exists:
            if previous is not None and t - difference <= previous and left_agg is not None:
                seed: Agg = (left_agg.value(), t)
            else:
                seed = op._fresh(t)
            self.update(t - difference, seed)
        if not right_exists and right_agg is not None and right_agg[1] > t:
            self.put_right_window(right_agg)

    def early(self) -> None:
        """A row before ``difference``: its windows are kept in ``[0, difference]``."""
        op, windows, t = self.op, self.windows, self.t
        combined: Agg = None
        has_combined = False
        right_agg: Agg = None
        right_exists = False
        previous: int | None = None
        entries = windows.entries
        seen = windows.between(max(0, self.now - op._live_for), t + 1)
        for start in seen:
            if start == 0:
                combined, has_combined = op._read(entries[start]), True
                if combined[1] < t:  # type: ignore[index]
                    previous = combined[1]  # type: ignore[index]
            elif start <= t:
                right_agg = op._read(entries[start])
                self.update(start, right_agg)
            elif start == t + 1:
                right_exists = True
        if right_agg is None and combined is not None and combined[1] > t:
            right_agg = combined
        if not right_exists and right_agg is not None and right_agg[1] > t:
            self.put_right_window(right_agg)
        if previous is not None and previous + 1 not in seen:
            self.update(previous + 1, op._fresh(t))
        if not has_combined:
            self.update(0, op._fresh(t))
        else:
            self.update(0, combined)

    def put_right_window(self, agg: tuple[Any, int]) -> None:
        """Create ``t``'s right window holding exactly the later records' aggregate."""
        start = self.t + 1
        value, timestamp = agg
        self.op._put(self.windows, start, value, timestamp, self.now)
        self.op._updated(
            self.batch, self.out, self.p, self.key, self.windows.key_bytes, start, value, timestamp
        )

    def update(self, start: int, agg: Agg) -> None:
        """Add the row to the window at ``start`` (holding ``agg``) and emit it."""
        op = self.op
        if start + op.difference < self.close:
            op._drops[2] += 1
            return
        if agg is None:
            new, timestamp = self.value, self.t
        else:
            new = op.aggregator(self.key, self.value, agg[0])
            timestamp = self.t if self.t > agg[1] else agg[1]
        op._put(self.windows, start, new, timestamp, self.now)
        op._updated(
            self.batch, self.out, self.p, self.key, self.windows.key_bytes, start, new, timestamp
        )


class _Lazy:
    """The window just before a row's left window: deserialized only if it seeds it."""

    __slots__ = ("entry", "op")

    def __init__(self, op: SlidingWindowAggregateOperator, entry: Entry) -> None:
        self.op, self.entry = op, entry

    def value(self) -> Any:
        return self.op._read(self.entry)[0]


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

    def _before(self, batch: ColumnBatch, out: EmittedRows, p: int, close: int) -> None:
        """Emit every indexed window that ends before ``close`` (= stream time - grace)."""
        difference = self.difference
        due = self.index.take_due(close - difference - 1)
        if not due:
            return
        deserialize = self._kept.key_serde.deserialize
        for start, key_bytes in due:
            found = self._final(key_bytes, start)
            if found is not None:
                key = deserialize(key_bytes)
                out.add(p, Windowed(key, Window(start, start + difference)), *found)

    def _final(self, key_bytes: bytes, start: int) -> tuple[Any, int] | None:
        """A closing window's aggregate and timestamp (read even though it may have expired:
        from memory when the batch read its key and holds it)."""
        windows = self._keys.get(self._kept.ident_of(key_bytes))
        if windows is not None:
            entry = windows.entries.get(start)
            if entry is not None:
                return None if entry[0] is None else self._read(entry)
        stored = self.store.get_stored(key_bytes, start)
        if stored is None:
            return None
        raw, timestamp = decode(stored)
        return self._kept.value_serde.deserialize(raw), timestamp

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
