"""Stored values with a timestamp: the value-and-timestamp format of timestamped stores.

A timestamped store (the DSL's aggregation stores) keeps, with each value, the timestamp of
the result it belongs to. Layout of a stored value::

    0xF1 | timestamp (8 bytes, signed big-endian) | crc32 of the 9 bytes before (4) | value

``0xF1`` marks format 1. A store written before timestamps existed holds plain values, and a
changelog or a local store may hold both kinds after an upgrade, so every value describes
itself: a value counts as timestamped only if it starts with the marker and carries the
matching checksum of its header; any other value is an old plain value whose timestamp is
unknown (``NO_TIMESTAMP``). A plain value taken for a timestamped one would need the marker
and a 4-byte checksum of the 8 bytes after it at the right places.

``TimestampedValueSerde`` wraps the value serde: its ``serialize``/``deserialize`` are the
plain view (what users read through the store APIs), its ``*_with_timestamp`` methods the
timestamped one (what the DSL's processors use).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, NamedTuple

from streamtide.serde import Serde

#: The timestamp of a value stored without one (Kafka Streams uses -1 too).
NO_TIMESTAMP = -1

FORMAT_MARKER = 0xF1
_HEADER = struct.Struct(">Bq")
_CHECK = struct.Struct(">I")
_HEADER_SIZE = _HEADER.size + _CHECK.size


class ValueAndTimestamp(NamedTuple):
    """A stored value and the timestamp of its result (``NO_TIMESTAMP`` if unknown)."""

    value: Any
    timestamp: int


def encode(value: bytes, timestamp: int) -> bytes:
    """``value`` (serialized) with ``timestamp`` in front, in format 1."""
    header = _HEADER.pack(FORMAT_MARKER, timestamp)
    return header + _CHECK.pack(zlib.crc32(header)) + value


def decode(raw: bytes) -> tuple[bytes, int]:
    """The serialized value and its timestamp; an old plain value has ``NO_TIMESTAMP``."""
    if len(raw) >= _HEADER_SIZE and raw[0] == FORMAT_MARKER:
        header = raw[: _HEADER.size]
        if _CHECK.unpack_from(raw, _HEADER.size)[0] == zlib.crc32(header):
            return raw[_HEADER_SIZE:], _HEADER.unpack(header)[1]
    return raw, NO_TIMESTAMP


class TimestampedValueSerde(Serde[Any]):
    """Values of a timestamped store over ``inner``, the serde of the values themselves.

    ``serialize``/``deserialize`` give the plain view: a plain value is stored with
    ``NO_TIMESTAMP`` and read without its timestamp.
    """

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner
        self.name = f"timestamped {inner.name}"

    def _to_bytes(self, value: Any) -> bytes:
        return encode(self.inner.serialize(value), NO_TIMESTAMP)  # type: ignore[arg-type]

    def _from_bytes(self, data: bytes) -> Any:
        return self.inner.deserialize(decode(data)[0])

    def serialize_with_timestamp(self, value: Any, timestamp: int) -> bytes | None:
        """``value`` stored with ``timestamp``; a None value stays None (a delete)."""
        raw = self.inner.serialize(value)
        return None if raw is None else encode(raw, timestamp)

    def deserialize_with_timestamp(self, data: bytes | None) -> ValueAndTimestamp | None:
        """The value and timestamp of ``data``; None when there is no value."""
        if data is None:
            return None
        raw, timestamp = decode(data)
        return ValueAndTimestamp(self.inner.deserialize(raw), timestamp)

    def __repr__(self) -> str:
        return f"TimestampedValueSerde({self.inner!r})"
