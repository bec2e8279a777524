"""Small option objects of the DSL: Consumed, Produced, Grouped, Named, Materialized, ...

Each has the Kafka Streams factory names (``with_``, ``as_``) and returns new objects from
its ``with_*`` methods, so a shared instance is never changed by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streamtide.errors import TopologyError
from streamtide.processor.nodes import Partitioner
from streamtide.serde import Serde
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.state.versioned import VersionedBytesStoreSupplier
from streamtide.time import Duration, non_negative_millis
from streamtide.timestamp_extractor import TimestampExtractor

#: The store kind DSL operators use when ``Materialized`` does not name one.
DEFAULT_STORE_TYPE = "rocksdb"


def _name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise TopologyError(f"a name must be a non-empty string, got {name!r}")
    return name


@dataclass(frozen=True)
class Named:
    """A name for the processor node an operation adds."""

    name: str | None = None

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(_name(name))


@dataclass(frozen=True)
class Consumed:
    """Serdes, timestamp extractor and node name for reading a topic.

    ``timestamp_extractor(record, partition_time) -> int`` gives each consumed record its
    timestamp (see ``streamtide.timestamp_extractor``); None uses the config's
    ``default_timestamp_extractor``.
    """

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None
    timestamp_extractor: TimestampExtractor | None = None

    @classmethod
    def with_(
        cls,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        timestamp_extractor: TimestampExtractor | None = None,
    ) -> Consumed:
        if timestamp_extractor is not None:
            ensure_callable(timestamp_extractor, "timestamp_extractor")
        return cls(key_serde, value_serde, timestamp_extractor=timestamp_extractor)

    def with_timestamp_extractor(self, timestamp_extractor: TimestampExtractor) -> Consumed:
        ensure_callable(timestamp_extractor, "timestamp_extractor")
        return replace(self, timestamp_extractor=timestamp_extractor)

    @classmethod
    def as_(cls, name: str) -> Consumed:
        return cls(name=_name(name))

    def with_name(self, name: str) -> Consumed:
        return replace(self, name=_name(name))


@dataclass(frozen=True)
class Produced:
    """Serdes, partitioner and node name for writing a topic."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    partitioner: Partitioner | None = None
    name: str | None = None

    @classmethod
    def with_(
        cls,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        partitioner: Partitioner | None = None,
    ) -> Produced:
        return cls(key_serde, value_serde, partitioner)

    @classmethod
    def as_(cls, name: str) -> Produced:
        return cls(name=_name(name))

    def with_name(self, name: str) -> Produced:
        return replace(self, name=_name(name))


@dataclass(frozen=True)
class Grouped:
    """Serdes and the repartition topic name of a grouping."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde: Serde | None = None, value_serde: Serde | None = None) -> Grouped:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Grouped:
        return cls(name=_name(name))

    def with_name(self, name: str) -> Grouped:
        return replace(self, name=_name(name))


@dataclass(frozen=True)
class Joined:
    """Serdes and name of a stream-table join: the key, the stream's values and the
    table's values (``other_value_serde``); the serdes are used if the stream must be
    repartitioned before the join."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def with_(
        cls,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        other_value_serde: Serde | None = None,
    ) -> Joined:
        return cls(key_serde, value_serde, other_value_serde)

    @classmethod
    def as_(cls, name: str) -> Joined:
        return cls(name=_name(name))

    def with_name(self, name: str) -> Joined:
        return replace(self, name=_name(name))

    def with_key_serde(self, serde: Serde) -> Joined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Joined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Serde) -> Joined:
        return replace(self, other_value_serde=serde)


@dataclass(frozen=True)
class TableJoined:
    """Name and partitioners of a foreign-key table join (KIP-775): ``partitioner`` places
    the left table's keys (the answers go back by it instead of to the partition the
    subscription came from), ``other_partitioner`` the foreign table's (the subscriptions go
    out by it). A partitioner is called ``(key, None, key_bytes, num_partitions)``."""

    partitioner: Partitioner | None = None
    other_partitioner: Partitioner | None = None
    name: str | None = None

    @classmethod
    def with_(
        cls, partitioner: Partitioner | None = None, other_partitioner: Partitioner | None = None
    ) -> TableJoined:
        return cls(partitioner, other_partitioner)

    @classmethod
    def as_(cls, name: str) -> TableJoined:
        return cls(name=_name(name))

    def with_name(self, name: str) -> TableJoined:
        return replace(self, name=_name(name))


