"""Session aggregation for batch processing: the same emissions and state as
``SessionWindowAggregateProcessor``, with each key's sessions read once per batch.

Within a batch a key's live sessions are kept in memory (found on the key's first record with
one fetch), with their aggregates serialized as the store holds them, so an aggregator that
changes its aggregate in place cannot alter what was already emitted. The store's updates are
recorded with the stream time they were made at and written back at commit through
``SessionStore.write_all_at``, which leaves the store (and so the changelog) exactly as the
record path's sequence of puts would. A property test compares both paths.
"""

from __future__ import annotations

from typing import Any

from streamtide.dsl.final_results import SessionWindowFinalProcessor
from streamtide.dsl.processors import (
    NO_INITIALIZER,
    count_aggregator,
    count_initializer,
    count_merger,
)
from streamtide.dsl.windowed_processors import SessionWindowAggregateProcessor
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.variants import register_batch_variant
from streamtide.record import Record
from streamtide.serde import StringSerde, exact_values
from streamtide.state.encoding import encode_long

#: A live session in memory: end, start, serialized aggregate, and the aggregate itself when
#: deserializing the bytes is known to give it back (else ``_UNREAD``). Tuples sort by end,
#: then start, which are unique among a key's sessions.
Session = tuple[int, int, bytes, Any]

_UNREAD = object()


class BatchSessionWindowAggregateProcessor(SessionWindowAggregateProcessor):
    """Batch twin of ``SessionWindowAggregateProcessor`` (see the module docstring)."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        #: per key of the batch (its text for string keys, so a string key is looked up
        #: without serializing it; else its bytes): its bytes and its live sessions
        self._keys: dict[Any, tuple[bytes, list[Session]]] = {}
        #: (stream time, key bytes, start, end, serialized aggregate or None)
        self._updates: list[tuple[int, bytes, int, int, bytes | None]] = []
        self._key_serde = self.store.key_serde
        self._value_serde = self.store.value_serde
        self._string_keys = type(self._key_serde) is StringSerde
        self._exact = exact_values(self._value_serde)
        self._counting = (
            self.initializer is count_initializer
            and self.aggregator is count_aggregator
            and self.merger is count_merger
        )
        context.register_flush_listener(self.flush)

    def _key_entry(self, key: Any) -> tuple[bytes, list[Session]]:
        """The key's bytes and live sessions, read from the store on its first record."""
        string = self._string_keys and key.__class__ is str
        if string:
            entry = self._keys.get(key)
            if entry is not None:
                return entry
        key_bytes = self._key_serde.serialize(key)
        ident = key_bytes.decode("utf-8") if self._string_keys else key_bytes
        if not string:
            entry = self._keys.get(ident)
            if entry is not None:
                return entry
        # the stored bytes deserialize to the stored aggregate, which is all they are for here
        sessions = [
            (end, start, raw, _UNREAD) for end, start, raw in self.store.fetch_serialized(key_bytes)
        ]
        entry = self._keys[ident] = (key_bytes, sessions)
        return entry

    def _merge_in_memory(
        self, key: Any, value: Any, t: int, sessions: list[Session], now: int
    ) -> tuple[list[Session], int, int, Any]:
        """The sessions of ``sessions`` a record at ``t`` merges with, and the merged
        session's start, end and aggregate (the record included)."""
        live_from = now - self.retention_ms
        gap = self.gap
        low_end = t - gap if t - gap > live_from else live_from
        high_start = t + gap
        merged = [s for s in sessions if s[0] >= low_end and s[1] <= high_start]
        start = end = t
        initializer = self.initializer
        if self._counting:  # count's functions, inlined: the same additions in the same order
            agg = 0
            for s_end, s_start, s_agg, s_value in merged:
                if s_start < start:
                    start = s_start
                if s_end > end:
                    end = s_end
                agg = agg + (
                    self._value_serde.deserialize(s_agg) if s_value is _UNREAD else s_value
                )
            return merged, start, end, agg + 1
        if merged:
            deserialize = self._value_serde.deserialize
            merger = self.merger
            agg = NO_INITIALIZER if initializer is NO_INITIALIZER else initializer()
            for s_end, s_start, s_agg, s_value in merged:
                if s_start < start:
                    start = s_start
                if s_end > end:
                    end = s_end
                session_agg = deserialize(s_agg) if s_value is _UNREAD else s_value
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
        self,
        sessions: list[Session],
        now: int,
        key_bytes: bytes,
        start: int,
        end: int,
        agg: Any,
    ) -> None:
        """Record the merged session's write and keep it in memory, in end-then-start order."""
        serialized = self._value_serde.serialize(agg)
        self._updates.append((now, key_bytes, start, end, serialized))
        in_order = not sessions or sessions[-1][:2] < (end, start)
        sessions.append((end, start, serialized, agg if agg.__class__ in self._exact else _UNREAD))
        if not in_order:
            sessions.sort()

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return
        entry = self._keys.get(key) if self._string_keys and key.__class__ is str else None
        key_bytes, sessions = entry if entry is not None else self._key_entry(key)
        now = self.context.current_stream_time_ms()
        merged, start, end, agg = self._merge_in_memory(key, value, record.timestamp, sessions, now)
        updates = self._updates
        emit = self.cache.emit_window
        headers = record.headers
        created = True
        for session in merged:
            if sessions[-1] is session:  # the common case: the key's latest session
                del sessions[-1]
            else:
                sessions.remove(session)
            s_end, s_start = session[0], session[1]
            if s_start != start or s_end != end:
                updates.append((now, key_bytes, s_start, s_end, None))
                emit(key, s_start, s_end, None, s_end, headers)
            else:
                created = False
        if end >= now - self.retention_ms:
            self._store_new(sessions, now, key_bytes, start, end, agg)
        emit(key, start, end, agg, end, headers, created)

    def flush(self) -> None:
        """Write the batch's session updates to the store (see the module docstring)."""
        if self._updates:
            self.store.write_all_at(self._updates)
        self._updates = []
        self._keys.clear()


