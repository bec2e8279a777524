"""Session aggregation (KIP-94) and its emit-final form on the column contract.

For a row at ``t``: the key's sessions with ``end >= t - gap`` and ``start <= t + gap`` are
merged (aggregates combined with the merger, in end-then-start order, starting from the
initializer) and the row is aggregated into the result. Merged sessions whose window differs
from the new one are removed and emitted as tombstones, oldest first; then the new session is
stored and emitted (with its end as timestamp). For windows with a grace
(``of_inactivity_gap_and_grace``), a row whose merged session ends before ``stream_time - gap
- grace`` is dropped (``dropped-records``); for windows without one, a session already
expired when it is created (late data) is emitted but not stored. Rows with a None key or
value are dropped.

Read once, write once: a key's live sessions are read from the store on its first row of a
batch (one range per key, at that row's stream time) and kept in memory with their aggregates
serialized as the store holds them, so an aggregator that changes its aggregate in place
cannot alter what was already emitted. The store's updates are recorded with the stream time
they were made at and written back before ``process_batch`` returns through
``SessionStore.write_all_at``, which leaves the store (and so the changelog) exactly as the
sequence of per-record puts would. For a row, every state change comes before its outputs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from streamtide.dsl.cache import EmitCache, emit_as_batch
from streamtide.dsl.final_results import INDEX_SUFFIX, CloseIndex
from streamtide.dsl.kept import UNREAD, KeptState, is_count
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.windows import SessionWindows
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.state.encoding import LONG_BIAS, LONG_PAIR, decode_long
from streamtide.window import Window, Windowed

#: A live session in memory: end, start, serialized aggregate, and the aggregate itself when
#: deserializing the bytes is known to give it back (else ``UNREAD``). Tuples sort by end,
#: then start, which are unique among a key's sessions.
Session = tuple[int, int, "bytes | None", Any]

Aggregator = Callable[[Any, Any, Any], Any]


class SessionAggregateOperator(ColumnOperator):
    """A session aggregation emitting every update (see the module docstring)."""

    def __init__(
        self,
        store_name: str,
        windows: SessionWindows,
        retention_ms: int,
        initializer: Callable[[], Any] | Any,
        aggregator: Aggregator,
        merger: Aggregator,
        caching_allowed: bool,
    ) -> None:
        self.store_name = store_name
        self.windows = windows
        self.gap = windows.gap_ms
        self.retention_ms = retention_ms
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger
        self.caching_allowed = caching_allowed
        self.reads_values = not is_count(initializer, aggregator, merger)
        #: the grace rule (SEMANTICS 5): a row whose merged session ends before stream time
        #: minus this is dropped (None: windows without a grace keep the seed's rule)
        self.drop_before = None if windows.declared_grace_ms is None else windows.close_after_ms

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed, emit_as_batch(self))
        #: per key of the batch (its text for string keys, so a string key is looked up
        #: without serializing it; else its bytes): its bytes and its live sessions
        self._keys: dict[Any, tuple[bytes, list[Session]]] = {}
        #: (stream time, key bytes, start, end, serialized aggregate or None)
        self._updates: list[tuple[int, bytes, int, int, bytes | None]] = []
        self._kept = KeptState(
            store.key_serde, store.value_serde, self.initializer, self.aggregator, self.merger
        )

    # ---- the rule, in memory ----------------------------------------------------------------

    def _key_entry(self, key: Any, now: int) -> tuple[bytes, list[Session]]:
        """The key's bytes and live sessions, read from the store on its first row."""
        ident, key_bytes = self._kept.ident(key)
        entry = self._keys.get(ident)
        if entry is not None:
            return entry
        # the stored bytes deserialize to the stored aggregate, which is all they are for here
        sessions = [
            (end, start, raw, UNREAD)
            for end, start, raw in self.store.fetch_serialized(key_bytes, now)
        ]
        entry = self._keys[ident] = (key_bytes, sessions)
        return entry

    def _merge(
        self, key: Any, value: Any, t: int, sessions: list[Session], now: int
    ) -> tuple[list[Session], int, int, Any]:
        """The sessions of ``sessions`` a row at ``t`` merges with, and the merged session's
        start, end and aggregate (the row included). Changes nothing."""
        live_from = now - self.retention_ms
        gap = self.gap
        low_end = t - gap if t - gap > live_from else live_from
        high_start = t + gap
        if not sessions:
            merged = []
        elif sessions[0] is sessions[-1]:  # the common case: one live session
            only = sessions[0]
            merged = [only] if only[0] >= low_end and only[1] <= high_start else []
        else:
            merged = [s for s in sessions if s[0] >= low_end and s[1] <= high_start]
        start = end = t
        initializer = self.initializer
        if self._kept.counting:  # count's functions, inlined: the same additions in the same order
            agg: Any = 0
            for s_end, s_start, s_agg, s_value in merged:
                if s_start < start:
                    start = s_start
                if s_end > end:
                    end = s_end
                agg = agg + (
                    self._kept.value_serde.deserialize(s_agg) if s_value is UNREAD else s_value
                )
            return merged, start, end, agg + 1
        if merged:
            deserialize = self._kept.value_serde.deserialize
            merger = self.merger
            agg = NO_INITIALIZER if initializer is NO_INITIALIZER else initializer()
            for s_end, s_start, s_agg, s_value in merged:
                if s_start < start:
                    start = s_start
                if s_end > end:
                    end = s_end
                session_agg = deserialize(s_agg) if s_value is UNREAD else s_value
                agg = session_agg if agg is NO_INITIALIZER else merger(key, agg, session_agg)
            agg = value if agg is NO_INITIALIZER else self.aggregator(key, value, agg)
        else:
            agg = (
                value
                if initializer is NO_INITIALIZER
                else self.aggregator(key, value, initializer())
            )
        return merged, start, end, agg

    def _store_new(
        self, sessions: list[Session], now: int, key_bytes: bytes, start: int, end: int, agg: Any
    ) -> None:
        """Record the merged session's write and keep it in memory, in end-then-start order."""
        serialized = self._kept.value_serde.serialize(agg)
        self._updates.append((now, key_bytes, start, end, serialized))
        in_order = not sessions or sessions[-1][:2] < (end, start)
        exact = self._kept.exact
        sessions.append((end, start, serialized, agg if agg.__class__ in exact else UNREAD))
        if not in_order:
            sessions.sort()

    def _remove(self, sessions: list[Session], session: Session) -> None:
        if sessions[-1] is session:  # the common case: the key's latest session
            del sessions[-1]
        else:
            sessions.remove(session)

    def _write_back(self) -> None:
        """Write the batch's session updates to the store (see the module docstring)."""
        if self._updates:
            self.store.write_all_at(self._updates)
        self._updates = []
        self._keys.clear()

    # ---- the batch ----------------------------------------------------------------------------

    def process_batch(self, batch: ColumnBatch) -> None:
        out = EmittedRows()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        headers, stream_times = batch.headers, batch.stream_times
        cache = None if not self.cache.enabled else self.cache
        updates = self._updates
        retention = self.retention_ms
        string_keys = self._kept.string_keys
        drop_before = self.drop_before
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
                    now = stream_times[p]
                    entry = self._keys.get(key) if string_keys and key.__class__ is str else None
                    key_bytes, sessions = entry if entry is not None else self._key_entry(key, now)
                    merged, s, e, agg = self._merge(key, value, timestamps[p], sessions, now)
                    if drop_before is not None and e < now - drop_before:
                        late += 1  # its session closed: nothing stored or emitted
                        continue
                    created = True
                    removed = []
                    for session in merged:
                        if sessions[-1] is session:  # the common case: the latest session
                            del sessions[-1]
                        else:
                            sessions.remove(session)
                        if session[1] != s or session[0] != e:
                            updates.append((now, key_bytes, session[1], session[0], None))
                            removed.append(session)
                        else:
                            created = False
                    if e >= now - retention:
                        self._store_new(sessions, now, key_bytes, s, e, agg)
                    row_headers = headers[p]
                    if cache is not None:
                        for session in removed:
                            cache.emit_window(
                                key, session[1], session[0], None, session[0], row_headers
                            )
                        cache.emit_window(key, s, e, agg, e, row_headers, created)
                    else:
                        for session in removed:
                            out.add(
                                p, Windowed(key, Window(session[1], session[0])), None, session[0]
                            )
                        out.add(p, Windowed(key, Window(s, e)), agg, e)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if nulls:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        if late:
            drops.record_drops(self.context.metrics, drops.EXPIRED_WINDOW, late)
        self._write_back()
        if out:
            self.emit(out.batch(batch))


