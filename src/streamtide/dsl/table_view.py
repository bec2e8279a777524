"""How a table's operators look a key up and send old values (Kafka's value getters).

Every ``KTable`` has an origin: the operator that made it. The origin answers two build-time
questions that downstream operators ask:

- ``view()``: how a processor reads the table's current value (and timestamp) of a key.
  A materialized table reads its store; a filter or ``map_values`` that is not materialized
  reads its parent's view and applies itself (so a join can use a filtered table without a
  store of its own). A source table that is not materialized yet gets its store here.
- ``enable_sending_old_values(force)``: make the table's updates carry old values
  (``Change.old``). A materialized table can always; a derived one can when its parent can;
  with ``force`` a source table materializes itself to be able to. A key-value stream
  aggregation sends them when asked without ``force`` (a filter or suppress below asks);
  windowed ones cannot (their updates carry only new values). A suppressed table passes
  the question to its parent.

Processors read the origin's settings when the task builds them, after the topology is
complete, so an operator added later (a ``group_by`` downstream) still switches them on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamtide.dsl.params import Materialized
from streamtide.errors import TopologyError
from streamtide.processor.api import ProcessorContext
from streamtide.serde import Serde
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder
from streamtide.state.timestamped import ValueAndTimestamp
from streamtide.state.versioned import VersionedKeyValueStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.ktable import KTable

#: ``getter(key) -> ValueAndTimestamp | None``: a table's current value of a key
Getter = Callable[[Any], "ValueAndTimestamp | None"]


#: ``getter(key, as_of) -> ValueAndTimestamp | None``: a versioned table's value of a key
#: at a time
AsOfGetter = Callable[[Any, int], "ValueAndTimestamp | None"]


@dataclass(frozen=True)
class TableView:
    """The stores a lookup needs and how to make the lookup in a task; ``store``: the
    timestamped store holding exactly the table's values, when a lookup only reads it (a
    batch operator may then read it directly, each key once: ``dsl.join_lookup``);
    ``make_as_of``: for a versioned table, how to look a key up as of a time."""

    store_names: tuple[str, ...]
    make: Callable[[ProcessorContext], Getter]
    store: str | None = None
    make_as_of: Callable[[ProcessorContext], AsOfGetter] | None = None


def store_view(store_name: str) -> TableView:
    """Look keys up in a timestamped key-value store."""

    def make(context: ProcessorContext) -> Getter:
        return context.get_state_store(store_name).get_with_timestamp

    return TableView((store_name,), make, store_name)


def versioned_view(store_name: str) -> TableView:
    """Look keys up in a versioned store: the latest version, or the one valid at a time."""

    def make(context: ProcessorContext) -> Getter:
        return context.get_state_store(store_name).get_with_timestamp

    def make_as_of(context: ProcessorContext) -> AsOfGetter:
        return context.get_state_store(store_name).get_as_of_with_timestamp

    return TableView((store_name,), make, None, make_as_of)


def check_lookups(builder: StreamsBuilder, view: TableView, what: str) -> None:
    """Refuse a lookup in a store that is not a table's timestamped key-value store (a
    windowed aggregation's window or session store cannot be looked up by key)."""
    for name in view.store_names:
        store = builder.topology.store_builder(name)
        if isinstance(store, VersionedKeyValueStoreBuilder):
            continue
        if not (isinstance(store, KeyValueStoreBuilder) and store.timestamped):
            raise TopologyError(
                f"{what} needs a key-value table; store {name!r} belongs to a windowed "
                f"aggregation, which cannot be looked up by key"
            )


def mapped_view(
    parent: TableView, compute: Callable[[Any, ValueAndTimestamp | None], Any]
) -> TableView:
    """``parent``'s lookup passed through ``compute(key, value_and_timestamp)``."""

    def make(context: ProcessorContext) -> Getter:
        get = parent.make(context)
        return lambda key: compute(key, get(key))

    parent_as_of = parent.make_as_of
    if parent_as_of is None:
        return TableView(parent.store_names, make)

    def make_as_of(context: ProcessorContext) -> AsOfGetter:
        get = parent_as_of(context)
        return lambda key, as_of: compute(key, get(key, as_of))

    return TableView(parent.store_names, make, None, make_as_of)


def table_store(
    builder: StreamsBuilder,
    materialized: Materialized,
    prefix: str,
    key_serde: Serde | None,
    value_serde: Serde | None,
) -> KeyValueStoreBuilder:
    """The timestamped store of a materialized table (named, or named ``<prefix><n>``)."""
    name = materialized.store_name or builder.new_name(prefix)
    return KeyValueStoreBuilder(
        KeyValueBytesStoreSupplier(name, materialized.resolved_store_type()),
        materialized.key_serde or key_serde,
        materialized.value_serde or value_serde,
        logging_enabled=materialized.logging_enabled,
        timestamped=True,
    )


