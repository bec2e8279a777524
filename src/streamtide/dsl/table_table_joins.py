"""Table-table joins: ``KTable.join``, ``left_join`` and ``outer_join`` (Kafka's
KTableKTableInnerJoin / LeftJoin / RightJoin / OuterJoin and their merger).

An update of either side looks the key up in the other side and emits the joined value for
the key: ``joiner(left_value, right_value)``, with None for a side that lacks the key where
the join kind allows it (left: the right side; outer: either). When a key stops joining, a
tombstone is emitted. An update that joins with nothing emits nothing, except that a
tombstone is still forwarded where the other side has the key (as in Kafka). The result's
timestamp is the larger of the update's and the other side's value's (tombstones too).

The two sides must be co-partitioned; the join connects both sides' stores to both join
processors, so they run in one task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.change import Change, as_change
from streamtide.dsl.params import Materialized, Named, ensure_callable, named_of
from streamtide.dsl.table_view import (
    Getter,
    TableOrigin,
    TableProcessor,
    TableView,
    check_lookups,
    store_view,
    table_store,
)
from streamtide.errors import TopologyError
from streamtide.processor.api import Processor, ProcessorContext
from streamtide.record import Record
from streamtide.state.timestamped import ValueAndTimestamp

if TYPE_CHECKING:
    from streamtide.dsl.ktable import KTable

#: join kind -> (may this side's value be missing?, may the other side's?) for the left side
_MISSING_ALLOWED = {"inner": (False, False), "left": (False, True), "outer": (True, True)}


class JoinOrigin(TableOrigin):
    """A joined table: looked up by joining both sides' lookups, unless materialized."""

    def __init__(
        self,
        left: KTable,
        right: KTable,
        joiner: Callable[[Any, Any], Any],
        kind: str,
        store_name: str | None,
    ) -> None:
        self.left = left
        self.right = right
        self.joiner = joiner
        self.kind = kind
        self.store_name = store_name

    def enable_sending_old_values(self, force: bool) -> bool:
        # The join computes old results from both sides' old values.
        if self.left.origin.enable_sending_old_values(True) and (
            self.right.origin.enable_sending_old_values(True)
        ):
            self.send_old_values = True
        return self.send_old_values

    def view(self) -> TableView:
        if self.store_name is not None:
            return store_view(self.store_name)
        left, right = self.left.origin.view(), self.right.origin.view()
        left_missing, right_missing = _MISSING_ALLOWED[self.kind]
        joiner = self.joiner

        def make(context: ProcessorContext) -> Getter:
            get_left, get_right = left.make(context), right.make(context)

            def get(key: Any) -> ValueAndTimestamp | None:
                a, b = get_left(key), get_right(key)
                a_value = None if a is None else a.value
                b_value = None if b is None else b.value
                if (a_value is None and not left_missing) or (
                    b_value is None and not right_missing
                ):
                    return None
                if a_value is None and b_value is None:
                    return None
                stamps = [s.timestamp for s in (a, b) if s is not None and s.value is not None]
                return ValueAndTimestamp(joiner(a_value, b_value), max(stamps))

            return get

        return TableView(left.store_names + right.store_names, make)


class TableJoinSideProcessor(Processor):
    """Joins the updates of one side with the other side's current value.

    ``this_missing``/``other_missing``: whether a result exists without this side's value
    (outer joins) or without the other's (left side of a left join, both sides of an outer
    join). ``joiner(this_value, other_value)`` is already flipped for the right side.
    """

    def __init__(
        self,
        origin: JoinOrigin,
        other: TableView,
        joiner: Callable[[Any, Any], Any],
        this_missing: bool,
        other_missing: bool,
    ) -> None:
        self.other = other
        self.joiner = joiner
        self.this_missing = this_missing
        self.other_missing = other_missing
        self.send_old_values = origin.send_old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.lookup = self.other.make(context)

    def _join(self, value: Any, other: Any) -> Any:
        if value is None and not (self.this_missing and other is not None):
            return None
        return self.joiner(value, other)

    def process(self, record: Record) -> None:
        if record.key is None:
            return
        change = as_change(record.value)
        stored = self.lookup(record.key)
        other = None if stored is None else stored.value
        if other is None:
            if not self.other_missing or (change.new is None and change.old is None):
                return
            timestamp = record.timestamp
        else:
            timestamp = max(record.timestamp, stored.timestamp)  # type: ignore[union-attr]
        new = self._join(change.new, other)
        old = self._join(change.old, other) if self.send_old_values else None
        self.context.forward(Record(record.key, Change(new, old), timestamp, record.headers))


