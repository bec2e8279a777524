"""Stream-table joins: ``KStream.join(table, joiner)`` and ``KStream.left_join(table, ...)``.

Each stream record looks its key up in the table as the table stands when the record is
processed (records of both topics are processed in timestamp order within a task) and, if
it joins, ``joiner(stream_value, table_value)`` is forwarded with the stream record's key and
timestamp. Table updates only change the table: they never produce output. As in Kafka's
KStreamKTableJoin (with KIP-962): a record with a None value is dropped (``dropped-records``);
one with a None key is dropped by the inner join and joined with None by the left join; the
left join also joins records whose key the table does not have with None.

Both topics must be co-partitioned (same partition count; the engine checks it when it plans
the topology); a stream whose key was changed upstream is repartitioned first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.params import Joined, ensure_callable
from streamtide.dsl.table_view import TableView, check_lookups
from streamtide.errors import TopologyError
from streamtide.processor import drops
from streamtide.processor.api import Processor, ProcessorContext
from streamtide.record import Record

if TYPE_CHECKING:
    from streamtide.dsl.kstream import KStream
    from streamtide.dsl.ktable import KTable

log = logging.getLogger(__name__)


class StreamTableJoinProcessor(Processor):
    """Joins each stream record with the table's current value of its key."""

    def __init__(self, view: TableView, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        self.view = view
        self.joiner = joiner
        self.left = left

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.lookup = self.view.make(context)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if value is None or (key is None and not self.left):
            log.debug("skipping a stream record with a None key or value before a join")
            drops.record_drop(self.context.metrics, drops.NULL_KEY_OR_VALUE)
            return
        stored = None if key is None else self.lookup(key)
        table_value = None if stored is None else stored.value
        if table_value is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(value, table_value)))


def stream_table_join(
    stream: KStream,
    table: KTable,
    joiner: Callable[[Any, Any], Any],
    joined: Joined | None = None,
    *,
    left: bool,
) -> KStream:
    """See ``KStream.join`` / ``KStream.left_join`` with a ``KTable``."""
    from streamtide.dsl.kstream import KStream

    ensure_callable(joiner, "joiner")
    if table.builder is not stream.builder:
        raise TopologyError("a stream can only be joined with a table of the same StreamsBuilder")
    if joined is not None and not isinstance(joined, Joined):
        raise TypeError(f"joined must be a Joined, got {joined!r}")
    joined = joined or Joined()
    builder = stream.builder
    prefix = "KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-"
    name = joined.name or builder.new_name(prefix)
    stream = stream.repartitioned_if_required(
        name,
        joined.key_serde or stream.key_serde,
        joined.value_serde or stream.value_serde,
    )
    view = table.origin.view()
    check_lookups(builder, view, "a stream-table join")
    topology = builder.topology
    topology.add_processor(name, lambda: StreamTableJoinProcessor(view, joiner, left), stream.node)
    topology.connect_processor_and_state_stores(name, *view.store_names)
    topology.add_copartition_group(
        {
            *topology.upstream_source_topics(stream.node),
            *topology.upstream_source_topics(table.node),
        },
        f"stream-table join {name!r}",
    )
    return KStream(builder, name, stream.key_serde, None)
