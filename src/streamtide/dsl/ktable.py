"""``KTable``: a changelog stream where each record updates the value of its key."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.params import DEFAULT_STORE_TYPE, Named, ensure_callable, named_of
from streamtide.dsl.processors import PassThroughProcessor
from streamtide.dsl.suppress import SuppressProcessor
from streamtide.dsl.suppressed import Suppressed
from streamtide.errors import TopologyError
from streamtide.processor.api import Processor
from streamtide.record import Record
from streamtide.serde import Serde, Serdes
from streamtide.state.stores import KeyValueBytesStoreSupplier, KeyValueStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.builder import StreamsBuilder
    from streamtide.dsl.kstream import KStream


class TableFilterProcessor(Processor):
    """Forwards updates that pass; a failing update becomes a tombstone for its key."""

    def __init__(self, predicate: Callable[[Any, Any], bool], keep: bool) -> None:
        self.predicate = predicate
        self.keep = keep

    def process(self, record: Record) -> None:
        if (
            record.value is not None
            and bool(self.predicate(record.key, record.value)) is not self.keep
        ):
            record = record.with_value(None)
        self.context.forward(record)


class TableMapValuesProcessor(Processor):
    """Maps each new value; tombstones stay tombstones."""

    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        if record.value is not None:
            record = record.with_value(self.mapper(record.value))
        self.context.forward(record)


class KTable:
    """The latest value per key; ``store_name`` names the store it is materialized in."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node: str,
        store_name: str | None,
        key_serde: Serde | None,
        value_serde: Serde | None,
        window_close_ms: int | None = None,
    ) -> None:
        self.builder = builder
        self.node = node
        self.store_name = store_name
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: for a windowed table: how long after a window's end it closes (grace, plus the gap
        #: for sessions); None for a table that is not windowed
        self.window_close_ms = window_close_ms

    def _add(
        self, prefix: str, supplier: Any, named: Named | str | None, value_serde: Serde | None
    ) -> KTable:
        name = named_of(named) or self.builder.new_name(prefix)
        self.builder.topology.add_processor(name, supplier, self.node)
        return KTable(self.builder, name, None, self.key_serde, value_serde, self.window_close_ms)

    def to_stream(self, named: Named | str | None = None) -> KStream:
        """The stream of this table's updates (tombstones included, as None values)."""
        from streamtide.dsl.kstream import KStream

        name = named_of(named) or self.builder.new_name("KTABLE-TOSTREAM-")
        self.builder.topology.add_processor(name, PassThroughProcessor, self.node)
        return KStream(self.builder, name, self.key_serde, self.value_serde)

    def filter(
        self, predicate: Callable[[Any, Any], bool], named: Named | str | None = None
    ) -> KTable:
        """Keep keys whose value passes ``predicate(key, value)``; others become tombstones."""
        ensure_callable(predicate, "filter predicate")
        return self._add(
            "KTABLE-FILTER-", lambda: TableFilterProcessor(predicate, True), named, self.value_serde
        )

    def filter_not(
        self, predicate: Callable[[Any, Any], bool], named: Named | str | None = None
    ) -> KTable:
        ensure_callable(predicate, "filter_not predicate")
        return self._add(
            "KTABLE-FILTER-",
            lambda: TableFilterProcessor(predicate, False),
            named,
            self.value_serde,
        )

    def map_values(self, mapper: Callable[[Any], Any], named: Named | str | None = None) -> KTable:
        """Map each value; tombstones pass through."""
        ensure_callable(mapper, "map_values mapper")
        return self._add("KTABLE-MAPVALUES-", lambda: TableMapValuesProcessor(mapper), named, None)

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold updates back: ``Suppressed.until_window_closes(...)`` emits each window's final
        result once (windowed tables only); ``Suppressed.until_time_limit(d, ...)`` emits a
        key's latest value ``d`` after its first buffered update. The buffer is a changelogged
        store (``<name>-store`` when named), so it survives restarts and task moves."""
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
        wait = self.window_close_ms if suppressed.final_results else suppressed.time_limit_ms
        key_serde, value_serde = self.key_serde, self.value_serde
        windowed = self.window_close_ms is not None
        builder.topology.add_processor(
            name,
            lambda: SuppressProcessor(
                name, store_name, suppressed, wait, key_serde, value_serde, windowed
            ),
            self.node,
        )
        store = KeyValueStoreBuilder(
            KeyValueBytesStoreSupplier(store_name, DEFAULT_STORE_TYPE),
            Serdes.bytes(),
            Serdes.bytes(),
        )
        builder.topology.add_state_store(store, name)
        return KTable(builder, name, None, key_serde, value_serde, self.window_close_ms)
