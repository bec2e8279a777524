"""Dedup ids: how a deduplication turns a record into the bytes it compares, and back.

Dedup ids are compared as bytes:

- ``deduplicate_by_key``: the serialized key.
- ``deduplicate_by_key_value``: the serialized key, length prefixed, then the serialized id.
- ``deduplicate``: the serialized id. Before the repartition, an id-select node computes the id
  once and writes ``key = id bytes``, ``value = (key bytes, value bytes)`` (a small
  length-prefixed pair) to ``<application_id>-<name>-repartition``, so equal ids meet in one
  task and are partitioned by their bytes; the dedup node behind it restores the original key
  and value, so downstream sees the records unchanged.

Without an id serde, str ids are serialized as UTF-8 (as ``Serdes.string()``), int ids as
8-byte longs (``Serdes.long()``) and bytes ids as they are; ids of other types fall back to the
task's default key serde, and an id that serde rejects fails with an error naming the operator
and ``Deduplicated.with_id_serde``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streamtide.errors import SerdeError, TopologyError
from streamtide.processor.api import ProcessorContext
from streamtide.serde import Serde

IdSelector = Callable[[Any, Any], Any]

_U32 = struct.Struct(">I")


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

    def id_for(self, key: Any, value: Any) -> bytes | None:
        """The dedup id bytes of a record, or None when it must pass without deduplication."""
        if self.operation == "deduplicate_by_key":
            return _serialize_id(self.key_serde, key, self.operation)  # type: ignore[arg-type]
        if self.operation == "deduplicate_by_key_value":
            if key is None:
                return None
            dedup_id = self.id_selector(key, value)  # type: ignore[misc]
            if dedup_id is None:
                return None
            key_bytes = self.key_serde.serialize(key)  # type: ignore[union-attr]
            id_bytes = _serialize_id(self.id_serde, dedup_id, self.operation, self.typed_ids)  # type: ignore[arg-type]
            return _U32.pack(len(key_bytes)) + key_bytes + id_bytes  # type: ignore[arg-type, operator]
        return key  # deduplicate: the id bytes are the key

    def restore(self, pair: bytes) -> tuple[Any, Any]:
        """``deduplicate``: the original key and value from a repartition record's value."""
        key, value = unpack_pair(pair)
        return (
            self.key_serde.deserialize(key),  # type: ignore[union-attr]
            self.value_serde.deserialize(value),  # type: ignore[union-attr]
        )

    def select(self, key: Any, value: Any) -> tuple[bytes | None, bytes]:
        """``deduplicate``, before the repartition: the id bytes and the packed pair."""
        dedup_id = self.id_selector(key, value)  # type: ignore[misc]
        id_bytes = _serialize_id(self.id_serde, dedup_id, self.operation, self.typed_ids)  # type: ignore[arg-type]
        pair = pack_pair(
            self.key_serde.serialize(key),  # type: ignore[union-attr]
            self.value_serde.serialize(value),  # type: ignore[union-attr]
        )
        return id_bytes, pair
