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
from streamtide.dsl.join_lookup import timestamped_read, view_lookup
from streamtide.dsl.params import Materialized, Named, ensure_callable, named_of
from streamtide.dsl.table_view import (
    Getter,
    TableOrigin,
    TableView,
    check_lookups,
    store_view,
    table_store,
)
from streamtide.errors import TopologyError
from streamtide.processor.api import ProcessorContext
from streamtide.processor.column_batch import ColumnBatch, EmittedRows
from streamtide.processor.operator import ColumnOperator, call_rows
from streamtide.state.timestamped import NO_TIMESTAMP, ValueAndTimestamp, encode

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
            self._sends_old_values = True
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


class TableJoinSideOperator(ColumnOperator):
    """Joins the updates of one side with the other side's current value.

    ``this_missing``/``other_missing``: whether a result exists without this side's value
    (outer joins) or without the other's (left side of a left join, both sides of an outer
    join). ``joiner(this_value, other_value)`` is already flipped for the right side.

    A batch holds updates of this side only (the two sides' topics are never in one piece;
    a self-join hands its rows on one at a time), so the other side is read once per
    distinct key where it is a store (``dsl.join_lookup``), each row getting a value of its
    own, and looked up row by row where its values are computed.
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
        self.stored, self.lookup = view_lookup(context, self.other)

    def _others(self, rows: ColumnBatch) -> tuple[list[int], list[Any], list[int]]:
        """The other side's value and its timestamp for each row that has one."""
        stored = self.stored
        if stored is not None:
            found, entries = stored.read_rows(self, rows, rows.keys)
            stamps = {p: entry[1] for p, entry in zip(found, entries) if entry is not None}
            found, others = stored.values(self, rows, found, entries)
            return found, others, [stamps.get(p, NO_TIMESTAMP) for p in found]
        lookup = self.lookup
        assert lookup is not None  # view_lookup gives a store or a lookup
        ok, looked = call_rows(self, rows, lookup, rows.keys)
        found = list(range(len(rows))) if ok is None else ok
        others = [None if entry is None else entry.value for entry in looked]
        times = [NO_TIMESTAMP if entry is None else entry.timestamp for entry in looked]
        return found, others, times

    def process_batch(self, batch: ColumnBatch) -> None:
        rows = batch.take([p for p, key in enumerate(batch.keys) if key is not None])
        found, others, stamps = self._others(rows)
        keys, values, timestamps = rows.keys, rows.values, rows.timestamps
        joiner, this_missing = self.joiner, self.this_missing
        other_missing, send_old_values = self.other_missing, self.send_old_values
        out = EmittedRows()
        m = len(found)
        start = 0
        while start < m:
            j = start
            try:
                for j in range(start, m):
                    p, other = found[j], others[j]
                    change = values[p]
                    if change.__class__ is not Change:
                        change = as_change(change)
                    new, old = change
                    if other is None:
                        if not other_missing or (new is None and old is None):
                            continue
                        timestamp = timestamps[p]
                    else:
                        timestamp = max(timestamps[p], stamps[j])
                    # a side's missing value makes no result unless the join allows it
                    allowed = this_missing and other is not None
                    new = None if new is None and not allowed else joiner(new, other)
                    if not send_old_values:
                        old = None
                    elif old is not None or allowed:
                        old = joiner(old, other)
                    out.add(p, keys[p], Change(new, old), timestamp)
                start = m
            except Exception as error:
                position = self.fail(rows, found[j], error)
                start = j + 1
                while start < m and found[start] < position:
                    start += 1
        self.emit(out.batch(rows))


class TableJoinMergeOperator(ColumnOperator):
    """Merges both sides' results into the joined table (stored when materialized).

    Read once, write once: a materialized join reads each key's stored result on its first
    row of a batch and keeps it serialized (each old value it forwards is deserialized
    afresh, as a read of the store gives); the keys' last results are written back before
    the batch is done, in the order the keys first changed."""

    def __init__(self, origin: TableOrigin) -> None:
        self.store_name = origin.store_name
        self.send_old_values = origin.send_old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = None if self.store_name is None else context.get_state_store(self.store_name)

    def process_batch(self, batch: ColumnBatch) -> None:
        values = [
            value if value.__class__ is Change else as_change(value) for value in batch.values
        ]
        if self.store is not None:
            self._merge_stored(batch, values)
        elif not self.send_old_values:
            self.emit(batch.with_values([Change(change.new, None) for change in values]))
        else:
            self.emit(batch.with_values(values))

    def _merge_stored(self, batch: ColumnBatch, changes: list[Change]) -> None:
        store = self.store
        assert store is not None
        inner, serde = store.inner, store.value_serde.inner
        read = timestamped_read(inner)
        serialize_key = store.key_serde.serialize
        serialize, deserialize = serde.serialize, serde.deserialize
        send_old_values = self.send_old_values
        found: dict[bytes, bytes | None] = {}
        changed: dict[bytes, int] = {}  # key bytes -> timestamp of its last result
        keys, timestamps = batch.keys, batch.timestamps
        kept: list[int] = []
        out: list[Change] = []
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key_bytes = serialize_key(keys[p])
                    if key_bytes in found:
                        previous = found[key_bytes]
                    else:
                        entry = read(key_bytes)
                        previous = found[key_bytes] = None if entry is None else entry[0]
                    old = deserialize(previous) if send_old_values else None
                    new = changes[p].new
                    found[key_bytes] = serialize(new)
                    changed[key_bytes] = timestamps[p]
                    kept.append(p)
                    out.append(Change(new, old))
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if changed:
            inner.put_all(
                [
                    (key_bytes, None if (raw := found[key_bytes]) is None else encode(raw, t))
                    for key_bytes, t in changed.items()
                ]
            )
        self.emit(batch.take(kept).with_values(out))


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
        lambda: TableJoinSideOperator(origin, right_view, joiner, left_missing, right_missing),
        left.node,
    )
    topology.add_processor(
        other_name,
        lambda: TableJoinSideOperator(origin, left_view, flipped, right_missing, left_missing),
        right.node,
    )
    topology.connect_processor_and_state_stores(this_name, *right_view.store_names)
    topology.connect_processor_and_state_stores(other_name, *left_view.store_names)
    topology.add_processor(
        merge_name, lambda: TableJoinMergeOperator(origin), this_name, other_name
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
