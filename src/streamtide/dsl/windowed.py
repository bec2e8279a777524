"""Windowed grouped streams: ``KGroupedStream.windowed_by(TimeWindows | SessionWindows)``.

Every operation returns a ``KTable`` keyed by ``Windowed(key, Window(start, end))`` whose store
is a window store (time windows) or a session store (session windows).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamtide.dsl.distinct_operator import (
    SessionWindowDistinctOperator,
    TimeWindowDistinctOperator,
)
from streamtide.dsl.emit_strategy import EmitStrategy
from streamtide.dsl.final_results import (
    index_store_builder,
)
from streamtide.dsl.ktable import KTable
from streamtide.dsl.params import Materialized, Named, ensure_callable, named_of
from streamtide.dsl.processors import (
    NO_INITIALIZER,
    count_aggregator,
    count_initializer,
    count_merger,
)
from streamtide.dsl.session_operator import SessionAggregateOperator, SessionFinalOperator
from streamtide.dsl.time_window_operator import TimeWindowAggregateOperator, TimeWindowFinalOperator
from streamtide.dsl.windows import (
    DEFAULT_RETENTION_MS,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
)
from streamtide.errors import TopologyError
from streamtide.processor.api import StoreBuilder
from streamtide.serde import Serde, Serdes, WindowedSerde
from streamtide.state.session_store import SessionStoreBuilder
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.state.window_store import WindowStoreBuilder

if TYPE_CHECKING:
    from streamtide.dsl.kgrouped import KGroupedStream

#: ``merger(key, aggregate1, aggregate2) -> aggregate``: combines two sessions' aggregates.
SessionMerger = Callable[[Any, Any, Any], Any]

_AGGREGATE = "KSTREAM-AGGREGATE-"
_REDUCE = "KSTREAM-REDUCE-"
_DISTINCT = "KSTREAM-DISTINCT-"


def windowed_stream(
    grouped: KGroupedStream, windows: TimeWindows | SessionWindows | SlidingWindows
) -> _WindowedKStream:
    if isinstance(windows, TimeWindows):
        return TimeWindowedKStream(grouped, windows)
    if isinstance(windows, SessionWindows):
        return SessionWindowedKStream(grouped, windows)
    if isinstance(windows, SlidingWindows):
        from streamtide.dsl.sliding_windowed import SlidingWindowedKStream

        return SlidingWindowedKStream(grouped, windows)
    raise TypeError(
        f"windowed_by() needs TimeWindows, SessionWindows or SlidingWindows, got {windows!r}"
    )


class _WindowedKStream:
    """What both kinds share: naming, serdes, store registration, the resulting table."""

    #: how long after a window's end it closes (set by each kind)
    _close_after_ms: int

    def __init__(self, grouped: KGroupedStream) -> None:
        self.grouped = grouped
        self.builder = grouped.builder
        self.emit = EmitStrategy.ON_WINDOW_UPDATE

    def emit_strategy(self, strategy: EmitStrategy) -> Any:
        """Emit on every update (``EmitStrategy.on_window_update()``, the default) or each
        window's final result once (``EmitStrategy.on_window_close()``); returns a copy."""
        if not isinstance(strategy, EmitStrategy):
            raise TypeError(
                "emit_strategy() needs EmitStrategy.on_window_close() or "
                f"EmitStrategy.on_window_update(), got {strategy!r}"
            )
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.emit = strategy
        return copy

    @property
    def _final(self) -> bool:
        return self.emit is EmitStrategy.ON_WINDOW_CLOSE

    def _no_final(self, operation: str) -> None:
        if self._final:
            raise TopologyError(
                f"{operation}() does not support EmitStrategy.on_window_close(): it emits "
                "the first record of a window at once; use count() or aggregate() instead"
            )

    def _build(
        self,
        prefix: str,
        materialized: Materialized,
        named: Named | str | None,
        value_serde: Serde | None,
        make_store: Callable[[KeyValueBytesStoreSupplier, Serde | None, Serde | None], Any],
        make_processor: Callable[[str, bool], Any],
    ) -> KTable:
        store_name = materialized.store_name or self.builder.new_name(f"{prefix}STATE-STORE-")
        parents = self.grouped.parent_nodes(store_name, named_of(named))
        node = named_of(named) or self.builder.new_name(prefix)
        key_serde = materialized.key_serde or self.grouped.key_serde
        value_serde = materialized.value_serde or value_serde
        supplier = KeyValueBytesStoreSupplier(store_name, materialized.resolved_store_type())
        store: StoreBuilder = make_store(supplier, key_serde, value_serde)
        if not materialized.logging_enabled:
            store.with_logging_disabled()  # type: ignore[attr-defined]
        topology = self.builder.topology
        caching = materialized.caching_enabled
        topology.add_processor(node, lambda: make_processor(store_name, caching), *parents)
        topology.add_state_store(store, node)
        if self._final:
            topology.add_state_store(
                index_store_builder(store_name, supplier.kind, materialized.logging_enabled),
                node,
            )
        windowed_key_serde = WindowedSerde(key_serde) if key_serde is not None else None
        return KTable(
            self.builder,
            node,
            store_name,
            windowed_key_serde,
            value_serde,
            window_close_ms=self._close_after_ms,
        )