def source_table_store(
    builder: StreamsBuilder,
    materialized: Materialized,
    key_serde: Serde | None,
    value_serde: Serde | None,
) -> KeyValueStoreBuilder | VersionedKeyValueStoreBuilder:
    """The store of a source table or ``to_table``: versioned when ``materialized`` gives a
    versioned supplier, else timestamped."""
    versioned = materialized.versioned
    if versioned is None:
        return table_store(builder, materialized, "", key_serde, value_serde)
    return VersionedKeyValueStoreBuilder(
        versioned,
        materialized.key_serde or key_serde,
        materialized.value_serde or value_serde,
        logging_enabled=materialized.logging_enabled,
    )


class TableOrigin:
    """A table's origin; see the module docstring. ``store_name`` is set when the table is
    materialized; ``send_old_values`` once an operator downstream needs old values."""

    store_name: str | None = None
    _sends_old_values: bool = False

    @property
    def send_old_values(self) -> bool:
        return self._sends_old_values

    def enable_sending_old_values(self, force: bool) -> bool:
        if self.store_name is not None:
            self._sends_old_values = True
        return self.send_old_values

    def view(self) -> TableView:
        if self.store_name is None:
            raise TopologyError("this table has no store to look values up in")
        return store_view(self.store_name)


class StoreOrigin(TableOrigin):
    """A table made by a stream aggregation: materialized, but its updates never carry old
    values (a ``KTable.group_by`` of it is refused at build time)."""

    def __init__(self, store_name: str | None) -> None:
        self.store_name = store_name

    def enable_sending_old_values(self, force: bool) -> bool:
        return False


class AggregationOrigin(StoreOrigin):
    """A table made by a key-value stream aggregation: it sends old values when a ``filter``,
    ``map_values`` or ``suppress`` below asks (Kafka's KTableFilter asks its parent when it
    is built, so that it forwards no tombstone for a key that never passed; Kafka's suppress
    asks so that its buffer knows what it last emitted). A ``group_by`` of it is still
    refused."""

    def __init__(self, store_name: str | None) -> None:
        super().__init__(store_name)
        self.asked = False

    @property
    def send_old_values(self) -> bool:
        return self.asked

    def enable_sending_old_values(self, force: bool) -> bool:
        if force:
            return False
        self.asked = True
        return True


class MaterializedOrigin(TableOrigin):
    """A table kept in its own store by the operator that makes it (a table aggregation)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name


class DerivedOrigin(TableOrigin):
    """A table computed key by key from its parent (``filter``, ``map_values``):
    ``compute(key, value_and_timestamp)`` gives its value of a key from the parent's."""

    def __init__(
        self,
        parent: KTable,
        compute: Callable[[Any, ValueAndTimestamp | None], ValueAndTimestamp | None],
        store_name: str | None,
    ) -> None:
        self.parent = parent
        self.compute = compute
        self.store_name = store_name
        # Like Kafka: a derived table sends old values when its parent already does.
        self.asked = parent.origin.enable_sending_old_values(False)

    @property
    def send_old_values(self) -> bool:
        """Asked to, and able to: from its own store, or from its parent's old values (read
        when the task is built: a parent may have withdrawn its answer since)."""
        return self.asked and (self.store_name is not None or self.parent.origin.send_old_values)

    def enable_sending_old_values(self, force: bool) -> bool:
        if self.store_name is not None or self.parent.origin.enable_sending_old_values(force):
            self.asked = True
        return self.send_old_values

    def view(self) -> TableView:
        if self.store_name is not None:
            return store_view(self.store_name)
        return mapped_view(self.parent.origin.view(), self.compute)


class SuppressOrigin(TableOrigin):
    """A suppressed table (Kafka's KTableSuppressProcessorSupplier): it asks its parent for
    old values when it is built (its buffer keeps what it last emitted for a key) and sends
    them on when a table below asks and the parent sends them. It has no store of its own
    to look values up in."""

    def __init__(self, parent: KTable) -> None:
        self.parent = parent
        parent.origin.enable_sending_old_values(False)
        self.asked = False

    @property
    def send_old_values(self) -> bool:
        """Read when the task is built, like ``DerivedOrigin.send_old_values``."""
        return self.asked and self.parent.origin.send_old_values

    def enable_sending_old_values(self, force: bool) -> bool:
        if self.parent.origin.enable_sending_old_values(force):
            self.asked = True
        return self.send_old_values