@dataclass(frozen=True)
class Repartitioned:
    """Name, serdes, partition count and partitioner of an explicit ``KStream.repartition``.
    Without a count the topic gets the upstream's (or, before a join, the other side's)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None
    num_partitions: int | None = None
    #: ``partitioner(key, value, key_bytes, num_partitions) -> partition or None``
    partitioner: Partitioner | None = None

    @classmethod
    def with_(
        cls, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> Repartitioned:
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Repartitioned:
        return cls(name=_name(name))

    def with_name(self, name: str) -> Repartitioned:
        return replace(self, name=_name(name))

    def with_number_of_partitions(self, num_partitions: int) -> Repartitioned:
        if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
            raise TopologyError(f"num_partitions must be an int, got {num_partitions!r}")
        if num_partitions < 1:
            raise TopologyError(f"num_partitions must be at least 1, got {num_partitions}")
        return replace(self, num_partitions=num_partitions)

    def with_stream_partitioner(self, partitioner: Partitioner) -> Repartitioned:
        """Place each record with ``partitioner`` (None from it: by the serialized key)."""
        if not callable(partitioner):
            raise TopologyError(f"a stream partitioner must be callable, got {partitioner!r}")
        return replace(self, partitioner=partitioner)

    @classmethod
    def number_of_partitions(cls, num_partitions: int) -> Repartitioned:
        return cls().with_number_of_partitions(num_partitions)


@dataclass(frozen=True)
class Materialized:
    """How an aggregation's result is stored: name, serdes, store type, logging, caching."""

    store_name: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    store_type: str | None = None
    logging_enabled: bool = True
    caching_enabled: bool = True
    retention: int | None = None
    #: a versioned store supplier (``Stores.persistent_versioned_key_value_store``): the
    #: table is kept in a versioned store (source tables and ``to_table`` only)
    versioned: VersionedBytesStoreSupplier | None = None

    @classmethod
    def as_(cls, store: str | KeyValueBytesStoreSupplier) -> Materialized:
        """Name the store, or give its supplier (its name and kind; a versioned supplier
        makes a source table or ``to_table`` versioned)."""
        if isinstance(store, KeyValueBytesStoreSupplier):
            versioned = store if isinstance(store, VersionedBytesStoreSupplier) else None
            return cls(store_name=store.name, store_type=store.kind, versioned=versioned)
        return cls(store_name=_name(store))

    @classmethod
    def with_(
        cls, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> Materialized:
        return cls(key_serde=key_serde, value_serde=value_serde)

    def with_key_serde(self, serde: Serde) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Materialized:
        return replace(self, value_serde=serde)

    def with_store_type(self, store_type: str) -> Materialized:
        return replace(self, store_type=_name(store_type))

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging_enabled=False)

    def with_logging_enabled(self) -> Materialized:
        return replace(self, logging_enabled=True)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching_enabled=False)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching_enabled=True)

    def with_retention(self, retention: Duration) -> Materialized:
        return replace(self, retention=non_negative_millis(retention, "retention"))

    def resolved_store_type(self) -> str:
        """The kind of a plain store; a versioned supplier is refused here (only source
        tables and ``to_table`` take one, and they check ``versioned`` first)."""
        if self.versioned is not None:
            raise TopologyError(
                f"store {self.store_name!r} is versioned: only a source table "
                f"(StreamsBuilder.table) or KStream.to_table can be materialized in a "
                f"versioned store"
            )
        return self.store_type or DEFAULT_STORE_TYPE


def named_of(named: Named | str | None) -> str | None:
    """Accept ``Named``, a plain string, or None wherever the DSL takes a node name."""
    if named is None:
        return None
    if isinstance(named, Named):
        return named.name
    return _name(named)


def ensure_callable(fn: Any, what: str) -> Any:
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {fn!r}")
    return fn