class FixedWindowAggregations(_WindowedKStream):
    """``aggregate``, ``reduce`` and ``count`` of the window kinds without a session merger
    (time and sliding windows), over a timestamped window store. Each kind names its window
    size, its retention and its processors: ``(on update, on close)``, both built as
    ``processor(store, windows, initializer, aggregator, caching)``."""

    windows: Any
    _processors: tuple[Any, Any]

    def _window_size_ms(self) -> int:
        raise NotImplementedError

    def _retention(self, materialized: Materialized) -> int:
        raise NotImplementedError

    def _aggregate(
        self,
        prefix: str,
        materialized: Materialized | None,
        named: Named | str | None,
        initializer: Any,
        aggregator: Callable[[Any, Any, Any], Any],
        value_serde: Serde | None,
    ) -> KTable:
        materialized = materialized or Materialized()
        windows, final = self.windows, self._final
        retention, size = self._retention(materialized), self._window_size_ms()
        on_update, on_close = self._processors

        def make(store: str, caching: bool) -> Any:  # captures no builder state
            if final:
                return on_close(store, windows, initializer, aggregator, False)
            return on_update(store, windows, initializer, aggregator, caching)

        return self._build(
            prefix,
            materialized,
            named,
            value_serde,
            lambda supplier, ks, vs: WindowStoreBuilder(
                supplier, size, retention, ks, vs, timestamped=True
            ),
            make,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Fold each window's values with ``aggregator(key, value, aggregate)``."""
        ensure_callable(initializer, "initializer")
        ensure_callable(aggregator, "aggregator")
        return self._aggregate(_AGGREGATE, materialized, named, initializer, aggregator, None)

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Combine each window's values with ``reducer(aggregate, value)``."""
        ensure_callable(reducer, "reducer")
        return self._aggregate(
            _REDUCE,
            materialized,
            named,
            NO_INITIALIZER,
            lambda _k, v, agg: reducer(agg, v),
            self.grouped.value_serde,
        )

    def count(
        self, materialized: Materialized | None = None, named: Named | str | None = None
    ) -> KTable:
        """Number of records per key and window (``Serdes.long()`` values by default)."""
        return self._aggregate(
            _AGGREGATE, materialized, named, count_initializer, count_aggregator, Serdes.long()
        )


class TimeWindowedKStream(FixedWindowAggregations):
    """A grouped stream cut into fixed-size (tumbling or hopping) time windows."""

    _processors = (TimeWindowAggregateOperator, TimeWindowFinalOperator)

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows) -> None:
        super().__init__(grouped)
        self.windows = windows
        self._close_after_ms = windows.grace_ms

    def _retention(self, materialized: Materialized) -> int:
        """``max(size, retention)``; never below the grace period, so no window that still
        accepts records can have expired (one day, or more when size or grace need it)."""
        windows = self.windows
        if materialized.retention is None:
            return max(windows.size_ms, windows.grace_ms, DEFAULT_RETENTION_MS)
        if materialized.retention < windows.grace_ms:
            raise ValueError(
                f"window store retention ({materialized.retention} ms) must be at least the "
                f"grace period ({windows.grace_ms} ms): windows still accepting records "
                "would otherwise be expired"
            )
        return max(windows.size_ms, materialized.retention)

    def _store(self, retention: int, timestamped: bool) -> Callable[..., WindowStoreBuilder]:
        """Window stores of aggregations keep each window's timestamp; distinct's need not
        (it emits a window once, with its first record's timestamp)."""
        size = self.windows.size_ms
        return lambda supplier, ks, vs: WindowStoreBuilder(
            supplier, size, retention, ks, vs, timestamped=timestamped
        )

    def _window_size_ms(self) -> int:
        return self.windows.size_ms

    def distinct(
        self, materialized: Materialized | None = None, named: Named | str | None = None
    ) -> KTable:
        """Only the first record of each key in each window; tumbling windows only."""
        windows = self.windows
        if not windows.is_tumbling:
            raise TopologyError(
                f"distinct() needs tumbling windows, got {windows!r}: hopping windows overlap, "
                "so each record falls into several windows and would be emitted once per "
                "window instead of once; use TimeWindows.of_size(size) without advance_by"
            )
        self._no_final("distinct")
        materialized = materialized or Materialized()
        retention = self._retention(materialized)
        return self._build(
            _DISTINCT,
            materialized,
            named,
            self.grouped.value_serde,
            self._store(retention, timestamped=False),
            lambda store, caching: TimeWindowDistinctOperator(store, windows, caching),
        )


