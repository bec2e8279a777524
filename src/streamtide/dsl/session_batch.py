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
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.windowed_processors import SessionWindowAggregateProcessor
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.variants import register_batch_variant
from streamtide.record import Record
from streamtide.window import Window, Windowed

#: A live session in memory: end, start, serialized aggregate, and its windowed key (tuples
#: sort by end, then start, which are unique among a key's sessions).
Session = tuple[int, int, bytes, Windowed]


class BatchSessionWindowAggregateProcessor(SessionWindowAggregateProcessor):
    """Batch twin of ``SessionWindowAggregateProcessor`` (see the module docstring)."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self._sessions: dict[bytes, list[Session]] = {}
        self._updates: list[tuple[int, Windowed, bytes | None]] = []
        self._key_serde = self.store.key_serde
        self._value_serde = self.store.value_serde
        context.register_flush_listener(self.flush)

    def _load(self, key: Any, key_bytes: bytes) -> list[Session]:
        serialize = self._value_serde.serialize
        sessions = [
            (w.window.end, w.window.start, serialize(agg), w) for w, agg in self.store.fetch(key)
        ]
        self._sessions[key_bytes] = sessions
        return sessions

    def _merge_in_memory(
        self, record: Record, key_bytes: bytes, now: int
    ) -> tuple[list[Session], list[Session], int, int, Any]:
        """The key's live sessions, those ``record`` merges with, and the merged session's
        start, end and aggregate (the record included)."""
        key, value, t = record.key, record.value, record.timestamp
        sessions = self._sessions.get(key_bytes)
        if sessions is None:
            sessions = self._load(key, key_bytes)
        live_from = now - self.retention_ms
        gap = self.gap
        low_end = t - gap if t - gap > live_from else live_from
        high_start = t + gap
        merged = [s for s in sessions if s[0] >= low_end and s[1] <= high_start]
        start = end = t
        initializer = self.initializer
        if merged:
            deserialize = self._value_serde.deserialize
            merger = self.merger
            agg = NO_INITIALIZER if initializer is NO_INITIALIZER else initializer()
            for s_end, s_start, s_agg, _ in merged:
                if s_start < start:
                    start = s_start
                if s_end > end:
                    end = s_end
                session_agg = deserialize(s_agg)
                agg = session_agg if agg is NO_INITIALIZER else merger(key, agg, session_agg)
            agg = value if agg is NO_INITIALIZER else self.aggregator(key, value, agg)
        else:
            agg = (
                value
                if initializer is NO_INITIALIZER
                else self.aggregator(key, value, initializer())
            )
        return sessions, merged, start, end, agg

    def _store_new(
        self, sessions: list[Session], now: int, new: Windowed, serialized: bytes
    ) -> None:
        """Record the merged session's write and keep it in memory, in end-then-start order."""
        window = new.window
        end, start = window.end, window.start
        self._updates.append((now, new, serialized))
        sessions.append((end, start, serialized, new))
        if len(sessions) > 1 and sessions[-2][:2] > (end, start):
            sessions.sort()

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return
        key_bytes = self._key_serde.serialize(key)
        now = self.context.current_stream_time_ms()
        sessions, merged, start, end, agg = self._merge_in_memory(record, key_bytes, now)
        new = Windowed(key, Window(start, end))
        updates = self._updates
        emit = self.cache.emit
        headers = record.headers
        created = True
        for session in merged:
            sessions.remove(session)
            if session[1] != start or session[0] != end:
                updates.append((now, session[3], None))
                emit(Record(session[3], None, session[0], headers))
            else:
                created = False
        if end >= now - self.retention_ms:
            self._store_new(sessions, now, new, self._value_serde.serialize(agg))
        emit(Record(new, agg, end, headers), created)

    def flush(self) -> None:
        """Write the batch's session updates to the store (see the module docstring)."""
        if self._updates:
            self.store.write_all_at(self._updates)
        self._updates = []
        self._sessions.clear()


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
        key_bytes = self._key_serde.serialize(key)
        sessions, merged, start, end, agg = self._merge_in_memory(record, key_bytes, now)
        if end < close:
            drops.record_drop(self.context.metrics, drops.LATE)
            return
        suffix_of = self._suffix
        index = self.index
        created = True
        for session in merged:
            sessions.remove(session)
            if session[1] != start or session[0] != end:
                self._updates.append((now, session[3], None))
                index.remove(session[0], suffix_of(session[3]))
            else:
                created = False
        new = Windowed(key, Window(start, end))
        self._store_new(sessions, now, new, self._value_serde.serialize(agg))
        if created:
            index.add(end, suffix_of(new))

    def _final_value(self, key: Any, key_bytes: bytes, start: int, end: int) -> Any:
        sessions = self._sessions.get(key_bytes)
        if sessions is None:
            return super()._final_value(key, key_bytes, start, end)
        for s_end, s_start, serialized, _ in sessions:
            if s_end == end and s_start == start:
                return self._value_serde.deserialize(serialized)
        return None


def _final_twin(processor: SessionWindowFinalProcessor) -> BatchSessionWindowFinalProcessor:
    twin = BatchSessionWindowFinalProcessor.__new__(BatchSessionWindowFinalProcessor)
    twin.__dict__.update(processor.__dict__)
    return twin


register_batch_variant(SessionWindowFinalProcessor, _final_twin)
