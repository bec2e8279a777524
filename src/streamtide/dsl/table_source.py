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
from streamtide.dsl.table_view import TableOrigin, TableProcessor, table_store
from streamtide.errors import TopologyError
from streamtide.processor import drops
from streamtide.record import Record

if TYPE_CHECKING:
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.ktable import KTable

log = logging.getLogger(__name__)


class SourceOrigin(TableOrigin):
    """A source table; materializes itself on demand (see the module docstring)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        topic: str,
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

    def materialize(self) -> str:
        """Give the table its store (once) and make the source topic its changelog."""
        if self.store_name is None:
            store = table_store(
                self.builder, self.materialized, "", self.key_serde, self.value_serde
            )
            topology = self.builder.topology
            topology.add_state_store(store, self.node)
            if store.logging_enabled:
                topology.use_source_topic_as_changelog(store.name, self.topic)
            self.store_name = store.name
        return self.store_name

    def enable_sending_old_values(self, force: bool) -> bool:
        if force:
            self.materialize()
        return super().enable_sending_old_values(force)

    def view(self) -> Any:
        self.materialize()
        return super().view()


class TableSourceProcessor(TableProcessor):
    """Puts each record into the table's store (when materialized) and forwards the change."""

    def process(self, record: Record) -> None:
        if record.key is None:
            metadata = self.context.record_metadata()
            log.warning("skipping a table record with a None key (%s)", metadata or "no metadata")
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return
        old = None
        if self.store is not None:
            previous = self.store.get_with_timestamp(record.key)
            if previous is not None:
                if record.timestamp < previous.timestamp:
                    log.warning(
                        "out-of-order update of table store %r: key %r had timestamp %d, "
                        "the update has %d",
                        self.store_name,
                        record.key,
                        previous.timestamp,
                        record.timestamp,
                    )
                if self.send_old_values:
                    old = previous.value
            self.store.put_with_timestamp(record.key, record.value, record.timestamp)
        self.context.forward(record.with_value(Change(record.value, old)))


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
    builder.topology.add_processor(node, lambda: TableSourceProcessor(origin), source.node)
    if named:
        origin.materialize()
    return KTable(builder, node, origin.store_name, key_serde, value_serde, origin=origin)