class SessionWindowedKStream(_WindowedKStream):
    """A grouped stream cut into per-key sessions of activity."""

    def __init__(self, grouped: KGroupedStream, windows: SessionWindows) -> None:
        super().__init__(grouped)
        self.windows = windows
        self._close_after_ms = windows.close_after_ms  # gap + grace

    def _retention(self, materialized: Materialized) -> int:
        """``Materialized.with_retention`` if given, else ``SessionWindows.until``; >= gap."""
        if materialized.retention is None:
            return self.windows.retention_ms
        if materialized.retention < self.windows.gap_ms:
            raise ValueError(
                f"session store retention ({materialized.retention} ms) must be at least the "
                f"inactivity gap ({self.windows.gap_ms} ms)"
            )
        return materialized.retention

    def _aggregate(
        self,
        prefix: str,
        materialized: Materialized | None,
        named: Named | str | None,
        initializer: Any,
        aggregator: Callable[[Any, Any, Any], Any],
        merger: SessionMerger,
        value_serde: Serde | None,
    ) -> KTable:
        materialized = materialized or Materialized()
        windows = self.windows
        retention = self._retention(materialized)
        if self._final and retention < windows.close_after_ms:
            raise ValueError(
                f"session store retention ({retention} ms) must be at least the sessions' "
                f"gap plus grace ({windows.close_after_ms} ms) with "
                "EmitStrategy.on_window_close():"
                " a session must still be stored when it closes"
            )

        def make(store: str, caching: bool) -> Any:
            if self._final:
                return SessionFinalOperator(
                    store, windows, retention, initializer, aggregator, merger, False
                )
            return SessionAggregateOperator(
                store, windows, retention, initializer, aggregator, merger, caching
            )

        return self._build(
            prefix,
            materialized,
            named,
            value_serde,
            lambda supplier, ks, vs: SessionStoreBuilder(supplier, retention, ks, vs),
            make,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        session_merger: SessionMerger,
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Fold each session's values with ``aggregator(key, value, aggregate)``; when
        sessions merge, combine their aggregates with ``session_merger(key, agg1, agg2)``."""
        ensure_callable(initializer, "initializer")
        ensure_callable(aggregator, "aggregator")
        ensure_callable(session_merger, "session merger")
        return self._aggregate(
            _AGGREGATE, materialized, named, initializer, aggregator, session_merger, None
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named | str | None = None,
    ) -> KTable:
        """Combine each session's values with ``reducer(aggregate, value)`` (also used to
        merge two sessions' aggregates)."""
        ensure_callable(reducer, "reducer")
        return self._aggregate(
            _REDUCE,
            materialized,
            named,
            NO_INITIALIZER,
            lambda _k, v, agg: reducer(agg, v),
            lambda _k, a, b: reducer(a, b),
            self.grouped.value_serde,
        )

    def count(
        self, materialized: Materialized | None = None, named: Named | str | None = None
    ) -> KTable:
        """Number of records per key and session (``Serdes.long()`` values by default)."""
        return self._aggregate(
            _AGGREGATE,
            materialized,
            named,
            count_initializer,
            count_aggregator,
            count_merger,
            Serdes.long(),
        )

    def distinct(
        self, materialized: Materialized | None = None, named: Named | str | None = None
    ) -> KTable:
        """Only the record that starts each new session; records joining a session drop."""
        self._no_final("distinct")
        materialized = materialized or Materialized()
        windows = self.windows
        retention = self._retention(materialized)
        return self._build(
            _DISTINCT,
            materialized,
            named,
            self.grouped.value_serde,
            lambda supplier, ks, vs: SessionStoreBuilder(supplier, retention, ks, vs),
            lambda store, caching: SessionWindowDistinctOperator(
                store, windows, retention, caching
            ),
        )
