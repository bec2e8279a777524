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
alter what was emitted; exact values such as counts are kept as they are, and a count is
serialized only when written back). Before ``process_batch`` returns, each updated window's
last update goes to the store with the stream time it was made at, in the order of the last
updates (``TimestampedWindowStore.write_all_at``, which expires segments at the same points
per-row puts would; an earlier update of a window would only have been overwritten in the
store's write buffer): the store and its changelog are those of record-at-a-time processing.
Rows are added in one loop, with no call per row beyond the user's aggregator. With the record
cache on, each updated window's last update of the batch goes into the cache once, after the
loop, in the order of the last updates: the order, values and timestamps an update per row
would leave there (each update moves its window to the end; only a window's last one stays).
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
from streamtide.dsl.kept import UNREAD, KeptState, is_count
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.windows import TimeWindows
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.state.timestamped import decode, encode
from streamtide.window import Window, Windowed

#: A window's aggregate in memory: serialized (None: not serialized yet, or absent), itself
#: (``ABSENT``: no aggregate; ``UNREAD``: deserialize the bytes to read it), the result's
#: timestamp, the stream time of the batch's last update (None: not updated), the key's
#: bytes, and the position in the batch of the row of the last update and that update's
#: result (what the record cache keeps; None: not updated).
Entry = tuple["bytes | None", Any, int, "int | None", bytes, "int | None", Any]

#: Stands for a window without an aggregate (none stored, or its aggregate became None).
ABSENT: Any = object()


class TimeWindowAggregateOperator(ColumnOperator):
    """A time-window aggregation emitting every update (see the module docstring)."""

    #: whether this is the emit-final form (it emits before a row, and never per update)
    emits_final = False
    #: the emit-final form's close index (its ``init`` opens it)
    index: CloseIndex

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
        self.reads_values = not is_count(initializer, aggregator)
        #: per (key ident, window start) of the batch, in the order of their last update
        self._entries: dict[tuple[Any, int], Entry] = {}

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed, emit_as_batch(self))
        # the aggregate's serde is the store's without timestamps
        self._kept = KeptState(
            store.key_serde, store.value_serde.inner, self.initializer, self.aggregator
        )

    # ---- reading and writing back --------------------------------------------------------

    def _read(self, ident: Any, key_bytes: bytes, start: int) -> Entry:
        """The window's aggregate as stored, read on the batch's first row for it."""
        stored = self.store.get_stored(key_bytes, start)
        if stored is None:
            entry: Entry = (None, ABSENT, 0, None, key_bytes, None, None)
        else:
            raw, timestamp = decode(stored)
            entry = (raw, UNREAD, timestamp, None, key_bytes, None, None)
        self._entries[(ident, start)] = entry
        return entry

    def _write_back(self) -> None:
        """Each updated window's last aggregate to the store, at the stream time of its last
        update, in the order of the last updates. The same store and changelog as a put per
        update: a window is overwritten in the store's write buffer, and every window this
        operator updates is live when it is updated (retention is at least the grace period),
        so no expiry falls between a window's updates and its last one."""
        serialize = self._kept.value_serde.serialize
        updates = [
            (
                now,
                key_bytes,
                start,
                None
                if value is ABSENT
                else encode(serialize(value) if raw is None else raw, timestamp),  # type: ignore[arg-type]
            )
            for (_, start), (raw, value, timestamp, now, key_bytes, _, _) in self._entries.items()
            if now is not None
        ]
        self._entries.clear()
        if updates:
            self.store.write_all_at(updates)

    # ---- the batch ----------------------------------------------------------------------------

    def process_batch(self, batch: ColumnBatch) -> None:
        """Each row added to its windows, in one loop: the rule of the module docstring."""
        out = EmittedRows()
        counts = _DropCounts()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        stream_times = batch.stream_times
        windows = self.windows
        size, grace, tumbling = windows.size_ms, windows.grace_ms, windows.is_tumbling
        kept = self._kept
        counting, string_keys = kept.counting, kept.string_keys
        exact = kept.exact
        deserialize, serialize = kept.value_serde.deserialize, kept.value_serde.serialize
        initializer, aggregator = self.initializer, self.aggregator
        entries = self._entries
        cache = self.cache
        pending = cache.pending if cache.enabled else None
        final = self.emits_final
        index = self.index if final else None
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key = keys[p]
                    value = values[p]
                    if key is None or value is None:
                        counts.nulls += 1
                        continue
                    t = timestamps[p]
                    now = stream_times[p]
                    if final and now - grace - size >= index.due_from:  # type: ignore[union-attr]  # final: set
                        self._emit_due(out, p, now)
                    closed_before = now - grace
                    if tumbling:
                        starts: Any = (t - t % size,)
                        if starts[0] + size <= closed_before:
                            counts.windows += 1
                            counts.late += 1
                            continue
                    else:
                        starts = [w.start for w in windows.windows_for(t)]
                        closed = sum(1 for s in starts if s + size <= closed_before)
                        if closed:
                            counts.windows += closed
                            if closed == len(starts):
                                counts.late += 1
                                continue
                            counts.expired += closed
                    ident = key if string_keys and key.__class__ is str else kept.ident(key)[0]
                    for s in starts:
                        if s + size <= closed_before:
                            continue
                        window = (ident, s)
                        if window in entries:
                            raw, old, timestamp, _, key_bytes, _, _ = entries[window]
                        else:
                            key_bytes = key.encode() if ident is key else kept.ident(key)[1]
                            raw, old, timestamp, _, key_bytes, _, _ = self._read(
                                ident, key_bytes, s
                            )
                        created = old is ABSENT
                        if created:
                            if counting:
                                new = 1
                            elif initializer is NO_INITIALIZER:
                                new = value
                            else:
                                new = aggregator(key, value, initializer())
                            timestamp = t
                        else:
                            if old is UNREAD:
                                old = deserialize(raw)
                            new = old + 1 if counting else aggregator(key, value, old)
                            if t > timestamp:
                                timestamp = t
                        if counting:  # an exact value: serialized once, at the write-back
                            entry: Entry = (None, new, timestamp, now, key_bytes, p, new)
                        else:
                            raw = serialize(new)
                            if raw is None:
                                entry = (None, ABSENT, timestamp, now, key_bytes, p, new)
                            else:
                                kept_value = new if new.__class__ in exact else UNREAD
                                entry = (raw, kept_value, timestamp, now, key_bytes, p, new)
                        del entries[window]  # the last update moves to the end
                        entries[window] = entry
                        if final:
                            if created:
                                index.add(s, key_bytes)  # type: ignore[union-attr]  # final: set
                        elif pending is None:
                            out.add(p, Windowed(key, Window(s, s + size)), new, timestamp)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        counts.record(self.context.metrics)
        if pending is not None and not final:
            self._cache_updates(batch)
        self._write_back()
        if out:
            self.emit(out.batch(batch))

    def _cache_updates(self, batch: ColumnBatch) -> None:
        """Each window the batch updated into the record cache with its last update (the
        row's key and headers), in the order of the last updates: each moves to the end of
        the cache's order, as it would with an update per row."""
        cache = self.cache
        pending = cache.pending
        size = self.windows.size_ms
        keys, headers = batch.keys, batch.headers
        for (_, s), (_, _, timestamp, now, _, p, value) in self._entries.items():
            if now is None:
                continue
            key = keys[p]  # type: ignore[index]
            cached = (key, s, s + size)
            try:
                if cached in pending:
                    del pending[cached]  # it moves to the end of the order
            except TypeError:  # an unhashable key
                cache.emit_window(key, s, s + size, value, timestamp, headers[p])  # type: ignore[index]
                continue
            pending[cached] = (key, s, s + size, value, timestamp, headers[p], False)  # type: ignore[index]

    def _emit_due(self, out: EmittedRows, p: int, now: int) -> None:
        """What the emit-final form emits before a row (see ``TimeWindowFinalOperator``)."""


class TimeWindowFinalOperator(TimeWindowAggregateOperator):
    """A time-window aggregation that emits each window once, at ``stream_time >= end +
    grace`` (see the module docstring); it never caches."""

    emits_final = True

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.index = CloseIndex(context.get_state_store(self.store_name + INDEX_SUFFIX).inner)

    def _write_back(self) -> None:
        super()._write_back()
        self.index.write_back()

    def _emit_due(self, out: EmittedRows, p: int, now: int) -> None:
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
            raw, value, timestamp, _, _, _, _ = entry
            if value is ABSENT:
                return None
            return self._kept.read(raw, value), timestamp
        return stored_final(self.store, self._kept.value_serde, key_bytes, start)


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
