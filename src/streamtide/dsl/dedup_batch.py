"""Deduplication for batch processing: the same decisions as ``DeduplicateProcessor``, with
each dedup id's stored entries read once per batch instead of two range scans per record.

Within a batch an id's entries live in a list in memory: found on the id's first record (one
range scan), extended by the records the batch stores. Expiry is applied by comparison
(``ts < stream_time - interval`` hides an entry, as the record path's purge deletes it).
At commit the store receives exactly the writes the record path would have left in its write
buffer: one purge up to the last cutoff, the entries stored and still live, and tombstones for
the entries stored and expired within the batch. So outputs, changelogs and state are those of
record-at-a-time processing (a property test checks it).

With string keys deduplicated by key, the twin also takes whole column batches
(``process_columns``): the same decisions in one loop over the batch's keys, timestamps and
stream times, forwarding the surviving rows as one batch.
"""

from __future__ import annotations

from typing import Any

from streamtide.dsl.deduplicate import DeduplicateProcessor
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.variants import register_batch_variant
from streamtide.record import Record, RecordMetadata
from streamtide.serde import StringSerde

#: An entry: its timestamp and origin as (topic, partition, offset), or None for a record
#: without offset (tuples compare without a Python-level call).
Entry = tuple[int, "tuple[str, int, int] | None"]


def _origin_tuple(origin: RecordMetadata | None) -> tuple[str, int, int] | None:
    return None if origin is None else (origin.topic, origin.partition, origin.offset)


class BatchDeduplicateProcessor(DeduplicateProcessor):
    """Batch twin of ``DeduplicateProcessor`` (see the module docstring)."""

    def __init__(self, store_name: str, interval_ms: int, ids: Any) -> None:
        super().__init__(store_name, interval_ms, ids)
        #: per dedup id of the batch (the key itself for string keys deduplicated by key,
        #: else the id's bytes): its entries
        self._entries: dict[Any, list[Entry]] = {}
        self._stored: dict[tuple[Any, int], tuple[str, int, int] | None] = {}
        self._cutoff: int | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        ids = self.ids
        self._string_keys = (
            ids.operation == "deduplicate_by_key" and type(ids.key_serde) is StringSerde
        )
        self._metrics = context.metrics
        context.register_flush_listener(self.flush)

    def _load(self, ident: Any) -> list[Entry]:
        dedup_id = ident.encode("utf-8") if ident.__class__ is str else ident
        entries = [(e.timestamp, _origin_tuple(e.origin)) for e in self.store.fetch(dedup_id)]
        self._entries[ident] = entries
        return entries

    def process(self, record: Record) -> None:
        context = self.context
        ids = self.ids
        key = record.key
        if self._string_keys and key.__class__ is str:
            ident = key  # its bytes are its UTF-8 encoding: made only to read and write
        else:
            ident = ids.id_of(record)
            if ident is None:
                context.forward(ids.output(record))
                return
            if self._string_keys:
                ident = ident.decode("utf-8")  # a str subclass: the same id as the str
        interval = self.interval
        cutoff = context.current_stream_time_ms() - interval
        self._cutoff = cutoff
        entries = self._entries.get(ident)
        if entries is None:
            entries = self._load(ident)
        t = record.timestamp
        low = t - interval if t - interval > cutoff else cutoff
        high = t + interval
        found = [origin for ts, origin in entries if low <= ts <= high] if entries else None
        if not found:
            if t >= cutoff:  # a late record is forwarded but not stored
                origin = _origin_tuple(context.record_metadata())
                if len(entries) > 8:
                    entries[:] = [e for e in entries if e[0] >= cutoff]
                entries.append((t, origin))
                self._stored[(ident, t)] = origin
        else:
            origin = _origin_tuple(context.record_metadata())
            if origin is None or origin not in found:
                self._metrics.increment("dropped-duplicates")
                return
        context.forward(ids.output(record))

    @property
    def columnar(self) -> bool:
        """Whether ``process_columns`` can take this operator's batches: string keys,
        deduplicated by key (the id is the key itself; no user function to call)."""
        return self._string_keys

    def process_columns(self, batch: ColumnBatch) -> None:
        """``process`` of every row of ``batch`` in order; forwards the rows that pass."""
        interval = self.interval
        entries_of = self._entries
        stored = self._stored
        load = self._load
        topic, partition, offsets = batch.topic, batch.partition, batch.offsets
        forwarded: list[int] = []
        forward = forwarded.append
        dropped = 0
        cutoff = None
        for row, (key, t, stream_time) in enumerate(
            zip(batch.keys, batch.timestamps, batch.stream_times)
        ):
            if key.__class__ is not str:  # a None key passes without deduplication
                forward(row)
                continue
            cutoff = stream_time - interval
            entries = entries_of.get(key)
            if entries is None:
                entries = load(key)
            if entries:
                low = t - interval if t - interval > cutoff else cutoff
                high = t + interval
                mine = None  # set once an entry is within the interval
                own = False
                for ts, origin in entries:
                    if low <= ts <= high:
                        if mine is None:
                            mine = (topic, partition, offsets[row])
                        if origin == mine and mine[2] is not None:
                            own = True  # a reprocessed record passes again
                            break
                if mine is not None:
                    if own:
                        forward(row)
                    else:
                        dropped += 1
                    continue
            if t >= cutoff:  # a late record is forwarded but not stored
                offset = offsets[row]
                origin = None if offset is None else (topic, partition, offset)
                if len(entries) > 8:
                    entries[:] = [e for e in entries if e[0] >= cutoff]
                entries.append((t, origin))
                stored[(key, t)] = origin
            forward(row)
        if cutoff is not None:
            self._cutoff = cutoff
        if dropped:
            self._metrics.increment("dropped-duplicates", dropped)
        if forwarded:
            self.context.forward_columns(batch.take(forwarded))  # type: ignore[attr-defined]

    def flush(self) -> None:
        """Write the batch's changes to the store (see the module docstring)."""
        cutoff = self._cutoff
        if cutoff is not None:
            self.store.purge_expired(cutoff)
            self.store.write_entries(
                [
                    (
                        ident.encode("utf-8") if ident.__class__ is str else ident,
                        ts,
                        origin,
                        ts >= cutoff,
                    )
                    for (ident, ts), origin in self._stored.items()
                ]
            )
        self._entries.clear()
        self._stored.clear()
        self._cutoff = None


register_batch_variant(
    DeduplicateProcessor,
    lambda p: BatchDeduplicateProcessor(p.store_name, p.interval, p.ids),
)
