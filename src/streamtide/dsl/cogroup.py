"""``KGroupedStream.cogroup`` and ``CogroupedKStream.aggregate`` (Kafka Streams' KIP-150):
one aggregate per key fed by several grouped streams, each with its own aggregator, in one
store.

On the operator path: each grouped stream (repartitioned first through ``<Grouped name or
store>-repartition`` when its key was changed) gets a tagging node ``<name>-cogroup-agg-<i>``
that marks each value with the index of its stream, and every tag node feeds the one
aggregation node ``<name>-cogroup-merge``: the key-value aggregation of
``dsl.aggregate_operator`` (one store, one record cache, read once and write once per batch),
whose adder hands each value to its own stream's aggregator. Rows of different source topics
never share a batch, and where two cogrouped streams come from one source the task's cut
analysis hands rows on one at a time (converging paths), so the aggregate sees the records in
the order record-at-a-time processing does. As in Kafka, the result's timestamp is the largest
of the key's records; records with a None key or value are dropped (``dropped-records``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.aggregate_operator import StreamAggregateOperator
from streamtide.dsl.params import Materialized, Named, ensure_callable, named_of
from streamtide.dsl.table_view import AggregationOrigin
from streamtide.errors import TopologyError
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.kgrouped import KGroupedStream
    from streamtide.dsl.ktable import KTable

Aggregator = Callable[[Any, Any, Any], Any]


class CogroupTagOperator(ColumnOperator):
    """Marks each value with its stream's index: ``(index, value)`` (None stays None)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def process_batch(self, batch: ColumnBatch) -> None:
        index = self.index
        self.emit(batch.with_values([None if v is None else (index, v) for v in batch.values]))


def cogrouped_adder(aggregators: list[Aggregator]) -> Aggregator:
    """The adder of the cogroup's aggregation: each tagged value to its stream's aggregator."""

    def add(key: Any, tagged: tuple[int, Any], aggregate: Any) -> Any:
        return aggregators[tagged[0]](key, tagged[1], aggregate)

    return add


class CogroupedKStream:
    """Grouped streams to aggregate together: ``cogroup(grouped, aggregator)`` adds one,
    ``aggregate(initializer, ...)`` builds the table."""

    def __init__(self, grouped: KGroupedStream, aggregator: Aggregator) -> None:
        self.builder = grouped.builder
        self.key_serde = grouped.key_serde
        #: each grouped stream (once, in the order first given) with its aggregator
        self._groups: dict[int, tuple[KGroupedStream, Aggregator]] = {}
        self.cogroup(grouped, aggregator)

    def cogroup(self, grouped: KGroupedStream, aggregator: Aggregator) -> CogroupedKStream:
        """Add ``grouped`` with ``aggregator(key, value, aggregate)`` (giving a stream again
        replaces its aggregator, as in Kafka)."""
        from streamtide.dsl.kgrouped import KGroupedStream

        if not isinstance(grouped, KGroupedStream) or grouped.builder is not self.builder:
            raise TopologyError("cogroup() needs a KGroupedStream of the same StreamsBuilder")
        ensure_callable(aggregator, "cogroup aggregator")
        self._groups[id(grouped)] = (grouped, aggregator)
        return self

    def aggregate(
        self,
        initializer: Callable[[], Any],
        named: Named | str | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """One aggregate per key from ``initializer()``, each record folded in by its own
        stream's aggregator; ``named`` names the nodes, ``materialized`` the store (its value
        serde serializes the aggregate)."""
        from streamtide.dsl.ktable import KTable

        ensure_callable(initializer, "initializer")
        if isinstance(named, Materialized):
            named, materialized = None, named
        materialized = materialized or Materialized()
        builder = self.builder
        base = named_of(named)
        store_name = materialized.store_name or builder.new_name(
            "COGROUPKSTREAM-AGGREGATE-STATE-STORE-"
        )
        groups = list(self._groups.values())
        sources = [grouped.source_for(store_name) for grouped, _ in groups]
        topology = builder.topology
        tags = []
        for index, source in enumerate(sources):
            tag = (
                f"{base}-cogroup-agg-{index}"
                if base
                else builder.new_name("COGROUPKSTREAM-AGGREGATE-")
            )
            topology.add_processor(tag, lambda i=index: CogroupTagOperator(i), source.node)
            tags.append(tag)
        node = f"{base}-cogroup-merge" if base else builder.new_name("COGROUPKSTREAM-MERGE-")
        key_serde = materialized.key_serde or self.key_serde
        value_serde = materialized.value_serde
        store = KeyValueStoreBuilder(
            KeyValueBytesStoreSupplier(store_name, materialized.resolved_store_type()),
            key_serde,
            value_serde,
            logging_enabled=materialized.logging_enabled,
            timestamped=True,
        )
        adder = cogrouped_adder([aggregator for _, aggregator in groups])
        caching = materialized.caching_enabled
        origin = AggregationOrigin(store_name)
        topology.add_processor(
            node,
            lambda: StreamAggregateOperator(store_name, initializer, adder, caching, origin),
            *tags,
        )
        topology.add_state_store(store, node)
        topology.add_copartition_group(
            {t for source in sources for t in topology.upstream_source_topics(source.node)},
            f"cogroup {node!r}",
        )
        return KTable(builder, node, store_name, key_serde, value_serde, origin=origin)
