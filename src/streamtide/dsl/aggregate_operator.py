"""Key-value ``count``/``reduce``/``aggregate`` of a grouped stream, on the column contract.

Each row is folded into its key's aggregate and the new aggregate is emitted (through the
record cache when it is on). The result's timestamp is the larger of the row's and the
previous result's, kept with the aggregate in the timestamped store. Rows with a None key or
value are dropped (``dropped-records``), as in Kafka Streams. An adder returning None deletes
the key (a tombstone).

Read once, write once: a key's stored aggregate is read on its first row of a batch and kept
in memory serialized, as the store holds it (so an adder that changes its aggregate in place
cannot alter what was already emitted; values the serde gives back exactly, such as counts,
are kept as they are). Before ``process_batch`` returns, each changed key's last aggregate is
written to the store, in the order the keys first changed: the store's write buffer (and so
the changelog) then holds what per-record puts would have left.

Old values: when a table operator below asks for them (a ``filter``, which then forwards a
tombstone only for a key that passed before: Kafka's KTableFilter), each update is emitted as
``Change(new, old)`` with a copy of its own of the previous aggregate; through the record
cache, ``old`` is the value the key's last flushed update had.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.cache import EmitCache, emit_as_batch
from streamtide.dsl.change import Change
from streamtide.dsl.kept import UNREAD, is_count
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.table_state import KeptTable
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.record import Record

if TYPE_CHECKING:
    from streamtide.dsl.table_view import TableOrigin


class StreamAggregateOperator(ColumnOperator):
    """Folds each row into the aggregate of its key (see the module docstring)."""

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], Any] | Any,
        adder: Callable[[Any, Any, Any], Any],
        caching_allowed: bool,
        origin: TableOrigin,
    ) -> None:
        self.store_name = store_name
        #: updates carry the previous aggregate as ``Change(new, old)`` (a filter below asked)
        self.send_old_values = origin.send_old_values
        self.initializer = initializer
        self.adder = adder
        self.caching_allowed = caching_allowed
        self.reads_values = not is_count(initializer, adder)

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = store = context.get_state_store(self.store_name)
        self.cache = EmitCache(context, self.caching_allowed, emit_as_batch(self))
        # keys by identity, aggregates serialized by the store's serde without timestamps
        self.table = KeptTable(store, self.initializer, self.adder)

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps, headers = (
            batch.keys,
            batch.values,
            batch.timestamps,
            batch.headers,
        )
        table = self.table
        entries, changed, load = table.entries, table.changed, table.load
        initializer, adder = self.initializer, self.adder
        kept = table.kept
        serialize, deserialize = kept.value_serde.serialize, kept.value_serde.deserialize
        string_keys, counting, exact = kept.string_keys, kept.counting, kept.exact
        cache = self.cache if self.cache.enabled else None
        send_old_values = self.send_old_values
        previous = None
        out_positions: list[int] = []
        out_values: list[Any] = []
        out_timestamps: list[int] = []
        nulls = 0
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
                    if string_keys and key.__class__ is str:
                        ident = key
                        entry = entries.get(ident)
                        if entry is None:
                            entry = load(ident, key.encode("utf-8"))
                    else:
                        ident, key_bytes = kept.ident(key)
                        entry = entries.get(ident)
                        if entry is None:
                            entry = load(ident, key_bytes)
                    key_bytes, raw, old, timestamp = entry
                    t = timestamps[p]
                    if send_old_values:  # a copy of its own: the adder may change ``old``
                        previous = None if raw is None else kept.read(raw, old)
                    if counting:
                        if raw is None:
                            new = 1
                        else:
                            count = deserialize(raw) if old is UNREAD else old
                            new = count + 1  # type: ignore[operator]  # stored counts are ints
                            if timestamp > t:
                                t = timestamp
                    elif raw is None:
                        new = (
                            value
                            if initializer is NO_INITIALIZER
                            else adder(key, value, initializer())
                        )
                    else:
                        if old is UNREAD:
                            old = deserialize(raw)
                        new = adder(key, value, old)
                        if timestamp > t:
                            t = timestamp
                    raw = serialize(new)
                    entries[ident] = (
                        key_bytes,
                        raw,
                        new if new.__class__ in exact else UNREAD,
                        t,
                    )
                    changed[ident] = None
                    update = Change(new, previous) if send_old_values else new
                    if cache is not None:
                        cache.emit(Record(key, update, t, headers[p]))
                    else:
                        out_positions.append(p)
                        out_values.append(update)
                        out_timestamps.append(t)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if nulls:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        table.write_back()
        if out_positions:
            self.emit(
                batch.derive(
                    out_positions,
                    [keys[p] for p in out_positions],
                    out_values,
                    out_timestamps,
                )
            )
