"""The deduplication operators (KIP-655) on the column contract.

``DeduplicateOperator`` decides each row in one loop over the batch (rules in
docs/deduplication.md; SEMANTICS section 3). Each dedup id's stored entries are read once per
batch, on the id's first row (one range scan), and kept in a list in memory, extended by the
rows the batch stores. Expiry is applied by comparison (``ts < stream_time - interval`` hides
an entry, as the rule's purge deletes it). Before ``process_batch`` returns, the store receives
exactly the writes the rule applied record by record would have left: one purge up to the last
cutoff, the entries stored and still live, and tombstones for the entries stored and expired
within the batch; changelogs and restores are those of record-at-a-time processing.

With string keys deduplicated by key the id is the key itself (its bytes are its UTF-8
encoding, made only to read and write the store). ``IdSelectOperator`` is the id-select node
before the repartition of ``deduplicate``.
"""

from __future__ import annotations

from typing import Any

from streamtide.dsl.dedup_ids import DedupIds
from streamtide.errors import TopologyError
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator, call_rows
from streamtide.serde import StringSerde
from streamtide.state.dedup import DedupStore

#: An entry: its timestamp and origin as (topic, partition, offset), or None for a record
#: without offset (tuples compare without a Python-level call).
Entry = tuple[int, "tuple[str, int, int] | None"]


def _origin(metadata: Any) -> tuple[str, int, int]:
    return (metadata.topic, metadata.partition, metadata.offset)


class DeduplicateOperator(ColumnOperator):
    """Passes a row unless a stored row with the same id is within the interval."""

    def __init__(self, store_name: str, interval_ms: int, ids: DedupIds) -> None:
        self.store_name = store_name
        self.interval = interval_ms
        self.ids = ids
        #: per dedup id of the batch (the key itself for string keys deduplicated by key,
        #: else the id's bytes): its entries
        self._entries: dict[Any, list[Entry]] = {}
        self._stored: dict[tuple[Any, int], tuple[str, int, int] | None] = {}
        self._cutoff: int | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.ids = ids = self.ids.resolved(context)
        store = context.get_state_store(self.store_name)
        if not isinstance(store, DedupStore):
            raise TopologyError(f"{ids.operation}: store {self.store_name!r} is not a dedup store")
        self.store = store
        self._string_keys = (
            ids.operation == "deduplicate_by_key" and type(ids.key_serde) is StringSerde
        )
        self._restores = ids.operation == "deduplicate"

    def _load(self, ident: Any) -> list[Entry]:
        dedup_id = ident.encode("utf-8") if ident.__class__ is str else ident
        entries: list[Entry] = [
            (e.timestamp, None if e.origin is None else _origin(e.origin))
            for e in self.store.fetch(dedup_id)
        ]
        self._entries[ident] = entries
        return entries

    def process_batch(self, batch: ColumnBatch) -> None:
        interval = self.interval
        entries_of = self._entries
        stored = self._stored
        load = self._load
        id_for = self.ids.id_for
        string_keys = self._string_keys
        topic, partition = batch.topic, batch.partition
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        offsets, stream_times = batch.offsets, batch.stream_times
        forwarded: list[int] = []
        forward = forwarded.append
        dropped = 0
        cutoff = None
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    ident = keys[p]
                    if not string_keys or ident.__class__ is not str:
                        ident = id_for(ident, values[p])
                        if ident is None:  # passes without deduplication, never stored
                            forward(p)
                            continue
                        if string_keys:
                            ident = ident.decode("utf-8")  # the same id as the str key
                    t = timestamps[p]
                    cutoff = stream_times[p] - interval
                    entries = entries_of.get(ident)
                    if entries is None:
                        entries = load(ident)
                    if entries:
                        low = t - interval if t - interval > cutoff else cutoff
                        high = t + interval
                        mine = None  # set once an entry is within the interval
                        own = False
                        for ts, origin in entries:
                            if low <= ts <= high:
                                if mine is None:
                                    mine = (topic, partition, offsets[p])
                                if mine[2] is not None and origin == mine:
                                    own = True  # a reprocessed record passes again
                                    break
                        if mine is not None:
                            if own:
                                forward(p)
                            else:
                                dropped += 1
                            continue
                    if t >= cutoff:  # a late record is forwarded but not stored
                        offset = offsets[p]
                        # records read from a topic have an origin; others have none
                        origin = (
                            None if offset is None or topic is None else (topic, partition, offset)
                        )
                        if len(entries) > 8:
                            entries[:] = [e for e in entries if e[0] >= cutoff]
                        entries.append((t, origin))
                        stored[(ident, t)] = origin
                    forward(p)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if cutoff is not None:
            self._cutoff = cutoff
        if dropped:
            self.context.metrics.increment("dropped-duplicates", dropped)
        self._write_back()
        out = batch.take(forwarded)
        if self._restores:
            out = self._restored(out)
        self.emit(out)

    def _restored(self, batch: ColumnBatch) -> ColumnBatch:
        """``deduplicate``: the original keys and values of the rows that pass."""
        positions, pairs = call_rows(self, batch, self.ids.restore, batch.values)
        out = batch if positions is None else batch.take(positions)
        return out.with_keys_values([key for key, _ in pairs], [value for _, value in pairs])

    def _write_back(self) -> None:
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


class IdSelectOperator(ColumnOperator):
    """Before the repartition of ``deduplicate``: key = id bytes, value = (key, value) pair."""

    def __init__(self, ids: DedupIds) -> None:
        self.ids = ids

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.ids = self.ids.resolved(context)

    def process_batch(self, batch: ColumnBatch) -> None:
        positions, selected = call_rows(self, batch, self.ids.select, batch.keys, batch.values)
        out = batch if positions is None else batch.take(positions)
        self.emit(out.with_keys_values([i for i, _ in selected], [pair for _, pair in selected]))
