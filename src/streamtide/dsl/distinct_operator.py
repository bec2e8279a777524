"""Windowed ``distinct()`` on the column contract: the first record of each window only.

Time windows (tumbling only): a row is emitted when its (key, window) has no record yet and
stored as the window's value; later rows of that window are dropped silently. A row whose
window no longer accepts rows (``end <= stream time - grace``) is dropped and counted
(``late``). Sessions: a row that starts a new session is emitted (and stored unless the
session has already expired); a row that falls into or merges with a key's sessions is
dropped, but the sessions still merge (into one keeping the value of the merged session
that ended first), so later rows keep merging. Emitted rows go through the record cache when
it is on; rows with a None key or value are dropped and counted.

Read once, write once: a key's windows (or live sessions) are read on its first row of a
batch that needs them and kept in memory; the batch's writes go to the store with the stream
time they were made at before ``process_batch`` returns (``write_all_at``), leaving the store
and its changelog as record-at-a-time processing would. An accepted time window is always
live in the store (its retention is at least the grace period), so a window's presence is
all that is kept.
"""

from __future__ import annotations

from typing import Any

from streamtide.dsl.cache import EmitCache, emit_as_batch
from streamtide.dsl.kept import KeptState
from streamtide.dsl.windows import SessionWindows, TimeWindows
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.window import Window, Windowed

#: A live session: end, start and its serialized value (None: the serde wrote none).
_Session = tuple[int, int, "bytes | None"]


class _DistinctOperator(ColumnOperator):
    """The store, the record cache and the output a distinct operator shares."""

    def __init__(self, store_name: str, caching_allowed: bool) -> None:
        self.store_name = store_name
        self.caching_allowed = caching_allowed

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed, emit_as_batch(self))
        self._kept = KeptState(store.key_serde, store.value_serde)

    def _emit_window(
        self, out: EmittedRows, p: int, key: Any, start: int, end: int, value: Any, t: int, h: Any
    ) -> None:
        if self.cache.enabled:
            self.cache.emit_window(key, start, end, value, t, h)
        else:
            out.add(p, Windowed(key, Window(start, end)), value, t)

    def _finish(self, batch: ColumnBatch, out: EmittedRows, nulls: int, late: int) -> None:
        metrics = self.context.metrics
        if nulls:
            drops.record_drops(metrics, drops.NULL_KEY_OR_VALUE, nulls)
        if late:
            drops.record_drops(metrics, drops.LATE, late)
        if out:
            self.emit(out.batch(batch))


class TimeWindowDistinctOperator(_DistinctOperator):
    """Emits only the first row of each (key, tumbling window); see the module docstring."""

    def __init__(self, store_name: str, windows: TimeWindows, caching_allowed: bool) -> None:
        super().__init__(store_name, caching_allowed)
        self.windows = windows

    def process_batch(self, batch: ColumnBatch) -> None:
        out = EmittedRows()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        headers, stream_times = batch.headers, batch.stream_times
        size, grace = self.windows.size_ms, self.windows.grace_ms
        store, kept = self.store, self._kept
        present: set[tuple[Any, int]] = set()  # (key ident, start) of windows with a record
        #: (stream time, serialized key, window start, serialized value)
        updates: list[tuple[int, bytes, int, bytes | None]] = []
        nulls = late = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, value = keys[p], values[p]
                    if key is None or value is None:
                        nulls += 1
                        continue
                    t, now = timestamps[p], stream_times[p]
                    s = t - t % size
                    if s + size <= now - grace:
                        late += 1
                        continue
                    ident, key_bytes = kept.ident(key)
                    if (ident, s) in present:
                        continue
                    if store.get_stored(key_bytes, s) is not None:
                        present.add((ident, s))
                        continue
                    raw = kept.value_serde.serialize(value)
                    present.add((ident, s))
                    updates.append((now, key_bytes, s, raw))
                    self._emit_window(out, p, key, s, s + size, value, t, headers[p])
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        store.write_all_at(updates)
        if late:  # SEMANTICS 5: a session grace drop counts as an expired window
            drops.record_drops(self.context.metrics, drops.EXPIRED_WINDOW, late)
        self._finish(batch, out, nulls, 0)


class SessionWindowDistinctOperator(_DistinctOperator):
    """Emits only a row that starts a new session; see the module docstring."""

    def __init__(
        self, store_name: str, windows: SessionWindows, retention_ms: int, caching_allowed: bool
    ) -> None:
        super().__init__(store_name, caching_allowed)
        self.gap = windows.gap_ms
        self.retention_ms = retention_ms
        #: the grace rule (``session_operator``): None for windows without a grace
        self.drop_before = None if windows.declared_grace_ms is None else windows.close_after_ms

    def process_batch(self, batch: ColumnBatch) -> None:
        out = EmittedRows()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        headers, stream_times = batch.headers, batch.stream_times
        gap, retention, drop_before = self.gap, self.retention_ms, self.drop_before
        store, kept = self.store, self._kept
        serde = kept.value_serde
        #: per key ident: its bytes and its sessions as (end, start, serialized value), sorted
        sessions_of: dict[Any, tuple[bytes, list[_Session]]] = {}
        #: (stream time, serialized key, start, end, serialized value or None)
        updates: list[tuple[int, bytes, int, int, bytes | None]] = []
        nulls = late = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, value = keys[p], values[p]
                    if key is None or value is None:
                        nulls += 1
                        continue
                    t, now = timestamps[p], stream_times[p]
                    ident, key_bytes = kept.ident(key)
                    entry = sessions_of.get(ident)
                    if entry is None:
                        entry = sessions_of[ident] = (
                            key_bytes,
                            store.fetch_serialized(key_bytes, now),
                        )
                    sessions = entry[1]
                    live_from = now - retention
                    low_end = t - gap if t - gap > live_from else live_from
                    merged = [s for s in sessions if s[0] >= low_end and s[1] <= t + gap]
                    if drop_before is not None and max([t, *(s[0] for s in merged)]) < (
                        now - drop_before
                    ):
                        late += 1  # its session closed
                        continue
                    if not merged:
                        if t >= live_from:
                            raw = serde.serialize(value)
                            updates.append((now, key_bytes, t, t, raw))
                            _insert(sessions, (t, t, raw))
                        self._emit_window(out, p, key, t, t, value, t, headers[p])
                        continue
                    s_start = min(t, *(s[1] for s in merged))
                    s_end = max(t, *(s[0] for s in merged))
                    if len(merged) == 1 and merged[0][1] == s_start and merged[0][0] == s_end:
                        continue  # inside an existing session: nothing changes
                    # the first merged session's value, as a put of its deserialized value
                    raw = serde.serialize(serde.deserialize(merged[0][2]))
                    for session in merged:
                        sessions.remove(session)
                        updates.append((now, key_bytes, session[1], session[0], None))
                    updates.append((now, key_bytes, s_start, s_end, raw))
                    _insert(sessions, (s_end, s_start, raw))
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        store.write_all_at(updates)
        if late:  # SEMANTICS 5: a session grace drop counts as an expired window
            drops.record_drops(self.context.metrics, drops.EXPIRED_WINDOW, late)
        self._finish(batch, out, nulls, 0)


def _insert(sessions: list[_Session], session: _Session) -> None:
    """Add ``session`` keeping the list in end-then-start order."""
    sessions.append(session)
    if len(sessions) > 1 and sessions[-2][:2] > session[:2]:
        sessions.sort(key=lambda s: (s[0], s[1]))
