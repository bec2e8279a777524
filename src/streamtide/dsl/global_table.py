"""Global tables: ``StreamsBuilder.global_table(topic)`` and ``KStream.join/left_join(
global_table, key_selector, joiner)``.

A ``GlobalKTable`` is the latest value per key of *every* partition of its topic, held by
every task (``runtime.global_stores``), so a stream joins it on any key it computes, without
repartitioning or co-partitioning. The topic is the table's changelog. As in Kafka Streams:

- ``key_selector(key, value)`` gives the table key to look up; the stream's own key may be
  None. ``joiner(stream_value, table_value)`` makes the result, which keeps the stream
  record's key and timestamp.
- Only stream records trigger output; table updates never do.
- A stream record with a None value, or whose ``key_selector`` returns None, is dropped and
  counted in ``dropped-records`` (for the left join too). An inner join emits nothing for a
  key the table lacks; a left join emits ``joiner(value, None)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.join_lookup import StoredLookup, plain_read, present
from streamtide.dsl.params import Consumed, Materialized, ensure_callable
from streamtide.errors import TopologyError
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator, call_rows
from streamtide.processor.topology import GlobalStoreSpec
from streamtide.serde import Serde

if TYPE_CHECKING:
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.kstream import KStream


class GlobalKTable:
    """A table of the whole topic, present in every task (see the module docstring)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        topic: str,
        store_name: str,
        key_serde: Serde | None,
        value_serde: Serde | None,
    ) -> None:
        self.builder = builder
        self.topic = topic
        self.store_name = store_name
        self.key_serde = key_serde
        self.value_serde = value_serde

    def __repr__(self) -> str:
        return f"GlobalKTable(topic={self.topic!r}, store={self.store_name!r})"


def global_table(
    builder: StreamsBuilder,
    topic: str,
    consumed: Consumed | None = None,
    materialized: Materialized | None = None,
) -> GlobalKTable:
    """Register ``topic`` as a global table; its store is named by ``materialized``."""
    if not isinstance(topic, str) or not topic:
        raise TopologyError(f"global_table() needs a topic name, got {topic!r}")
    consumed = consumed or Consumed()
    materialized = materialized or Materialized()
    if not isinstance(consumed, Consumed) or not isinstance(materialized, Materialized):
        raise TypeError("global_table() takes a Consumed and a Materialized")
    store_name = materialized.store_name or builder.new_name(f"{topic}-STATE-STORE-")
    key_serde = materialized.key_serde or consumed.key_serde
    value_serde = materialized.value_serde or consumed.value_serde
    builder.topology.add_global_store(GlobalStoreSpec(store_name, topic, key_serde, value_serde))
    return GlobalKTable(builder, topic, store_name, key_serde, value_serde)


class GlobalTableJoinOperator(ColumnOperator):
    """Looks each stream row up in the global store (see the module docstring), each
    distinct table key once per batch (``dsl.join_lookup``)."""

    def __init__(
        self,
        store_name: str,
        key_selector: Callable[[Any, Any], Any],
        joiner: Callable[[Any, Any], Any],
        left: bool,
    ) -> None:
        self.store_name = store_name
        self.key_selector = key_selector
        self.joiner = joiner
        self.left = left

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        table = context.get_state_store(self.store_name)
        self.stored = StoredLookup(table.key_serde, table.value_serde, plain_read(table.inner))

    def process_batch(self, batch: ColumnBatch) -> None:
        values = batch.values
        rows = batch.take([p for p, value in enumerate(values) if value is not None])
        nulls = len(values) - len(rows)
        selected, table_keys = call_rows(self, rows, self.key_selector, rows.keys, rows.values)
        if selected is not None:
            rows = rows.take(selected)
        kept = [p for p, table_key in enumerate(table_keys) if table_key is not None]
        if len(kept) < len(table_keys):
            nulls += len(table_keys) - len(kept)
            rows = rows.take(kept)
            table_keys = [table_keys[p] for p in kept]
        if nulls:
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        stored = self.stored
        found, raws = stored.read_rows(self, rows, table_keys)
        if not self.left:
            found, raws = present(found, raws)
        found, tables = stored.values(self, rows, found, raws)
        if not self.left:
            found, tables = present(found, tables)
        joined = rows.take(found)
        ok, results = call_rows(self, joined, self.joiner, joined.values, tables)
        out = joined if ok is None else joined.take(ok)
        self.emit(out.with_values(results))


def join_global_table(
    stream: KStream,
    table: GlobalKTable,
    key_selector: Any = None,
    joiner: Any = None,
    *,
    left: bool,
) -> KStream:
    """Add a stream-global-table join to the topology; the joined stream."""
    from streamtide.dsl.kstream import KStream

    operation = "left_join" if left else "join"
    if table.builder is not stream.builder:
        raise TopologyError(f"{operation}() needs a GlobalKTable of the same StreamsBuilder")
    ensure_callable(key_selector, f"{operation} key_selector")
    ensure_callable(joiner, f"{operation} joiner")
    name = stream.builder.new_name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
    store = table.store_name
    stream.builder.topology.add_processor(
        name,
        lambda: GlobalTableJoinOperator(store, key_selector, joiner, left),
        stream.node,
    )
    return KStream(stream.builder, name, stream.key_serde, None, stream.repartition_required)
