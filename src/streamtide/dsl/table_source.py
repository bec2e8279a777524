"""``StreamsBuilder.table``: a topic read as a table, the latest value per key.

A source table is kept in a timestamped key-value store (each value with its record's
timestamp) when it is materialized: when ``Materialized`` names it, or when an operator
downstream needs to look keys up or to see old values (a join, ``group_by``). Its changelog
is the source topic itself (Kafka's source-topic optimization): nothing is written to a
changelog topic, and a restore replays the source topic up to the task's committed input
offset. A record with a None key is dropped (``dropped-records``); a None value is a
tombstone that deletes the key and is forwarded as ``(key, None)``.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from streamtide.dsl.change import Change
from streamtide.dsl.params import Consumed, Materialized
from streamtide.dsl.table_state import TableOperator
from streamtide.dsl.table_view import TableOrigin, source_table_store, versioned_view
from streamtide.errors import TopologyError
from streamtide.processor import drops
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.record import RecordMetadata

if TYPE_CHECKING:
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.kstream import KStream
    from streamtide.dsl.ktable import KTable

log = logging.getLogger(__name__)


class SourceOrigin(TableOrigin):
    """A source table; materializes itself on demand (see the module docstring). ``topic``:
    the source topic that is the store's changelog; None (``KStream.to_table``): the store
    has a changelog topic of its own."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        topic: str | None,
        materialized: Materialized,
        key_serde: Any,
        value_serde: Any,
    ) -> None:
        self.builder = builder
        self.node = node
        self.topic = topic
        self.materialized = materialized
        self.key_serde = key_serde
        self.value_serde = value_serde

    @property
    def versioned(self) -> bool:
        """Whether the table is kept in a versioned store (``dsl.versioned_table``)."""
        return self.materialized.versioned is not None

    def materialize(self) -> str:
        """Give the table its store (once) and make the source topic its changelog (not for
        a versioned store: its history is not the topic's bytes, so it logs its own)."""
        if self.store_name is None:
            store = source_table_store(
                self.builder, self.materialized, self.key_serde, self.value_serde
            )
            topology = self.builder.topology
            topology.add_state_store(store, self.node)
            if store.logging_enabled and self.topic is not None and not self.versioned:
                topology.use_source_topic_as_changelog(store.name, self.topic)
            self.store_name = store.name
        return self.store_name

    def view(self) -> Any:
        self.materialize()
        if self.versioned:
            return versioned_view(self.store_name)  # type: ignore[arg-type]
        return super().view()

    def operator(self) -> ColumnOperator:
        """The table source's operator (a new one per task)."""
        if self.versioned:
            from streamtide.dsl.versioned_table import VersionedTableSourceOperator

            return VersionedTableSourceOperator(self)
        return TableSourceOperator(self)

    def enable_sending_old_values(self, force: bool) -> bool:
        if force:
            self.materialize()
        return super().enable_sending_old_values(force)


class TableSourceOperator(TableOperator):
    """Puts each row into the table's store (when materialized) and emits the change."""

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        table, send_old_values = self.table, self.send_old_values
        positions: list[int] = []
        changes: list[Change] = []
        nulls = 0
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, value = keys[p], values[p]
                    if key is None:
                        self._null_key(batch, p)
                        nulls += 1
                        continue
                    old = None
                    if table is not None:
                        ident, entry = table.entry(key)
                        if entry[1] is not None:
                            if timestamps[p] < entry[3]:
                                self._out_of_order(key, entry[3], timestamps[p])
                            if send_old_values:
                                old = table.value(entry)
                        table.put(ident, entry, value, timestamps[p])
                    positions.append(p)
                    changes.append(Change(value, old))
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if nulls:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        if table is not None:
            table.write_back()
        self.emit(batch.derive(positions, [keys[p] for p in positions], changes))

    def _null_key(self, batch: ColumnBatch, p: int) -> None:
        offset = batch.offsets[p]
        where = "no metadata"
        if offset is not None and batch.topic is not None:
            where = str(RecordMetadata(batch.topic, batch.partition, offset))
        log.warning("skipping a table record with a None key (%s)", where)

    def _out_of_order(self, key: Any, stored: int, timestamp: int) -> None:
        log.warning(
            "out-of-order update of table store %r: key %r had timestamp %d, the update has %d",
            self.store_name,
            key,
            stored,
            timestamp,
        )


def _differ(a: Any, b: Any) -> bool:
    """Whether two serdes may write different bytes (same class and settings: the same)."""
    return a is not b and (type(a) is not type(b) or vars(a) != vars(b))


def table(
    builder: StreamsBuilder,
    topic: str,
    consumed: Consumed | None,
    materialized: Materialized | None,
) -> KTable:
    """See ``StreamsBuilder.table``."""
    from streamtide.dsl.ktable import KTable

    consumed = consumed or Consumed()
    materialized = materialized or Materialized()
    for what, read, kept in (
        ("key", consumed.key_serde, materialized.key_serde),
        ("value", consumed.value_serde, materialized.value_serde),
    ):
        if read is not None and kept is not None and _differ(read, kept):
            raise TopologyError(
                f"table({topic!r}): Consumed and Materialized give different {what} serdes "
                f"({read!r}, {kept!r}); the store is restored from the topic's bytes, so "
                f"give one serde"
            )
    key_serde = consumed.key_serde or materialized.key_serde
    value_serde = consumed.value_serde or materialized.value_serde
    # Named up front, as in Kafka: the store name comes before the nodes' names.
    named = materialized.store_name is not None
    if not named:
        materialized = replace(materialized, store_name=builder.new_name(f"{topic}-STATE-STORE-"))
    source = builder.stream(
        topic,
        Consumed(key_serde, value_serde, consumed.name, consumed.timestamp_extractor),
    )
    node = builder.new_name("KTABLE-SOURCE-")
    origin = SourceOrigin(builder, node, topic, materialized, key_serde, value_serde)
    builder.topology.add_processor(node, origin.operator, source.node)
    if named:
        origin.materialize()
    return KTable(builder, node, origin.store_name, key_serde, value_serde, origin=origin)


def stream_to_table(
    stream: KStream, named: str | None, materialized: Materialized | None
) -> KTable:
    """See ``KStream.to_table``: the stream's records as table updates (Kafka's
    ``toTable``, KIP-523), repartitioned first when a key-changing operation came before. The
    table gets a store (with its own changelog) when ``materialized`` names one, or when an
    operator downstream needs one, as a source table does."""
    from streamtide.dsl.ktable import KTable

    builder = stream.builder
    materialized = materialized or Materialized()
    name = named or builder.new_name("KSTREAM-TOTABLE-")
    named_store = materialized.store_name is not None
    if not named_store:
        materialized = replace(
            materialized, store_name=builder.new_name("KSTREAM-TOTABLE-STATE-STORE-")
        )
    key_serde = materialized.key_serde or stream.key_serde
    value_serde = materialized.value_serde or stream.value_serde
    if stream.repartition_required:
        stream = stream.through_repartition_topic(name, key_serde, value_serde)
    origin = SourceOrigin(builder, name, None, materialized, key_serde, value_serde)
    builder.topology.add_processor(name, origin.operator, stream.node)
    if named_store:
        origin.materialize()
    return KTable(builder, name, origin.store_name, key_serde, value_serde, origin=origin)
