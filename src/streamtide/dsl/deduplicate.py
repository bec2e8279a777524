"""Deduplication operators (KIP-655): ``deduplicate_by_key``, ``..._by_key_value``, ``deduplicate``.

A record is a duplicate when the task has forwarded a record with the same dedup id whose
timestamp is within ``interval`` of its own (both ends inclusive) and that entry has not yet
expired (``stream_time - ts > interval``). The rules are in docs/deduplication.md; the store is
``streamtide.state.dedup.DedupStore``.

Serdes: ``Deduplicated.key_serde`` / ``value_serde`` are the record key and value serdes (as in
``Grouped``), falling back to the stream's, then to the task defaults; ``id_serde`` serializes
what ``id_selector`` returns. Without one, str ids are serialized as UTF-8 (as
``Serdes.string()``), int ids as 8-byte longs (``Serdes.long()``) and bytes ids as they are;
ids of other types fall back to the task's default key serde, and an id that serde rejects
fails with an error naming the operator and ``Deduplicated.with_id_serde``. Dedup ids are
compared as bytes:

- ``deduplicate_by_key``: the serialized key.
- ``deduplicate_by_key_value``: the serialized key, length prefixed, then the serialized id.
- ``deduplicate``: the serialized id. Before the repartition, an id-select node computes the id
  once and writes ``key = id bytes``, ``value = (key bytes, value bytes)`` (a small
  length-prefixed pair) to ``<application_id>-<name>-repartition``, so equal ids meet in one
  task and are partitioned by their bytes; the dedup node behind it restores the original key
  and value, so downstream sees the records unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from streamtide.dsl.kstream import KStream
from streamtide.dsl.params import DEFAULT_STORE_TYPE, ensure_callable
from streamtide.errors import SerdeError, TopologyError
from streamtide.processor.api import Processor, ProcessorContext
from streamtide.record import Record
from streamtide.serde import Serde, Serdes
from streamtide.state.dedup import DedupStore, DedupStoreBuilder
from streamtide.state.stores import KeyValueBytesStoreSupplier
from streamtide.time import Duration, non_negative_millis

IdSelector = Callable[[Any, Any], Any]

_U32 = struct.Struct(">I")


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


# ---- the (key, value) pair carried through the repartition topic of ``deduplicate`` ------


def pack_pair(key: bytes | None, value: bytes | None) -> bytes:
    """``flags | [len(key) | key] | [value]``; flags bit 0: key present, bit 1: value present."""
    flags = (key is not None) | ((value is not None) << 1)
    head = bytes([flags])
    if key is not None:
        head += _U32.pack(len(key)) + key
    return head + (value or b"")


def unpack_pair(data: bytes) -> tuple[bytes | None, bytes | None]:
    if not data:
        raise SerdeError("a deduplicate repartition record has an empty value")
    flags = data[0]
    position = 1
    key = None
    if flags & 1:
        (length,) = _U32.unpack_from(data, 1)
        position = 5 + length
        key = bytes(data[5:position])
    value = bytes(data[position:]) if flags & 2 else None
    return key, value


# ---- dedup ids -----------------------------------------------------------------------------


def _task_default(context: ProcessorContext, attribute: str) -> Serde:
    serde = getattr(context, attribute, None)
    if not isinstance(serde, Serde):
        raise TopologyError(f"the task context has no {attribute} to fall back on")
    return serde


_I64 = struct.Struct(">q")


def default_id_bytes(dedup_id: Any) -> bytes | None:
    """The bytes of a str, int or bytes id without an id serde (None: another type)."""
    cls = dedup_id.__class__
    if cls is str:
        return dedup_id.encode("utf-8")
    if cls is bytes:
        return dedup_id
    if cls is int and -(2**63) <= dedup_id < 2**63:
        return _I64.pack(dedup_id)
    if isinstance(dedup_id, (bytes, bytearray, memoryview)):
        return bytes(dedup_id)
    return None


def _serialize_id(serde: Serde, dedup_id: Any, operation: str, typed: bool = False) -> bytes | None:
    """``dedup_id`` as bytes; with ``typed`` (no id serde given) str, int and bytes ids are
    serialized by type and ``serde`` is the fallback for other types."""
    if typed:
        if dedup_id is None:
            return None
        data = default_id_bytes(dedup_id)
        if data is not None:
            return data
    try:
        return serde.serialize(dedup_id)
    except SerdeError as exc:
        method = "with_key_serde" if operation == "deduplicate_by_key" else "with_id_serde"
        accepted = " (without it, ids must be str, int or bytes)" if typed else ""
        raise SerdeError(
            f"{operation}: cannot serialize the dedup id {dedup_id!r} of type "
            f"{type(dedup_id).__name__} with {serde!r} ({exc}); give its serde with "
            f"Deduplicated.{method}(...){accepted}"
        ) from exc


class DedupIds:
    """How one operator turns a record into its dedup id and into the record to forward."""

    def __init__(
        self,
        operation: str,
        key_serde: Serde | None,
        id_serde: Serde | None,
        value_serde: Serde | None = None,
        id_selector: IdSelector | None = None,
    ) -> None:
        self.operation = operation
        self.key_serde = key_serde
        self.id_serde = id_serde
        self.value_serde = value_serde
        self.id_selector = id_selector
        self.typed_ids = id_serde is None and operation != "deduplicate_by_key"

    def resolved(self, context: ProcessorContext) -> DedupIds:
        """A copy for one task, with serdes left open filled from the task's defaults."""
        default_key = _task_default(context, "default_key_serde")
        resolved = DedupIds(
            self.operation,
            self.key_serde or default_key,
            self.id_serde or default_key,
            self.value_serde or _task_default(context, "default_value_serde"),
            self.id_selector,
        )
        resolved.typed_ids = self.typed_ids
        return resolved

    def id_of(self, record: Record) -> bytes | None:
        """The dedup id bytes, or None when the record must pass without deduplication."""
        if self.operation == "deduplicate_by_key":
            return _serialize_id(self.key_serde, record.key, self.operation)  # type: ignore[arg-type]
        if self.operation == "deduplicate_by_key_value":
            if record.key is None:
                return None
            dedup_id = self.id_selector(record.key, record.value)  # type: ignore[misc]
            if dedup_id is None:
                return None
            key = self.key_serde.serialize(record.key)  # type: ignore[union-attr]
            id_bytes = _serialize_id(self.id_serde, dedup_id, self.operation, self.typed_ids)  # type: ignore[arg-type]
            return _U32.pack(len(key)) + key + id_bytes  # type: ignore[arg-type, operator]
        return record.key  # deduplicate: the id bytes are the repartition key

    def output(self, record: Record) -> Record:
        """The record to forward: unchanged, or restored from the repartition pair."""
        if self.operation != "deduplicate":
            return record
        key, value = unpack_pair(record.value)
        return Record(
            self.key_serde.deserialize(key),  # type: ignore[union-attr]
            self.value_serde.deserialize(value),  # type: ignore[union-attr]
            record.timestamp,
            record.headers,
        )


