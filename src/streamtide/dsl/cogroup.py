"""``KGroupedStream.cogroup`` and ``CogroupedKStream.aggregate`` (Kafka Streams' KIP-150):
one aggregate per key (or per key and window) fed by several grouped streams, each with its
own aggregator, in one store.

On the operator path: each grouped stream (repartitioned first through ``<Grouped name or
store>-repartition`` when its key was changed) gets a tagging node ``<name>-cogroup-agg-<i>``
that marks each value with the index of its stream, and every tag node feeds the one
aggregation node ``<name>-cogroup-merge``: the aggregation a single grouped stream would get
(``dsl.aggregate_operator``, or the time, session or sliding window operators after
``windowed_by``; one store, one record cache, read once and write once per batch), whose
aggregator hands each value to its own stream's aggregator. Rows of different source topics
never share a batch, and where two cogrouped streams come from one source the task's cut
analysis hands rows on one at a time (converging paths), so the aggregate sees the records in
the order record-at-a-time processing does. Records with a None key or value are dropped
(``dropped-records``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from streamtide.dsl.params import Materialized, Named, ensure_callable, named_of
from streamtide.errors import TopologyError
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator

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


def cogrouped_aggregator(aggregators: list[Aggregator]) -> Aggregator:
    """The aggregator of the cogroup's aggregation: each tagged value to its own stream's."""

    def add(key: Any, tagged: tuple[int, Any], aggregate: Any) -> Any:
        return aggregators[tagged[0]](key, tagged[1], aggregate)

    return add


class CogroupInputs:
    """The grouped streams of a cogroup, standing in for one ``KGroupedStream`` where an
    aggregation is built (``parent_nodes`` adds the tag nodes it reads)."""

    value_serde: Any = None
    name: str | None = None

    def __init__(self, groups: list[tuple[KGroupedStream, Aggregator]]) -> None:
        self.groups = groups
        self.builder = groups[0][0].builder
        self.key_serde = groups[0][0].key_serde
        self.aggregator = cogrouped_aggregator([aggregator for _, aggregator in groups])
        self.merge_name: str | None = None

    def parent_nodes(self, store_name: str, named: str | None = None) -> list[str]:
        builder = self.builder
        topology = builder.topology
        sources = [grouped.source_for(store_name) for grouped, _ in self.groups]
        tags = []
        for index, source in enumerate(sources):
            tag = (
                f"{named}-cogroup-agg-{index}"
                if named
                else builder.new_name("COGROUPKSTREAM-AGGREGATE-")
            )
            topology.add_processor(tag, partial(CogroupTagOperator, index), source.node)
            tags.append(tag)
        topology.add_copartition_group(
            {t for source in sources for t in topology.upstream_source_topics(source.node)},
            f"cogroup into store {store_name!r}",
        )
        return tags


class CogroupedKStream:
    """Grouped streams to aggregate together: ``cogroup(grouped, aggregator)`` adds one,
    ``aggregate(initializer, ...)`` builds the table, ``windowed_by(windows)`` aggregates
    per window."""

    def __init__(self, grouped: KGroupedStream, aggregator: Aggregator) -> None:
        self.builder = grouped.builder
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

    def _inputs(self) -> CogroupInputs:
        return CogroupInputs(list(self._groups.values()))

    def aggregate(
        self,
        initializer: Callable[[], Any],
        named: Named | str | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """One aggregate per key from ``initializer()``, each record folded in by its own
        stream's aggregator; ``named`` names the nodes, ``materialized`` the store (its value
        serde serializes the aggregate)."""
        from streamtide.dsl.kgrouped import aggregate_into_table

        ensure_callable(initializer, "initializer")
        if isinstance(named, Materialized):
            named, materialized = None, named
        inputs = self._inputs()
        base = named_of(named)
        return aggregate_into_table(
            inputs,
            materialized,
            f"{base}-cogroup-merge" if base else None,
            initializer,
            inputs.aggregator,
            None,
            store_prefix="COGROUPKSTREAM-AGGREGATE-STATE-STORE-",
            node_prefix="COGROUPKSTREAM-MERGE-",
            named_tags=base,
        )

    def windowed_by(self, windows: Any) -> WindowedCogroupedKStream:
        """Aggregate per time, session or sliding window (Kafka's
        ``TimeWindowedCogroupedKStream`` and its kin)."""
        from streamtide.dsl.windowed import windowed_stream

        inputs = self._inputs()
        return WindowedCogroupedKStream(windowed_stream(inputs, windows), inputs)  # type: ignore[arg-type]


class WindowedCogroupedKStream:
    """A cogroup cut into windows: ``aggregate(initializer[, session_merger], ...)``."""

    def __init__(self, windowed: Any, inputs: CogroupInputs) -> None:
        self._windowed = windowed
        self._inputs = inputs

    def emit_strategy(self, strategy: Any) -> WindowedCogroupedKStream:
        """See ``TimeWindowedKStream.emit_strategy``."""
        return WindowedCogroupedKStream(self._windowed.emit_strategy(strategy), self._inputs)

    def aggregate(self, initializer: Callable[[], Any], *args: Any, **kwargs: Any) -> KTable:
        """``aggregate(initializer, materialized=None, named=None)``; session windows take
        ``aggregate(initializer, session_merger, materialized=None, named=None)``."""
        ensure_callable(initializer, "initializer")
        return self._windowed.aggregate(initializer, self._inputs.aggregator, *args, **kwargs)
