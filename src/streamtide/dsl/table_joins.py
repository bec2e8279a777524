"""Stream-table joins: ``KStream.join(table, joiner)`` and ``KStream.left_join(table, ...)``.

Each stream record looks its key up in the table as the table stands when the record is
processed (records of both topics are processed in timestamp order within a task), or, for a
versioned table (``dsl.versioned_table``), as the table stood at the stream record's
timestamp (Kafka's KIP-960: late table updates still count for earlier stream records), and, if
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

from streamtide.dsl.join_lookup import present, view_lookup
from streamtide.dsl.params import Joined, ensure_callable
from streamtide.dsl.table_view import TableView, check_lookups
from streamtide.errors import TopologyError
from streamtide.processor import drops
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch
from streamtide.processor.operator import ColumnOperator, call_rows

if TYPE_CHECKING:
    from streamtide.dsl.kstream import KStream
    from streamtide.dsl.ktable import KTable

log = logging.getLogger(__name__)


class StreamTableJoinOperator(ColumnOperator):
    """Joins each stream row with the table's current value of its key.

    The table is read once per distinct key of a batch where it is a store, and looked up
    row by row where its values are computed (a filter or ``map_values`` that is not
    materialized calls its function on every lookup, as in Kafka); see
    ``dsl.join_lookup``."""

    def __init__(self, view: TableView, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        self.view = view
        self.joiner = joiner
        self.left = left

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.stored, self.lookup = view_lookup(context, self.view)
        make_as_of = self.view.make_as_of
        self.as_of = None if make_as_of is None else make_as_of(context)

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values = batch.keys, batch.values
        left = self.left
        if left:
            positions = [p for p, value in enumerate(values) if value is not None]
        else:
            positions = [
                p
                for p, (key, value) in enumerate(zip(keys, values))
                if key is not None and value is not None
            ]
        nulls = len(keys) - len(positions)
        if nulls:
            log.debug("skipping %d stream records with a None key or value before a join", nulls)
            drops.record_drops(self.context.metrics, drops.NULL_KEY_OR_VALUE, nulls)
        rows = batch.take(positions)
        stored = self.stored
        if self.as_of is not None:
            found, tables = self._as_of(rows)
        elif stored is not None:
            found, raws = stored.read_rows(self, rows, rows.keys)
            if not left:
                found, raws = present(found, raws)
            found, tables = stored.values(self, rows, found, raws)
        else:
            found, tables = self._computed(rows)
        if not left:
            found, tables = present(found, tables)
        joined = rows.take(found)
        ok, results = call_rows(self, joined, self.joiner, joined.values, tables)
        out = joined if ok is None else joined.take(ok)
        self.emit(out.with_values(results))

    def _as_of(self, rows: ColumnBatch) -> tuple[list[int], list[Any]]:
        """Each row's versioned table value as of the row's timestamp (KIP-960)."""
        as_of = self.as_of

        def table_value(key: Any, timestamp: int) -> Any:
            stored = None if key is None else as_of(key, timestamp)  # type: ignore[misc]
            return None if stored is None else stored.value

        ok, tables = call_rows(self, rows, table_value, rows.keys, rows.timestamps)
        return (list(range(len(rows))) if ok is None else ok), tables

    def _computed(self, rows: ColumnBatch) -> tuple[list[int], list[Any]]:
        """Each row's table value, looked up row by row (a computed table)."""
        lookup = self.lookup
        assert lookup is not None  # a computed table is looked up row by row

        def table_value(key: Any) -> Any:
            stored = None if key is None else lookup(key)
            return None if stored is None else stored.value

        ok, tables = call_rows(self, rows, table_value, rows.keys)
        return (list(range(len(rows))) if ok is None else ok), tables


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
    topology.add_processor(name, lambda: StreamTableJoinOperator(view, joiner, left), stream.node)
    topology.connect_processor_and_state_stores(name, *view.store_names)
    topology.add_copartition_group(
        {
            *topology.upstream_source_topics(stream.node),
            *topology.upstream_source_topics(table.node),
        },
        f"stream-table join {name!r}",
    )
    return KStream(builder, name, stream.key_serde, None)
