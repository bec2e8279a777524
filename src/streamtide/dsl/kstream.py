"""``KStream``: a record stream and its stateless operators."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamtide.dsl import processors as p
from streamtide.dsl.params import (
    Grouped,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    ensure_callable,
    named_of,
)
from streamtide.dsl.printed import Printed, PrintOperator
from streamtide.errors import TopologyError
from streamtide.processor.api import NodeSupplier, ProcessorSupplier
from streamtide.processor.nodes import Partitioner
from streamtide.processor.topic_name import TopicChooser
from streamtide.serde import Serde

if TYPE_CHECKING:
    from streamtide.dsl.branched import BranchedKStream
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.kgrouped import KGroupedStream
    from streamtide.dsl.ktable import KTable


class KStream:
    """An unbounded stream of key-value records.

    ``repartition_required`` is set by key-changing operations (``map``, ``flat_map``,
    ``select_key``, ``process``): the next key-based stateful operation first sends the
    records through an internal ``<application_id>-<name>-repartition`` topic, so that equal
    keys meet in one task.
    """

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        key_serde: Serde | None,
        value_serde: Serde | None,
        repartition_required: bool = False,
    ) -> None:
        self.builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required

    # ---- plumbing ------------------------------------------------------------------------

    def _add(
        self,
        prefix: str,
        supplier: NodeSupplier,
        named: Named | str | None,
        *,
        key_changed: bool = False,
        keep_value_serde: bool = True,
    ) -> KStream:
        name = named_of(named) or self.builder.new_name(prefix)
        self.builder.topology.add_processor(name, supplier, self.node)
        return KStream(
            self.builder,
            name,
            None if key_changed else self.key_serde,
            self.value_serde if keep_value_serde else None,
            self.repartition_required or key_changed,
        )

    # ---- stateless operators -------------------------------------------------------------

    def filter(
        self, predicate: Callable[[Any, Any], bool], named: Named | str | None = None
    ) -> KStream:
        """Keep records for which ``predicate(key, value)`` is true."""
        ensure_callable(predicate, "filter predicate")
        return self._add("KSTREAM-FILTER-", lambda: p.FilterOperator(predicate, True), named)

    def filter_not(
        self, predicate: Callable[[Any, Any], bool], named: Named | str | None = None
    ) -> KStream:
        """Drop records for which ``predicate(key, value)`` is true."""
        ensure_callable(predicate, "filter_not predicate")
        return self._add("KSTREAM-FILTER-", lambda: p.FilterOperator(predicate, False), named)

    def map(
        self, mapper: Callable[[Any, Any], tuple[Any, Any]], named: Named | str | None = None
    ) -> KStream:
        """Replace each record by ``mapper(key, value) -> (new_key, new_value)``."""
        ensure_callable(mapper, "map mapper")
        return self._add(
            "KSTREAM-MAP-",
            lambda: p.MapOperator(mapper),
            named,
            key_changed=True,
            keep_value_serde=False,
        )

    def map_values(self, mapper: Callable[[Any], Any], named: Named | str | None = None) -> KStream:
        """Replace each value by ``mapper(value)``; keys (and partitioning) stay."""
        ensure_callable(mapper, "map_values mapper")
        return self._add(
            "KSTREAM-MAPVALUES-",
            lambda: p.MapValuesOperator(mapper),
            named,
            keep_value_serde=False,
        )

    def flat_map(
        self,
        mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
        named: Named | str | None = None,
    ) -> KStream:
        """Replace each record by zero or more ``(key, value)`` pairs."""
        ensure_callable(mapper, "flat_map mapper")
        return self._add(
            "KSTREAM-FLATMAP-",
            lambda: p.FlatMapOperator(mapper),
            named,
            key_changed=True,
            keep_value_serde=False,
        )

    def flat_map_values(
        self, mapper: Callable[[Any], Iterable[Any]], named: Named | str | None = None
    ) -> KStream:
        """Replace each value by zero or more values; keys stay."""
        ensure_callable(mapper, "flat_map_values mapper")
        return self._add(
            "KSTREAM-FLATMAPVALUES-",
            lambda: p.FlatMapValuesOperator(mapper),
            named,
            keep_value_serde=False,
        )

    def select_key(
        self, mapper: Callable[[Any, Any], Any], named: Named | str | None = None
    ) -> KStream:
        """Set each record's key to ``mapper(key, value)``."""
        ensure_callable(mapper, "select_key mapper")
        return self._add(
            "KSTREAM-KEY-SELECT-", lambda: p.SelectKeyOperator(mapper), named, key_changed=True
        )

    def peek(self, action: Callable[[Any, Any], None], named: Named | str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record and pass it on unchanged."""
        ensure_callable(action, "peek action")
        return self._add("KSTREAM-PEEK-", lambda: p.PeekOperator(action, True), named)

    def foreach(self, action: Callable[[Any, Any], None], named: Named | str | None = None) -> None:
        """Call ``action(key, value)`` for each record (a terminal operation)."""
        ensure_callable(action, "foreach action")
        self._add("KSTREAM-FOREACH-", lambda: p.PeekOperator(action, False), named)

    def print(self, printed: Printed) -> None:
        """Write each record as ``[label]: key, value`` (a terminal operation). On the engine it
        runs on the executors: stdout is the executor worker's, a file is on its filesystem."""
        if not isinstance(printed, Printed):
            raise TypeError(f"print needs a Printed, got {printed!r}")
        name = printed.name or self.builder.new_name("KSTREAM-PRINTER-")
        label = printed.label if printed.label is not None else name
        self._add("KSTREAM-PRINTER-", lambda: PrintOperator(printed, label), name)

    def split(self, named: Named | str | None = None) -> BranchedKStream:
        """Route records to branches by predicates: ``.branch(...)...default_branch()``."""
        from streamtide.dsl.branched import BranchedKStream

        return BranchedKStream(self, named_of(named) or "")

    def merge(self, other: KStream, named: Named | str | None = None) -> KStream:
        """One stream with the records of both."""
        if not isinstance(other, KStream) or other.builder is not self.builder:
            raise TopologyError("merge() needs a KStream of the same StreamsBuilder")
        name = named_of(named) or self.builder.new_name("KSTREAM-MERGE-")
        self.builder.topology.add_processor(name, p.PassThroughOperator, self.node, other.node)
        same_keys = self.key_serde is other.key_serde
        same_values = self.value_serde is other.value_serde
        return KStream(
            self.builder,
            name,
            self.key_serde if same_keys else None,
            self.value_serde if same_values else None,
            self.repartition_required or other.repartition_required,
        )

    def to(self, topic: str | TopicChooser, produced: Produced | None = None) -> None:
        """Write every record to ``topic``, or, given a ``TopicNameExtractor`` (or a function
        ``(key, value, record_context) -> topic``), to the topic it names for each record
        (``processor/topic_name.py``; the topic must exist)."""
        produced = produced or Produced()
        if isinstance(topic, str) and not topic:
            raise TopologyError(f"to() needs a topic name, got {topic!r}")
        if not isinstance(topic, str) and not callable(topic) and not hasattr(topic, "extract"):
            raise TopologyError(f"to() needs a topic name or a TopicNameExtractor, got {topic!r}")
        name = produced.name or self.builder.new_name("KSTREAM-SINK-")
        self.builder.topology.add_sink(
            name,
            topic,
            self.node,
            key_serde=produced.key_serde or self.key_serde,
            value_serde=produced.value_serde or self.value_serde,
            partitioner=produced.partitioner,
        )

    def process(
        self,
        supplier: ProcessorSupplier,
        *store_names: str,
        named: Named | str | None = None,
    ) -> KStream:
        """Attach a Processor API processor (a class or factory) with access to stores."""
        ensure_callable(supplier, "process() supplier")
        name = named_of(named) or self.builder.new_name("KSTREAM-PROCESSOR-")
        topology = self.builder.topology
        topology.add_processor(name, supplier, self.node)
        if store_names:
            topology.connect_processor_and_state_stores(name, *store_names)
        return KStream(self.builder, name, None, None, True)

    def process_values(
        self,
        supplier: ProcessorSupplier,
        *store_names: str,
        named: Named | str | None = None,
    ) -> KStream:
        """Attach a Processor API processor that may change values but not keys (Kafka's
        ``processValues``, KIP-820): no repartition follows. Forwarding a record with a key
        other than the input record's raises ``KeyChangedError`` (``dsl/process_values.py``)."""
        from streamtide.dsl.process_values import fixed_key_supplier

        ensure_callable(supplier, "process_values() supplier")
        name = named_of(named) or self.builder.new_name("KSTREAM-PROCESSVALUES-")
        topology = self.builder.topology
        topology.add_processor(name, fixed_key_supplier(supplier, name), self.node)
        if store_names:
            topology.connect_processor_and_state_stores(name, *store_names)
        return KStream(self.builder, name, self.key_serde, None, self.repartition_required)

    def to_table(
        self, named: Named | str | None = None, materialized: Materialized | None = None
    ) -> KTable:
        """This stream read as a table: each record an update of its key, a None value a
        delete, a None key dropped (Kafka's ``toTable``, KIP-523). Repartitions first when
        a key-changing operation came before; see ``dsl/table_source.py``."""
        from streamtide.dsl.table_source import stream_to_table

        if isinstance(named, Materialized):
            named, materialized = None, named
        return stream_to_table(self, named_of(named), materialized)

    # ---- repartitioning ------------------------------------------------------------------

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream:
        """Send records through an internal topic, partitioned by their current key."""
        repartitioned = repartitioned or Repartitioned()
        base = repartitioned.name or self.builder.new_name("KSTREAM-REPARTITION-")
        return self.through_repartition_topic(
            base,
            repartitioned.key_serde or self.key_serde,
            repartitioned.value_serde or self.value_serde,
            drop_null_keys=False,
            partitions=repartitioned.num_partitions,
            partitioner=repartitioned.partitioner,
        )

    def through_repartition_topic(
        self,
        base_name: str,
        key_serde: Serde | None,
        value_serde: Serde | None,
        *,
        drop_null_keys: bool = True,
        partitions: int | None = None,
        partitioner: Partitioner | None = None,
    ) -> KStream:
        """Sink into ``<base_name>-repartition`` and read it back in a new sub-topology
        (``partitions``: the topic's partition count, else the engine's choice;
        ``partitioner``: where each record goes, else by its serialized key)."""
        builder = self.builder
        topology = builder.topology
        topic = f"{base_name}-repartition"
        if topic in topology.internal_topics:
            raise TopologyError(
                f"repartition topic {topic!r} already exists; give this operation another name"
            )
        topology.add_internal_topic(topic, partitions)
        upstream = self.node
        if drop_null_keys:
            filter_name = f"{base_name}-repartition-filter"
            topology.add_processor(filter_name, p.DropNullKeyOperator, upstream)
            upstream = filter_name
        sink = f"{base_name}-repartition-sink"
        source = f"{base_name}-repartition-source"
        topology.add_sink(
            sink,
            topic,
            upstream,
            key_serde=key_serde,
            value_serde=value_serde,
            partitioner=partitioner,
        )
        topology.add_source(source, topic, key_serde=key_serde, value_serde=value_serde)
        return KStream(builder, source, key_serde, value_serde, False)

    def repartitioned_if_required(
        self, base_name: str, key_serde: Serde | None, value_serde: Serde | None
    ) -> KStream:
        """This stream, or its repartitioned copy when a key-changing operation came before."""
        if not self.repartition_required:
            return self
        return self.through_repartition_topic(base_name, key_serde, value_serde)

    # ---- grouping ------------------------------------------------------------------------

    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream:
        """Group by the current key (repartitions first if the key was changed)."""
        from streamtide.dsl.kgrouped import KGroupedStream

        grouped = grouped or Grouped()
        return KGroupedStream(
            self,
            grouped.key_serde or self.key_serde,
            grouped.value_serde or self.value_serde,
            grouped.name,
            self.repartition_required,
        )

    def group_by(
        self, selector: Callable[[Any, Any], Any], grouped: Grouped | None = None
    ) -> KGroupedStream:
        """Group by ``selector(key, value)``; always repartitions."""
        ensure_callable(selector, "group_by selector")
        from streamtide.dsl.kgrouped import KGroupedStream

        grouped = grouped or Grouped()
        keyed = self.select_key(selector)
        return KGroupedStream(
            keyed,
            grouped.key_serde,
            grouped.value_serde or self.value_serde,
            grouped.name,
            True,
        )

    # ---- deduplication (KIP-655; see dsl/deduplicate.py) ---------------------------------

    def deduplicate_by_key(self, interval: Any, deduplicated: Any = None) -> KStream:
        """Drop a record if one with the same key was forwarded within ``interval``."""
        from streamtide.dsl.deduplicate import deduplicate_by_key

        return deduplicate_by_key(self, interval, deduplicated)

    def deduplicate_by_key_value(
        self, id_selector: Callable[[Any, Any], Any], interval: Any, deduplicated: Any = None
    ) -> KStream:
        """Drop a record if one with the same key and ``id_selector(key, value)`` was
        forwarded within ``interval``."""
        from streamtide.dsl.deduplicate import deduplicate_by_key_value

        return deduplicate_by_key_value(self, id_selector, interval, deduplicated)

    def deduplicate(
        self, id_selector: Callable[[Any, Any], Any], interval: Any, deduplicated: Any = None
    ) -> KStream:
        """Drop a record if one with the same ``id_selector(key, value)`` was forwarded
        within ``interval`` in any partition (repartitions by the id first)."""
        from streamtide.dsl.deduplicate import deduplicate

        return deduplicate(self, id_selector, interval, deduplicated)

    # ---- joins (dispatched on the type of what is joined) --------------------------------

    def join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """Inner join with
        - a ``KTable``: ``join(table, joiner, joined=None)``, ``joiner(value, table_value)``
          (``dsl/table_joins.py``);
        - a ``GlobalKTable``: ``join(global_table, key_selector, joiner)``
          (``dsl/global_table.py``);
        - another ``KStream`` within ``windows``:
          ``join(other, joiner, windows, stream_joined=None)`` (``dsl/stream_joins.py``)."""
        return self._join("join", other, args, kwargs)

    def left_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """Left join: like ``join``; a record without partner is joined with None (for a
        stream-stream join once its window closes; with a table at once, also for a None
        key)."""
        return self._join("left_join", other, args, kwargs)

    def _join(self, kind: str, other: Any, args: tuple, kwargs: dict[str, Any]) -> KStream:
        from streamtide.dsl.global_table import GlobalKTable, join_global_table
        from streamtide.dsl.ktable import KTable

        left = kind == "left_join"
        if isinstance(other, KTable):
            from streamtide.dsl.table_joins import stream_table_join

            return stream_table_join(self, other, *args, **kwargs, left=left)
        if isinstance(other, GlobalKTable):
            return join_global_table(self, other, *args, **kwargs, left=left)
        if isinstance(other, KStream):
            from streamtide.dsl.stream_joins import join_streams

            return join_streams(kind, self, other, *args, **kwargs)
        raise TypeError(f"a KStream cannot be joined with {type(other).__name__} {other!r}")

    def outer_join(
        self,
        other: KStream,
        joiner: Callable[[Any, Any], Any],
        windows: Any,
        stream_joined: Any = None,
    ) -> KStream:
        """Outer join with another stream within ``windows``: records of either side without
        partner are emitted (``joiner(value, None)`` / ``joiner(None, value)``) once their
        window closes."""
        from streamtide.dsl.stream_joins import join_streams

        return join_streams("outer_join", self, other, joiner, windows, stream_joined)