def _twin(processor: SessionWindowAggregateProcessor) -> BatchSessionWindowAggregateProcessor:
    twin = BatchSessionWindowAggregateProcessor.__new__(BatchSessionWindowAggregateProcessor)
    twin.__dict__.update(processor.__dict__)
    return twin


register_batch_variant(SessionWindowAggregateProcessor, _twin)


class BatchSessionWindowFinalProcessor(
    BatchSessionWindowAggregateProcessor, SessionWindowFinalProcessor
):
    """Batch twin of ``SessionWindowFinalProcessor``: the sessions are merged in memory as
    above, the close index is written per record as on the record path (so its changelog is
    the same), and a closing session's final value comes from memory when its key was read
    in this batch (the store gets the batch's writes only at commit)."""

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return
        now = self.context.current_stream_time_ms()
        close = now - self.windows.retention_ms  # gap + grace
        self._emit_closed(record, close)
        key_bytes, sessions = self._key_entry(key)
        merged, start, end, agg = self._merge_in_memory(key, value, record.timestamp, sessions, now)
        if end < close:
            drops.record_drop(self.context.metrics, drops.LATE)
            return
        index = self.index
        created = True
        for session in merged:
            sessions.remove(session)
            s_end, s_start = session[0], session[1]
            if s_start != start or s_end != end:
                self._updates.append((now, key_bytes, s_start, s_end, None))
                index.remove(s_end, key_bytes + encode_long(s_start))
            else:
                created = False
        self._store_new(sessions, now, key_bytes, start, end, agg)
        if created:
            index.add(end, key_bytes + encode_long(start))

    def _final_value(self, key: Any, key_bytes: bytes, start: int, end: int) -> Any:
        entry = self._keys.get(key_bytes.decode("utf-8") if self._string_keys else key_bytes)
        if entry is None:
            return super()._final_value(key, key_bytes, start, end)
        for s_end, s_start, serialized, _ in entry[1]:
            if s_end == end and s_start == start:
                return self._value_serde.deserialize(serialized)
        return None


def _final_twin(processor: SessionWindowFinalProcessor) -> BatchSessionWindowFinalProcessor:
    twin = BatchSessionWindowFinalProcessor.__new__(BatchSessionWindowFinalProcessor)
    twin.__dict__.update(processor.__dict__)
    return twin


register_batch_variant(SessionWindowFinalProcessor, _final_twin)
