"""``KTable.group_by`` and ``KGroupedTable``: re-grouping a table and aggregating the groups.

``selector(key, value)`` returns ``(new_key, new_value)`` or None (drop). Each table update
``Change(new, old)`` is sent through an internal repartition topic (``<name>-repartition``,
both values on the record, ``ChangeSerde``) to the group of its new key: when the group key
is the same for old and new it travels as one change, so the aggregate is updated once,
with no transient subtract-then-add output; otherwise the old value goes to its old group as
``Change(None, old)`` and the new one to its new group as ``Change(new, None)``. The
aggregation subtracts old values and adds new ones (Kafka's KTableAggregate / KTableReduce);
a result's timestamp is the larger of the record's and the previous result's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.change import Change, ChangeSerde
from streamtide.dsl.params import Grouped, Materialized, Named, ensure_callable, named_of
from streamtide.dsl.processors import NO_INITIALIZER
from streamtide.dsl.table_state import KeptTable, TableOperator
from streamtide.dsl.table_view import MaterializedOrigin, table_store
from streamtide.errors import StreamsProcessingError, TopologyError
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator
from streamtide.serde import Serde, Serdes

if TYPE_CHECKING:
    from streamtide.dsl.kstream import KStream
    from streamtide.dsl.ktable import KTable


class RegroupOperator(ColumnOperator):
    """Maps a table update to the update(s) of its group(s) (Kafka's KTableRepartitionMap):
    one row when the group key stays, else the old group's row before the new group's."""

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any] | None]) -> None:
        self.selector = selector

    def _select(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        pair = self.selector(key, value)
        if pair is None:
            return None
        try:
            group_key, group_value = pair
        except (TypeError, ValueError):
            raise TypeError(
                f"the group_by selector must return a (key, value) pair or None, got {pair!r}"
            ) from None
        if group_key is None or group_value is None:
            return None
        return group_key, group_value

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values = batch.keys, batch.values
        select = self._select
        positions: list[int] = []
        group_keys: list[Any] = []
        changes: list[Change] = []
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    change = values[p]
                    if change.__class__ is not Change:
                        change = Change(change, None)
                    new = select(keys[p], change.new)
                    old = select(keys[p], change.old)
                    if new is not None and old is not None and new[0] == old[0]:
                        positions.append(p)
                        group_keys.append(new[0])
                        changes.append(Change(new[1], old[1]))
                        continue
                    if old is not None:
                        positions.append(p)
                        group_keys.append(old[0])
                        changes.append(Change(None, old[1]))
                    if new is not None:
                        positions.append(p)
                        group_keys.append(new[0])
                        changes.append(Change(new[1], None))
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        # the group's records carry no headers (a new record, as in Kafka)
        self.emit(batch.derive(positions, group_keys, changes, headers=[()] * len(positions)))


class TableAggregateOperator(TableOperator):
    """Subtracts each change's old value from its group's aggregate and adds the new one.

    ``initializer`` is ``NO_INITIALIZER`` for ``reduce`` (the first value is the aggregate).
    Each group's aggregate is read once per batch and written back once (``KeptTable``);
    every row gets a fresh copy of the previous aggregate, as a store read would give it.
    """

    def __init__(
        self,
        origin: MaterializedOrigin,
        initializer: Any,
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> None:
        super().__init__(origin)
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        table: KeptTable = self.table  # type: ignore[assignment]
        initializer, adder, subtractor = self.initializer, self.adder, self.subtractor
        send_old_values = self.send_old_values
        out = EmittedRows()
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key = keys[p]
                    if key is None:
                        raise StreamsProcessingError(
                            f"a record for table aggregation store {self.store_name!r} has a "
                            "None key"
                        )
                    change = values[p]
                    if change.__class__ is not Change:
                        change = Change(change, None)
                    ident, entry = table.entry(key)
                    present = entry[1] is not None
                    old = table.value(entry)
                    timestamp = timestamps[p]
                    aggregate = old
                    if change.old is not None and old is not None:
                        aggregate = subtractor(key, change.old, old)
                        if entry[3] > timestamp:
                            timestamp = entry[3]
                    if change.new is not None:
                        if aggregate is None:
                            if initializer is NO_INITIALIZER:
                                aggregate = change.new
                            else:
                                aggregate = adder(key, change.new, initializer())
                        else:
                            aggregate = adder(key, change.new, aggregate)
                        if present and entry[3] > timestamp:
                            timestamp = entry[3]
                    table.put(ident, entry, aggregate, timestamp)
                    out.add(p, key, Change(aggregate, old if send_old_values else None), timestamp)
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        table.write_back()
        self.emit(out.batch(batch))


class KGroupedTable:
    """A re-grouped table; ``count``, ``reduce`` or ``aggregate`` make a table of groups."""

    def __init__(
        self,
        selected: KStream,
        key_serde: Serde | None,
        value_serde: Serde | None,
        name: str | None,
    ) -> None:
        self.selected = selected
        self.builder = selected.builder
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name

    def _aggregate(
        self,
        initializer: Any,
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        materialized: Materialized | None,
        named: Named | str | None,
        default_value_serde: Serde | None,
    ) -> KTable:
        from streamtide.dsl.ktable import KTable

        materialized = materialized or Materialized()
        store = table_store(
            self.builder,
            materialized,
            "KTABLE-AGGREGATE-STATE-STORE-",
            self.key_serde,
            default_value_serde,
        )
        source = self.selected.through_repartition_topic(
            self.name or store.name,
            self.key_serde,
            ChangeSerde(self.value_serde),
            drop_null_keys=False,
        )
        node = named_of(named) or self.builder.new_name("KTABLE-AGGREGATE-")
        origin = MaterializedOrigin(store.name)
        topology = self.builder.topology
        topology.add_processor(
            node,
            lambda: TableAggregateOperator(origin, initializer, adder, subtractor),
            source.node,
        )
        topology.add_state_store(store, node)
        return KTable(
            self.builder, node, store.name, store.key_serde, store.value_serde, origin=origin
        )

    def count(
        self, materialized: Materialized | None = None, named: Named | str | None = None
    ) -> KTable:
        """Number of the table's keys in each group (``Serdes.long()`` by default)."""
        return self._aggregate(
            lambda: 0,
            lambda _k, _v, n: n + 1,
            lambda _k, _v, n: n - 1,
            materialized,
            named,
            Serdes.long(),
        )

    def reduce(
        self,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Combine each group's values: ``adder(aggregate, value)`` for a new value,
        ``subtractor(aggregate, value)`` for an old one."""
        ensure_callable(adder, "reduce adder")
        ensure_callable(subtractor, "reduce subtractor")
        return self._aggregate(
            NO_INITIALIZER,
            lambda _k, v, agg: adder(agg, v),
            lambda _k, v, agg: subtractor(agg, v),
            materialized,
            named,
            self.value_serde,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Fold each group from ``initializer()``: ``adder(key, value, aggregate)`` for a
        new value, ``subtractor(key, value, aggregate)`` for an old one."""
        ensure_callable(initializer, "initializer")
        ensure_callable(adder, "aggregate adder")
        ensure_callable(subtractor, "aggregate subtractor")
        return self._aggregate(initializer, adder, subtractor, materialized, named, None)


def group_table(
    table: KTable,
    selector: Callable[[Any, Any], tuple[Any, Any] | None],
    grouped: Grouped | None,
) -> KGroupedTable:
    """See ``KTable.group_by``."""
    from streamtide.dsl.kstream import KStream

    ensure_callable(selector, "group_by selector")
    grouped = grouped or Grouped()
    if not table.origin.enable_sending_old_values(True):
        raise TopologyError(
            f"group_by needs a table whose updates carry old values; table {table.node!r} is "
            f"the result of a stream aggregation, which does not send them"
        )
    builder = table.builder
    node = builder.new_name("KTABLE-SELECT-")
    builder.topology.add_processor(node, lambda: RegroupOperator(selector), table.node)
    # The group values are usually the table's values: their serde is the default for them.
    value_serde = grouped.value_serde or table.value_serde
    selected = KStream(builder, node, grouped.key_serde, value_serde, True)
    return KGroupedTable(selected, grouped.key_serde, value_serde, grouped.name)
