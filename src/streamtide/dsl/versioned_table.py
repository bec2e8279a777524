"""A table kept in a versioned store (``Materialized.as_(Stores.persistent_versioned_
key_value_store(name, history_retention))`` on ``StreamsBuilder.table`` or
``KStream.to_table``): Kafka Streams' versioned tables (KIP-889, KIP-914).

The store keeps every version of a key within its history retention (``state.versioned``),
so a stream-table join can read the table as of each stream record's timestamp
(``dsl.table_joins``), and queries can ask ``get(key, as_of)``. The source operator puts each
update into the store and forwards only updates that became the key's latest version:

- an update older than the key's latest version (out of order) is kept in the history, for
  as-of lookups, but not forwarded: the table's current value did not change;
- an update older than the store's history retention (its grace period) is not stored at all
  and counted in ``dropped-records`` by the store.

Kafka forwards out-of-order updates marked "not latest", so that ``to_stream`` shows them and
joins and ``group_by`` ignore them; this table forwards none, so ``to_stream`` of a versioned
table differs from Kafka's there (joins and re-grouping see the same updates).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streamtide.dsl.change import Change
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.state.versioned import PUT_RETURN_CODE_VALID_TO_UNDEFINED

if TYPE_CHECKING:
    from streamtide.dsl.table_source import SourceOrigin

log = logging.getLogger(__name__)


class VersionedTableSourceOperator(ColumnOperator):
    """Puts each row into the versioned store and forwards those that became the latest."""

    def __init__(self, origin: SourceOrigin) -> None:
        self.store_name = origin.store_name
        self.send_old_values = origin.send_old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)  # type: ignore[arg-type]

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        store, send_old_values = self.store, self.send_old_values
        latest = PUT_RETURN_CODE_VALID_TO_UNDEFINED
        positions: list[int] = []
        changes: list[Change] = []
        nulls = out_of_order = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key = keys[p]
                    if key is None:
                        nulls += 1
                        continue
                    old = store.get(key) if send_old_values else None
                    if store.put(key, values[p], timestamps[p]) != latest:
                        out_of_order += 1  # kept in the history, or too late to keep
                        continue
                    positions.append(p)
                    changes.append(Change(values[p], None if old is None else old.value))
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if nulls:
            log.warning("skipping %d table records with a None key", nulls)
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        if out_of_order:
            log.debug("%d updates of %r were not the latest: not forwarded", out_of_order, self)
        self.emit(batch.derive(positions, [keys[p] for p in positions], changes))