class TableJoinMergeProcessor(TableProcessor):
    """Merges both sides' results into the joined table (stored when materialized)."""

    def process(self, record: Record) -> None:
        change = as_change(record.value)
        if self.store is not None:
            previous = self.store.get_with_timestamp(record.key)
            self.store.put_with_timestamp(record.key, change.new, record.timestamp)
            old = None if previous is None else previous.value
            change = Change(change.new, old if self.send_old_values else None)
        elif not self.send_old_values:
            change = Change(change.new, None)
        self.context.forward(record.with_value(change))


def table_table_join(
    left: KTable,
    right: KTable,
    joiner: Callable[[Any, Any], Any],
    kind: str,
    named: Named | str | None,
    materialized: Materialized | None,
) -> KTable:
    """See ``KTable.join`` / ``left_join`` / ``outer_join``."""
    from streamtide.dsl.ktable import KTable

    ensure_callable(joiner, "joiner")
    if not isinstance(right, KTable) or right.builder is not left.builder:
        raise TopologyError("a table can only be joined with a KTable of the same StreamsBuilder")
    builder = left.builder
    topology = builder.topology
    base = named_of(named)
    this_name = f"{base}-join-this" if base else builder.new_name("KTABLE-JOINTHIS-")
    other_name = f"{base}-join-other" if base else builder.new_name("KTABLE-JOINOTHER-")
    merge_name = base or builder.new_name("KTABLE-MERGE-")
    store = None
    if materialized is not None:
        store = table_store(
            builder, materialized, "KTABLE-MERGE-STATE-STORE-", left.key_serde, None
        )
    origin = JoinOrigin(left, right, joiner, kind, None if store is None else store.name)
    # An outer side needs its old values: a tombstone of a key the other side lacks is
    # forwarded only if the key had a value (Kafka forces them on too).
    if kind in ("left", "outer"):
        left.origin.enable_sending_old_values(True)
    if kind == "outer":
        right.origin.enable_sending_old_values(True)
    left_view, right_view = left.origin.view(), right.origin.view()
    for view in (left_view, right_view):
        check_lookups(builder, view, "a table-table join")
    left_missing, right_missing = _MISSING_ALLOWED[kind]

    def flipped(right_value: Any, left_value: Any) -> Any:
        return joiner(left_value, right_value)

    topology.add_processor(
        this_name,
        lambda: TableJoinSideProcessor(origin, right_view, joiner, left_missing, right_missing),
        left.node,
    )
    topology.add_processor(
        other_name,
        lambda: TableJoinSideProcessor(origin, left_view, flipped, right_missing, left_missing),
        right.node,
    )
    topology.connect_processor_and_state_stores(this_name, *right_view.store_names)
    topology.connect_processor_and_state_stores(other_name, *left_view.store_names)
    topology.add_processor(
        merge_name, lambda: TableJoinMergeProcessor(origin), this_name, other_name
    )
    value_serde = None
    if store is not None:
        topology.add_state_store(store, merge_name)
        value_serde = store.value_serde
    topology.add_copartition_group(
        {
            *topology.upstream_source_topics(left.node),
            *topology.upstream_source_topics(right.node),
        },
        f"table-table join {merge_name!r}",
    )
    return KTable(
        builder, merge_name, origin.store_name, left.key_serde, value_serde, origin=origin
    )
