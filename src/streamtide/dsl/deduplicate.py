"""Deduplication operators (KIP-655): ``deduplicate_by_key``, ``..._by_key_value``, ``deduplicate``.

A record is a duplicate when the task has forwarded a record with the same dedup id whose
timestamp is within ``interval`` of its own (both ends inclusive) and that entry has not yet
expired (``stream_time - ts > interval``). The rules are in docs/deduplication.md; the store is
``streamtide.state.dedup.DedupStore``.

Serdes: ``Deduplicated.key_serde`` / ``value_serde`` are the record key and value serdes (as in
``Grouped``), falling back to the stream's, then to the task defaults; ``id_serde`` serializes
what ``id_selector`` returns. How ids become bytes is in ``dsl.dedup_ids``; the operators are
in ``dsl.dedup_operator``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from streamtide.dsl.dedup_ids import (
    DedupIds,
    IdSelector,
    default_id_bytes,
    pack_pair,
    unpack_pair,
)
from streamtide.dsl.dedup_operator import DeduplicateOperator, IdSelectOperator
from streamtide.dsl.kstream import KStream
from streamtide.dsl.params import DEFAULT_STORE_TYPE, ensure_callable
from streamtide.errors import TopologyError
from streamtide.serde import Serde, Serdes
from streamtide.state.dedup import DedupStoreBuilder
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.time import Duration, non_negative_millis

#: The dedup operator under the name earlier releases gave it.
DeduplicateProcessor = DeduplicateOperator

__all__ = [
    "DedupIds",
    "DeduplicateOperator",
    "DeduplicateProcessor",
    "Deduplicated",
    "deduplicate",
    "deduplicate_by_key",
    "deduplicate_by_key_value",
    "default_id_bytes",
    "pack_pair",
    "unpack_pair",
]


def _check_serde(serde: Any, what: str) -> Serde:
    if not isinstance(serde, Serde):
        raise TypeError(f"Deduplicated {what} must be a Serde, got {serde!r}")
    return serde


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise TopologyError(f"a name must be a non-empty string, got {name!r}")
    return name


@dataclass(frozen=True)
class Deduplicated:
    """Name and serdes of a deduplication.

    ``name`` names the processor, its store and (when there is one) the repartition topic
    ``<application_id>-<name>-repartition``. ``key_serde`` and ``value_serde`` are the serdes
    of the records' keys and values (needed after a key change, which forgets the key serde);
    ``id_serde`` serializes the ids ``id_selector`` returns.
    """

    name: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    id_serde: Serde | None = None

    @classmethod
    def as_(cls, name: str) -> Deduplicated:
        return cls(name=_check_name(name))

    @classmethod
    def with_(
        cls, key_serde: Serde | None = None, value_serde: Serde | None = None
    ) -> Deduplicated:
        return cls(
            key_serde=None if key_serde is None else _check_serde(key_serde, "key serde"),
            value_serde=None if value_serde is None else _check_serde(value_serde, "value serde"),
        )

    def with_name(self, name: str) -> Deduplicated:
        return replace(self, name=_check_name(name))

    def with_key_serde(self, serde: Serde) -> Deduplicated:
        return replace(self, key_serde=_check_serde(serde, "key serde"))

    def with_value_serde(self, serde: Serde) -> Deduplicated:
        return replace(self, value_serde=_check_serde(serde, "value serde"))

    def with_id_serde(self, serde: Serde) -> Deduplicated:
        """Serde of the ids of ``deduplicate_by_key_value`` and ``deduplicate``."""
        return replace(self, id_serde=_check_serde(serde, "id serde"))


# ---- building the operators ----------------------------------------------------------------


def _options(
    interval: Duration, deduplicated: Deduplicated | None, operation: str
) -> tuple[int, Deduplicated]:
    interval_ms = non_negative_millis(interval, f"{operation} interval")
    if deduplicated is None:
        return interval_ms, Deduplicated()
    if not isinstance(deduplicated, Deduplicated):
        raise TypeError(f"{operation}: expected a Deduplicated, got {deduplicated!r}")
    return interval_ms, deduplicated


def _add_dedup(
    stream: KStream,
    deduplicated: Deduplicated,
    interval_ms: int,
    ids: DedupIds,
    repartition: Callable[[str], KStream],
) -> str:
    """Names the nodes, repartitions (through ``repartition(base_name)``), adds node + store."""
    builder = stream.builder
    if deduplicated.name is not None:
        name = store_name = deduplicated.name
    else:
        name = builder.new_name("KSTREAM-DEDUPLICATE-")
        store_name = builder.new_name("KSTREAM-DEDUPLICATE-STATE-STORE-")
    source = repartition(name)
    topology = builder.topology
    topology.add_processor(
        name, lambda: DeduplicateOperator(store_name, interval_ms, ids), source.node
    )
    supplier = KeyValueBytesStoreSupplier(store_name, DEFAULT_STORE_TYPE)
    topology.add_state_store(DedupStoreBuilder(supplier), name)
    return name


def _repartition_by_key(
    stream: KStream, key_serde: Serde | None, value_serde: Serde | None
) -> Callable[[str], KStream]:
    """The stream itself, or sent through ``<name>-repartition`` if its key was changed;
    records with a None key go through too (they are forwarded, never deduplicated)."""

    def repartition(base_name: str) -> KStream:
        if not stream.repartition_required:
            return stream
        return stream.through_repartition_topic(
            base_name, key_serde, value_serde, drop_null_keys=False
        )

    return repartition


def deduplicate_by_key(
    stream: KStream, interval: Duration, deduplicated: Deduplicated | None = None
) -> KStream:
    """Drop records whose key was seen within ``interval`` (see the module docstring)."""
    interval_ms, options = _options(interval, deduplicated, "deduplicate_by_key")
    key_serde = options.key_serde or stream.key_serde
    value_serde = options.value_serde or stream.value_serde
    ids = DedupIds("deduplicate_by_key", key_serde, key_serde)
    repartition = _repartition_by_key(stream, key_serde, value_serde)
    name = _add_dedup(stream, options, interval_ms, ids, repartition)
    return KStream(stream.builder, name, key_serde, value_serde, False)


def deduplicate_by_key_value(
    stream: KStream,
    id_selector: IdSelector,
    interval: Duration,
    deduplicated: Deduplicated | None = None,
) -> KStream:
    """Drop records whose (key, ``id_selector(key, value)``) was seen within ``interval``."""
    ensure_callable(id_selector, "deduplicate_by_key_value id_selector")
    interval_ms, options = _options(interval, deduplicated, "deduplicate_by_key_value")
    key_serde = options.key_serde or stream.key_serde
    value_serde = options.value_serde or stream.value_serde
    ids = DedupIds("deduplicate_by_key_value", key_serde, options.id_serde, None, id_selector)
    repartition = _repartition_by_key(stream, key_serde, value_serde)
    name = _add_dedup(stream, options, interval_ms, ids, repartition)
    return KStream(stream.builder, name, key_serde, value_serde, False)


def deduplicate(
    stream: KStream,
    id_selector: IdSelector,
    interval: Duration,
    deduplicated: Deduplicated | None = None,
) -> KStream:
    """Drop records whose ``id_selector(key, value)`` was seen within ``interval`` in any
    partition: repartitions by the id first. The result keeps keys and values but is
    partitioned by id, so a later key-based operation repartitions again."""
    ensure_callable(id_selector, "deduplicate id_selector")
    interval_ms, options = _options(interval, deduplicated, "deduplicate")
    key_serde = options.key_serde or stream.key_serde
    value_serde = options.value_serde or stream.value_serde
    ids = DedupIds("deduplicate", key_serde, options.id_serde, value_serde, id_selector)
    builder = stream.builder

    def repartition(base_name: str) -> KStream:
        select = f"{base_name}-id-select"
        builder.topology.add_processor(select, lambda: IdSelectOperator(ids), stream.node)
        keyed = KStream(builder, select, Serdes.bytes(), Serdes.bytes(), True)
        return keyed.through_repartition_topic(
            base_name, Serdes.bytes(), Serdes.bytes(), drop_null_keys=False
        )

    name = _add_dedup(stream, options, interval_ms, ids, repartition)
    return KStream(builder, name, key_serde, value_serde, True)
