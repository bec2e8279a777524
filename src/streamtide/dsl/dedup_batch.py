"""Deduplication for batch processing: the same decisions as ``DeduplicateProcessor``, with
each dedup id's stored entries read once per batch instead of two range scans per record.

Within a batch an id's entries live in a list in memory: found on the id's first record (one
range scan), extended by the records the batch stores. Expiry is applied by comparison
(``ts < stream_time - interval`` hides an entry, as the record path's purge deletes it).
At commit the store receives exactly the writes the record path would have left in its write
buffer: one purge up to the last cutoff, the entries stored and still live, and tombstones for
the entries stored and expired within the batch. So outputs, changelogs and state are those of
record-at-a-time processing (a property test checks it).
"""

from __future__ import annotations

from typing import Any

from streamtide.dsl.deduplicate import DeduplicateProcessor
from streamtide.processor.api import ProcessorContext
from streamtide.processor.variants import register_batch_variant
from streamtide.record import Record, RecordMetadata

#: An entry: its timestamp and origin (None: a record without offset).
Entry = tuple[int, "RecordMetadata | None"]


class BatchDeduplicateProcessor(DeduplicateProcessor):
    """Batch twin of ``DeduplicateProcessor`` (see the module docstring)."""

    def __init__(self, store_name: str, interval_ms: int, ids: Any) -> None:
        super().__init__(store_name, interval_ms, ids)
        self._entries: dict[bytes, list[Entry]] = {}
        self._stored: dict[tuple[bytes, int], RecordMetadata | None] = {}
        self._cutoff: int | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        context.register_flush_listener(self.flush)

    def _load(self, dedup_id: bytes) -> list[Entry]:
        entries = [(e.timestamp, e.origin) for e in self.store.fetch(dedup_id)]
        self._entries[dedup_id] = entries
        return entries

    def process(self, record: Record) -> None:
        context = self.context
        ids = self.ids
        dedup_id = ids.id_of(record)
        if dedup_id is None:
            context.forward(ids.output(record))
            return
        interval = self.interval
        cutoff = context.current_stream_time_ms() - interval
        self._cutoff = cutoff
        entries = self._entries.get(dedup_id)
        if entries is None:
            entries = self._load(dedup_id)
        t = record.timestamp
        low = t - interval if t - interval > cutoff else cutoff
        high = t + interval
        found = [origin for ts, origin in entries if low <= ts <= high]
        if not found:
            if t >= cutoff:  # a late record is forwarded but not stored
                origin = context.record_metadata()
                if len(entries) > 8:
                    entries[:] = [e for e in entries if e[0] >= cutoff]
                entries.append((t, origin))
                self._stored[(dedup_id, t)] = origin
        else:
            origin = context.record_metadata()
            if origin is None or all(stored != origin for stored in found):
                context.metrics.increment("dropped-duplicates")
                return
        context.forward(ids.output(record))

    def flush(self) -> None:
        """Write the batch's changes to the store (see the module docstring)."""
        store, cutoff = self.store, self._cutoff
        if cutoff is not None:
            store.purge_expired(cutoff)
            for (dedup_id, ts), origin in self._stored.items():
                if ts >= cutoff:
                    store.put(dedup_id, ts, origin)
                else:
                    store.discard(dedup_id, ts)
        self._entries.clear()
        self._stored.clear()
        self._cutoff = None


register_batch_variant(
    DeduplicateProcessor,
    lambda p: BatchDeduplicateProcessor(p.store_name, p.interval, p.ids),
)
