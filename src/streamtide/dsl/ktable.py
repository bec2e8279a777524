"""``KTable``: a changelog stream where each record updates the value of its key.

Updates travel between a table's nodes as ``Change(new, old)`` values (``dsl/change.py``);
``to_stream`` turns them back into plain records. How a table is looked up and whether it
sends old values is its origin's business (``dsl/table_view.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.change import Change
from streamtide.dsl.params import (
    DEFAULT_STORE_TYPE,
    Grouped,
    Materialized,
    Named,
    TableJoined,
    ensure_callable,
    named_of,
)
from streamtide.dsl.processors import ToStreamOperator
from streamtide.dsl.suppress import SuppressOperator
from streamtide.dsl.suppressed import Suppressed
from streamtide.dsl.table_state import TableOperator
from streamtide.dsl.table_view import (
    DerivedOrigin,
    StoreOrigin,
    SuppressOrigin,
    TableOrigin,
    table_store,
)
from streamtide.errors import TopologyError
from streamtide.processor.column_batch import ColumnBatch
from streamtide.serde import Serde, Serdes
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder
from streamtide.state.timestamped import ValueAndTimestamp

if TYPE_CHECKING:
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.kgrouped_table import KGroupedTable
    from streamtide.dsl.kstream import KStream


class DerivedTableOperator(TableOperator):
    """A filter or ``map_values`` of a table (Kafka's KTableFilter / KTableMapValues).

    ``compute(key, value)`` gives the derived value of a parent value (None: absent). The
    old value comes from the table's own store when materialized, else from the parent's
    old value; without old values a tombstone cannot be told from an unnecessary one, so
    every absent result is forwarded. A filter with old values forwards nothing when the key
    was absent before and after (``skip_double_tombstones``).
    """

    def __init__(
        self,
        origin: DerivedOrigin,
        compute: Callable[[Any, Any], Any],
        skip_double_tombstones: bool,
    ) -> None:
        super().__init__(origin)
        self.compute = compute
        self.skip_double_tombstones = skip_double_tombstones

    def process_batch(self, batch: ColumnBatch) -> None:
        keys, values, timestamps = batch.keys, batch.values, batch.timestamps
        compute, table = self.compute, self.table
        send_old_values = self.send_old_values
        skip = send_old_values and self.skip_double_tombstones
        positions: list[int] = []
        changes: list[Change] = []
        n = len(keys)
        start = 0
        while start < n:
            p = start
            try:
                for p in range(start, n):
                    key, change = keys[p], values[p]
                    if change.__class__ is not Change:
                        change = Change(change, None)
                    new = None if change.new is None else compute(key, change.new)
                    old = None
                    if table is not None:
                        ident, entry = table.entry(key)
                        if send_old_values:
                            old = table.value(entry)
                    elif send_old_values and change.old is not None:
                        old = compute(key, change.old)
                    if skip and old is None and new is None:
                        continue
                    if table is not None:
                        table.put(ident, entry, new, timestamps[p])
                    positions.append(p)
                    changes.append(Change(new, old))
                start = n
            except Exception as error:
                start = self.fail(batch, p, error)
        if table is not None:
            table.write_back()
        self.emit(batch.derive(positions, [keys[p] for p in positions], changes))


def _filtered(predicate: Callable[[Any, Any], bool], keep: bool) -> Callable[[Any, Any], Any]:
    def compute(key: Any, value: Any) -> Any:
        return value if bool(predicate(key, value)) is keep else None

    return compute


def _on_stored(compute: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``compute`` lifted to stored values with timestamps (for lookups)."""

    def lookup(key: Any, stored: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        if stored is None or stored.value is None:
            return None
        value = compute(key, stored.value)
        return None if value is None else ValueAndTimestamp(value, stored.timestamp)

    return lookup


class KTable:
    """The latest value per key; ``store_name`` names the store it is materialized in."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        store_name: str | None,
        key_serde: Serde | None,
        value_serde: Serde | None,
        *,
        origin: TableOrigin | None = None,
        window_close_ms: int | None = None,
    ) -> None:
        self.builder = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.origin = origin if origin is not None else StoreOrigin(store_name)
        #: for a windowed table: how long after a window's end it closes (grace, plus the gap
        #: for sessions); None for a table that is not windowed
        self.window_close_ms = window_close_ms

    @property
    def store_name(self) -> str | None:
        """The store holding this table, if it is materialized."""
        return self.origin.store_name

    def _derive(
        self,
        prefix: str,
        compute: Callable[[Any, Any], Any],
        named: Named | str | None,
        materialized: Materialized | None,
        value_serde: Serde | None,
        *,
        skip_double_tombstones: bool,
    ) -> KTable:
        name = named_of(named) or self.builder.new_name(prefix)
        topology = self.builder.topology
        store = None
        if materialized is not None:
            store = table_store(
                self.builder, materialized, f"{prefix}STATE-STORE-", self.key_serde, value_serde
            )
        origin = DerivedOrigin(self, _on_stored(compute), None if store is None else store.name)
        topology.add_processor(
            name, lambda: DerivedTableOperator(origin, compute, skip_double_tombstones), self.node
        )
        if store is not None:
            topology.add_state_store(store, name)
            value_serde = store.value_serde
        return KTable(
            self.builder,
            name,
            origin.store_name,
            self.key_serde,
            value_serde,
            origin=origin,
            window_close_ms=self.window_close_ms,
        )

    def to_stream(self, named: Named | str | None = None) -> KStream:
        """The stream of this table's updates (tombstones included, as None values)."""
        from streamtide.dsl.kstream import KStream

        name = named_of(named) or self.builder.new_name("KTABLE-TOSTREAM-")
        self.builder.topology.add_processor(name, ToStreamOperator, self.node)
        return KStream(self.builder, name, self.key_serde, self.value_serde)

    def filter(
        self,
        predicate: Callable[[Any, Any], bool],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Keep keys whose value passes ``predicate(key, value)``; others become tombstones."""
        ensure_callable(predicate, "filter predicate")
        return self._derive(
            "KTABLE-FILTER-",
            _filtered(predicate, True),
            named,
            materialized,
            self.value_serde,
            skip_double_tombstones=True,
        )

    def filter_not(
        self,
        predicate: Callable[[Any, Any], bool],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Keep keys whose value fails ``predicate(key, value)``; others become tombstones."""
        ensure_callable(predicate, "filter_not predicate")
        return self._derive(
            "KTABLE-FILTER-",
            _filtered(predicate, False),
            named,
            materialized,
            self.value_serde,
            skip_double_tombstones=True,
        )

    def map_values(
        self,
        mapper: Callable[[Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Map each value with ``mapper(value)``; tombstones pass through."""
        ensure_callable(mapper, "map_values mapper")
        return self._derive(
            "KTABLE-MAPVALUES-",
            lambda _key, value: mapper(value),
            named,
            materialized,
            None,
            skip_double_tombstones=False,
        )

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold updates back: ``Suppressed.until_window_closes(...)`` emits each window's final
        result once (windowed tables only); ``Suppressed.until_time_limit(d, ...)`` emits a
        key's latest value ``d`` after its first buffered update. The buffer is a changelogged
        store (``<name>-store`` when named), so it survives restarts and task moves. It asks
        this table for old values and keeps them (``dsl/suppress.py``), so the tables below
        get old values when they ask."""
        if not isinstance(suppressed, Suppressed):
            raise TypeError(f"suppress() needs a Suppressed, got {suppressed!r}")
        if suppressed.final_results and self.window_close_ms is None:
            raise TopologyError(
                "Suppressed.until_window_closes() needs a windowed table (the result of "
                "windowed_by(...).count()/reduce()/aggregate()); for other tables use "
                "Suppressed.until_time_limit()"
            )
        builder = self.builder
        if suppressed.name is not None:
            name, store_name = suppressed.name, f"{suppressed.name}-store"
        else:
            name = builder.new_name("KTABLE-SUPPRESS-")
            store_name = builder.new_name("KTABLE-SUPPRESS-STATE-STORE-")
        origin = SuppressOrigin(self)
        close_ms = self.window_close_ms
        # a final-results suppression has a windowed table (checked above)
        wait = (
            close_ms
            if suppressed.final_results and close_ms is not None
            else suppressed.time_limit_ms
        )
        key_serde, value_serde = self.key_serde, self.value_serde
        windowed = self.window_close_ms is not None
        builder.topology.add_processor(
            name,
            lambda: SuppressOperator(
                name,
                store_name,
                suppressed,
                wait,
                key_serde,
                value_serde,
                windowed,
                origin.send_old_values,
            ),
            self.node,
        )
        store = KeyValueStoreBuilder(
            KeyValueBytesStoreSupplier(store_name, DEFAULT_STORE_TYPE),
            Serdes.bytes(),
            Serdes.bytes(),
        )
        builder.topology.add_state_store(store, name)
        return KTable(
            builder,
            name,
            None,
            key_serde,
            value_serde,
            origin=origin,
            window_close_ms=self.window_close_ms,
        )

    # ---- re-grouping and joins (dsl/kgrouped_table.py, dsl/table_table_joins.py) ---------

    def group_by(
        self,
        selector: Callable[[Any, Any], tuple[Any, Any] | None],
        grouped: Grouped | None = None,
    ) -> KGroupedTable:
        """Re-group by ``selector(key, value) -> (new_key, new_value)`` (None: drop): an
        update is subtracted from its old group and added to its new one."""
        from streamtide.dsl.kgrouped_table import group_table

        return group_table(self, selector, grouped)

    def join(
        self,
        other: KTable,
        joiner: Callable[[Any, Any], Any],
        named: Named | str | Callable[[Any, Any], Any] | None = None,
        materialized: Materialized | TableJoined | Named | str | None = None,
        *options: TableJoined | Materialized | Named | str | None,
    ) -> KTable:
        """Inner join on the key: ``joiner(value, other_value)`` while both have the key.

        ``join(other, foreign_key_extractor, joiner[, TableJoined | name][, Materialized])``
        joins on a foreign key instead: each row with ``other``'s row of
        ``foreign_key_extractor(value)`` (KIP-213, ``dsl/fk_join.py``)."""
        return self._join(other, joiner, named, materialized, options, "inner")

    def left_join(
        self,
        other: KTable,
        joiner: Callable[[Any, Any], Any],
        named: Named | str | Callable[[Any, Any], Any] | None = None,
        materialized: Materialized | TableJoined | Named | str | None = None,
        *options: TableJoined | Materialized | Named | str | None,
    ) -> KTable:
        """Left join on the key: ``joiner(value, other_value or None)`` while this has it.

        ``left_join(other, foreign_key_extractor, joiner, ...)`` joins on a foreign key as
        ``join`` does, keeping rows without a foreign row (or foreign key) as
        ``joiner(value, None)``."""
        return self._join(other, joiner, named, materialized, options, "left")

    def _join(
        self,
        other: KTable,
        joiner: Callable[..., Any],  # the foreign-key extractor in the foreign-key form
        named: Any,
        materialized: Any,
        options: tuple[Any, ...],
        kind: str,
    ) -> KTable:
        if callable(named) and not isinstance(named, (Named, str)):
            from streamtide.dsl.fk_join import foreign_key_join, foreign_key_options

            table_joined, stored = foreign_key_options(materialized, *options)
            return foreign_key_join(
                self, other, joiner, named, kind == "left", table_joined, stored
            )
        if options or isinstance(named, TableJoined) or isinstance(materialized, TableJoined):
            raise TypeError("TableJoined and extra options belong to foreign-key joins")
        from streamtide.dsl.table_table_joins import table_table_join

        return table_table_join(self, other, joiner, kind, named, materialized)

    def outer_join(
        self,
        other: KTable,
        joiner: Callable[[Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Outer join on the key: ``joiner(value or None, other_value or None)`` while
        either has it."""
        from streamtide.dsl.table_table_joins import table_table_join

        return table_table_join(self, other, joiner, "outer", named, materialized)