class SessionFinalOperator(SessionAggregateOperator):
    """A session aggregation that emits each session once, when stream time is strictly past
    ``end + gap + grace`` (``SessionWindows.grace_ms``); emit-final never caches. A
    row whose merged session would already be closed is late: dropped and counted. The close
    index (``final_results.CloseIndex``) orders sessions by end, then serialized key, then
    start; it is written per row, so its changelog is that of record-at-a-time processing,
    and a closing session's final value comes from memory when its key was read in this
    batch (the store gets the batch's writes when the batch ends)."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        index_name = self.store_name + INDEX_SUFFIX
        self.index = CloseIndex(context.get_state_store(index_name).inner)

    def process_batch(self, batch: ColumnBatch) -> None:
        out = EmittedRows()
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        stream_times = batch.stream_times
        updates = self._updates
        index = self.index
        keyed, string_keys = self._keys, self._kept.string_keys
        staged, added, push = index.staged, index.added, heapq.heappush
        pack, bias = LONG_PAIR.pack, LONG_BIAS
        closing = self.windows.close_after_ms  # gap + grace
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
                    now = stream_times[p]
                    close = now - closing
                    if close > index.due_from:
                        self._emit_closed(out, p, close)
                    entry = keyed.get(key) if string_keys and key.__class__ is str else None
                    key_bytes, sessions = entry if entry is not None else self._key_entry(key, now)
                    merged, s, e, agg = self._merge(key, value, timestamps[p], sessions, now)
                    if e < close:
                        late += 1
                        continue
                    created = True
                    for session in merged:
                        if sessions[-1] is session:  # the common case: the latest session
                            del sessions[-1]
                        else:
                            sessions.remove(session)
                        if session[1] != s or session[0] != e:
                            updates.append((now, key_bytes, session[1], session[0], None))
                            # the index entry: end | key | start (CloseIndex.staged)
                            bounds = pack(session[0] + bias, session[1] + bias)
                            staged[bounds[:8] + key_bytes + bounds[8:]] = None
                        else:
                            created = False
                    self._store_new(sessions, now, key_bytes, s, e, agg)
                    if created:
                        bounds = pack(e + bias, s + bias)
                        entry_key = bounds[:8] + key_bytes + bounds[8:]
                        staged[entry_key] = b""
                        push(added, (e, entry_key))
                        if e < index.due_from:
                            index.due_from = e
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        metrics = self.context.metrics
        if nulls:
            drops.record_drops(metrics, drops.NULL_KEY_OR_VALUE, nulls)
        if late:
            drops.record_drops(metrics, drops.LATE, late)
        self._write_back()
        if out:
            self.emit(out.batch(batch))

    def _write_back(self) -> None:
        super()._write_back()
        self.index.write_back()

    def _emit_closed(self, out: EmittedRows, position: int, close: int) -> None:
        """Emit every session that ends before ``close`` (= stream time - gap - grace)."""
        due = self.index.take_due(close - 1)
        if not due:
            return
        deserialize = self._kept.key_serde.deserialize
        for end, suffix in due:
            key_bytes, start = suffix[:-8], decode_long(suffix, len(suffix) - 8)
            key = deserialize(key_bytes)
            value = self._final_value(key, key_bytes, start, end)
            if value is not None:
                out.add(position, Windowed(key, Window(start, end)), value, end)

    def _final_value(self, key: Any, key_bytes: bytes, start: int, end: int) -> Any:
        """The aggregate of a session that just closed (read even though it has expired)."""
        entry = self._keys.get(self._kept.ident_of(key_bytes))
        if entry is None:
            return self.store.fetch_session(key, start, end, live_only=False)
        for s_end, s_start, serialized, _ in entry[1]:
            if s_end == end and s_start == start:
                return self._kept.value_serde.deserialize(serialized)
        return None
