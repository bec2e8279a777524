"""Store suppliers and builders: how a topology declares a store once and gets one per task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from streamtide.errors import TopologyError
from streamtide.serde import Serde
from streamtide.time import Duration, non_negative_millis

if TYPE_CHECKING:
    from streamtide.state.session_store import SessionStoreBuilder
    from streamtide.state.versioned import (
        VersionedBytesStoreSupplier,
        VersionedKeyValueStoreBuilder,
    )
    from streamtide.state.window_store import WindowStoreBuilder
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.changelogging import ChangeLoggingKeyValueBytesStore
from streamtide.state.memory import InMemoryKeyValueBytesStore
from streamtide.state.typed import SerdeKeyValueStore, TimestampedKeyValueStore

_STORE_KINDS: dict[str, Callable[[str], KeyValueBytesStore]] = {
    "in_memory": InMemoryKeyValueBytesStore,
}


def register_key_value_store_kind(kind: str, factory: Callable[[str], KeyValueBytesStore]) -> None:
    """Make a bytes store implementation available under ``kind`` (e.g. ``"rocksdb"``)."""
    _STORE_KINDS[kind] = factory


def key_value_store_kinds() -> tuple[str, ...]:
    return tuple(_STORE_KINDS)


@dataclass(frozen=True)
class KeyValueBytesStoreSupplier:
    """Makes a new, unopened bytes store of one kind for each task.

    With ``logging_enabled`` (the default, as in Kafka Streams) the store is wrapped in a
    ``ChangeLoggingKeyValueBytesStore``: its writes are buffered until the task commits, sent
    to the store's changelog, and only then written to the local store. Every store layout
    built on this supplier (key-value, window, session, dedup) gets that, and restore, for free.
    """

    name: str
    kind: str
    logging_enabled: bool = True

    def get(self) -> KeyValueBytesStore:
        try:
            factory = _STORE_KINDS[self.kind]
        except KeyError:
            raise TopologyError(
                f"store {self.name!r}: unknown store kind {self.kind!r}; "
                f"available: {', '.join(sorted(_STORE_KINDS))}"
            ) from None
        store = factory(self.name)
        return ChangeLoggingKeyValueBytesStore(store) if self.logging_enabled else store

    def with_logging(self, enabled: bool) -> KeyValueBytesStoreSupplier:
        return replace(self, logging_enabled=enabled)


_B = TypeVar("_B", bound="SupplierStoreBuilder")


class SupplierStoreBuilder:
    """What the builders of stores laid out over a supplier's bytes store share (the
    dataclasses below and the window, session and dedup store builders declare the fields)."""

    supplier: KeyValueBytesStoreSupplier
    logging_enabled: bool

    @property
    def name(self) -> str:
        return self.supplier.name

    def with_logging_disabled(self: _B) -> _B:
        self.logging_enabled = False
        return self

    def _inner(self) -> KeyValueBytesStore:
        """A new bytes store for one task, changelogged unless logging is disabled."""
        return self.supplier.with_logging(self.logging_enabled).get()


@dataclass
class KeyValueStoreBuilder(SupplierStoreBuilder):
    """Builds a typed key-value store per task; logging (changelog) is on by default.
    ``timestamped`` stores keep each value's timestamp (``TimestampedKeyValueStore``)."""

    supplier: KeyValueBytesStoreSupplier
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging_enabled: bool = True
    log_config: dict[str, Any] = field(default_factory=dict)
    timestamped: bool = False

    def with_logging_enabled(self, config: dict[str, Any] | None = None) -> KeyValueStoreBuilder:
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def build(self) -> SerdeKeyValueStore:
        store = TimestampedKeyValueStore if self.timestamped else SerdeKeyValueStore
        return store(self._inner(), self.key_serde, self.value_serde)


def _versioned_supplier(
    name: str, kind: str, history_retention: Duration, segment_interval: Duration | None
) -> VersionedBytesStoreSupplier:
    from streamtide.state.versioned import VersionedBytesStoreSupplier
    from streamtide.state.versioned_format import default_segment_interval

    retention = non_negative_millis(history_retention, "history_retention")
    if segment_interval is None:
        interval = default_segment_interval(retention)
    else:
        interval = non_negative_millis(segment_interval, "segment_interval")
        if interval < 1:
            raise ValueError("segment_interval must be positive")
    return VersionedBytesStoreSupplier(
        _check_name(name), kind, history_retention_ms=retention, segment_interval_ms=interval
    )


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise TopologyError(f"a store needs a non-empty name, got {name!r}")
    return name


class Stores:
    """Factory of store suppliers and builders (mirrors Kafka Streams' ``Stores``)."""

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(_check_name(name), "in_memory")

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(_check_name(name), "rocksdb")

    @staticmethod
    def persistent_versioned_key_value_store(
        name: str, history_retention: Duration, segment_interval: Duration | None = None
    ) -> VersionedBytesStoreSupplier:
        """A RocksDB-backed versioned key-value store (KIP-889) keeping old versions for
        ``history_retention``, which is also how late a write may come (its grace period);
        ``segment_interval`` defaults to Kafka Streams' choice for that retention."""
        return _versioned_supplier(name, "rocksdb", history_retention, segment_interval)

    @staticmethod
    def in_memory_versioned_key_value_store(
        name: str, history_retention: Duration, segment_interval: Duration | None = None
    ) -> VersionedBytesStoreSupplier:
        """``persistent_versioned_key_value_store`` kept in memory (restored from its
        changelog whenever its task opens)."""
        return _versioned_supplier(name, "in_memory", history_retention, segment_interval)

    @staticmethod
    def versioned_key_value_store_builder(
        supplier: VersionedBytesStoreSupplier,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> VersionedKeyValueStoreBuilder:
        """A builder of versioned stores for processors (``put(key, value, timestamp)``,
        ``get(key)``, ``get(key, as_of)``, ``delete(key, timestamp)``)."""
        from streamtide.state.versioned import (
            VersionedBytesStoreSupplier,
            VersionedKeyValueStoreBuilder,
        )

        if not isinstance(supplier, VersionedBytesStoreSupplier):
            raise TopologyError(
                f"versioned_key_value_store_builder needs a versioned store supplier "
                f"(Stores.persistent_versioned_key_value_store), got {supplier!r}"
            )
        return VersionedKeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def session_store_builder(
        name: str,
        retention: Duration,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        *,
        kind: str = "rocksdb",
    ) -> SessionStoreBuilder:
        """A session store (``find_sessions``, ``fetch``, ``put``, ``remove``) for processors;
        sessions ending more than ``retention`` before stream time expire."""
        from streamtide.state.session_store import SessionStoreBuilder

        return SessionStoreBuilder(
            KeyValueBytesStoreSupplier(_check_name(name), kind),
            non_negative_millis(retention, "retention"),
            key_serde,
            value_serde,
        )

    @staticmethod
    def window_store_builder(
        name: str,
        retention: Duration,
        window_size: Duration,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        *,
        kind: str = "rocksdb",
    ) -> WindowStoreBuilder:
        """A window store (values per key and window start) for processors; windows ending
        more than ``retention`` before stream time expire."""
        from streamtide.state.window_store import WindowStoreBuilder

        size = non_negative_millis(window_size, "window_size")
        if size == 0:
            raise ValueError("window_size must be positive")
        return WindowStoreBuilder(
            KeyValueBytesStoreSupplier(_check_name(name), kind),
            size,
            non_negative_millis(retention, "retention"),
            key_serde,
            value_serde,
        )

    @staticmethod
    def key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> KeyValueStoreBuilder:
        return KeyValueStoreBuilder(supplier, key_serde, value_serde)
