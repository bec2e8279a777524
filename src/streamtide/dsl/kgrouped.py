"""``KGroupedStream``: a stream grouped by key, ready for aggregation into a ``KTable``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.aggregate_operator import StreamAggregateOperator
from streamtide.dsl.ktable import KTable
from streamtide.dsl.params import Materialized, Named, ensure_callable, named_of
from streamtide.dsl.processors import NO_INITIALIZER, count_aggregator, count_initializer
from streamtide.dsl.table_view import AggregationOrigin
from streamtide.serde import Serde, Serdes
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.cogroup import CogroupedKStream
    from streamtide.dsl.kstream import KStream


class KGroupedStream:
    """Records grouped by key; ``count``, ``reduce``, ``aggregate`` or ``windowed_by``."""

    def __init__(
        self,
        stream: KStream,
        key_serde: Serde | None,
        value_serde: Serde | None,
        name: str | None,
        repartition_required: bool,
    ) -> None:
        self.stream = stream
        self.builder = stream.builder
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name
        self.repartition_required = repartition_required

    def source_for(self, store_name: str) -> KStream:
        """The stream to aggregate: repartitioned through ``<name or store>-repartition`` if
        the key was changed upstream."""
        if not self.repartition_required:
            return self.stream
        return self.stream.through_repartition_topic(
            self.name or store_name, self.key_serde, self.value_serde
        )

    def parent_nodes(self, store_name: str, named: str | None = None) -> list[str]:
        """The nodes an aggregation into ``store_name`` reads (``source_for``'s)."""
        return [self.source_for(store_name).node]

    def _aggregate(
        self,
        materialized: Materialized | None,
        named: Named | str | None,
        initializer: Any,
        adder: Callable[[Any, Any, Any], Any],
        default_value_serde: Serde | None,
    ) -> KTable:
        return aggregate_into_table(
            self, materialized, named_of(named), initializer, adder, default_value_serde
        )

    def count(
        self, materialized: Materialized | None = None, named: Named | str | None = None
    ) -> KTable:
        """Number of records per key (an int, serialized with ``Serdes.long()`` by default)."""
        return self._aggregate(
            materialized, named, count_initializer, count_aggregator, Serdes.long()
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Combine the values of a key with ``reducer(aggregate, value)``."""
        ensure_callable(reducer, "reducer")
        return self._aggregate(
            materialized,
            named,
            NO_INITIALIZER,
            lambda _k, v, agg: reducer(agg, v),
            self.value_serde,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Fold values with ``aggregator(key, value, aggregate)`` from ``initializer()``."""
        ensure_callable(initializer, "initializer")
        ensure_callable(aggregator, "aggregator")
        return self._aggregate(materialized, named, initializer, aggregator, None)

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]) -> CogroupedKStream:
        """Start a cogroup (KIP-150): this stream's records folded in by
        ``aggregator(key, value, aggregate)``, other grouped streams added with
        ``.cogroup(grouped, aggregator)``, one table from ``.aggregate(initializer)``
        (``dsl/cogroup.py``)."""
        from streamtide.dsl.cogroup import CogroupedKStream

        return CogroupedKStream(self, aggregator)

    def windowed_by(self, windows: Any) -> Any:
        """Aggregate per window: ``TimeWindows`` give a ``TimeWindowedKStream``,
        ``SessionWindows`` a ``SessionWindowedKStream``, ``SlidingWindows`` a
        ``SlidingWindowedKStream``."""
        from streamtide.dsl.windowed import windowed_stream

        return windowed_stream(self, windows)


def aggregate_into_table(
    grouped: Any,
    materialized: Materialized | None,
    node_name: str | None,
    initializer: Any,
    adder: Callable[[Any, Any, Any], Any],
    default_value_serde: Serde | None,
    *,
    store_prefix: str = "KSTREAM-AGGREGATE-STATE-STORE-",
    node_prefix: str = "KSTREAM-AGGREGATE-",
    named_tags: str | None = None,
) -> KTable:
    """The key-value aggregation of ``grouped`` (a ``KGroupedStream``, or a cogroup's
    inputs: ``dsl.cogroup``) into a timestamped store."""
    materialized = materialized or Materialized()
    builder = grouped.builder
    store_name = materialized.store_name or builder.new_name(store_prefix)
    parents = grouped.parent_nodes(store_name, named_tags)
    node = node_name or builder.new_name(node_prefix)
    key_serde = materialized.key_serde or grouped.key_serde
    value_serde = materialized.value_serde or default_value_serde
    store = KeyValueStoreBuilder(
        KeyValueBytesStoreSupplier(store_name, materialized.resolved_store_type()),
        key_serde,
        value_serde,
        logging_enabled=materialized.logging_enabled,
        timestamped=True,
    )
    topology = builder.topology
    caching = materialized.caching_enabled
    origin = AggregationOrigin(store_name)
    topology.add_processor(
        node,
        lambda: StreamAggregateOperator(store_name, initializer, adder, caching, origin),
        *parents,
    )
    topology.add_state_store(store, node)
    return KTable(builder, node, store_name, key_serde, value_serde, origin=origin)