class IdSelectProcessor(Processor):
    """Before the repartition of ``deduplicate``: key = id bytes, value = (key, value) pair."""

    def __init__(self, ids: DedupIds) -> None:
        self.ids = ids

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.ids = self.ids.resolved(context)

    def process(self, record: Record) -> None:
        ids = self.ids
        dedup_id = ids.id_selector(record.key, record.value)  # type: ignore[misc]
        id_bytes = _serialize_id(ids.id_serde, dedup_id, ids.operation, ids.typed_ids)  # type: ignore[arg-type]
        pair = pack_pair(
            ids.key_serde.serialize(record.key),  # type: ignore[union-attr]
            ids.value_serde.serialize(record.value),  # type: ignore[union-attr]
        )
        self.context.forward(Record(id_bytes, pair, record.timestamp, record.headers))


class DeduplicateProcessor(Processor):
    """Forwards a record unless a stored record with the same id is within the interval."""

    def __init__(self, store_name: str, interval_ms: int, ids: DedupIds) -> None:
        self.store_name = store_name
        self.interval = interval_ms
        self.ids = ids

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.ids = self.ids.resolved(context)
        store = context.get_state_store(self.store_name)
        if not isinstance(store, DedupStore):
            raise TopologyError(
                f"{self.ids.operation}: store {self.store_name!r} is not a dedup store"
            )
        self.store = store

    def process(self, record: Record) -> None:
        context = self.context
        dedup_id = self.ids.id_of(record)
        if dedup_id is None:
            context.forward(self.ids.output(record))
            return
        interval = self.interval
        cutoff = context.current_stream_time_ms() - interval
        self.store.purge_expired(cutoff)  # entries with stream_time - ts > interval
        t = record.timestamp
        found = self.store.find(dedup_id, t - interval, t + interval)
        origin = context.record_metadata()
        if not found:
            if t >= cutoff:  # a late record is forwarded but not stored
                self.store.put(dedup_id, t, origin)
        elif not any(entry.is_same_record(origin) for entry in found):
            context.metrics.increment("dropped-duplicates")
            return
        context.forward(self.ids.output(record))


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
        name, lambda: DeduplicateProcessor(store_name, interval_ms, ids), source.node
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
        builder.topology.add_processor(select, lambda: IdSelectProcessor(ids), stream.node)
        keyed = KStream(builder, select, Serdes.bytes(), Serdes.bytes(), True)
        return keyed.through_repartition_topic(
            base_name, Serdes.bytes(), Serdes.bytes(), drop_null_keys=False
        )

    name = _add_dedup(stream, options, interval_ms, ids, repartition)
    return KStream(builder, name, key_serde, value_serde, True)
