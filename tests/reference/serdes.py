"""The byte forms the semantics depend on, written plainly: keys are compared and
partitioned by their serialized bytes (Kafka's default partitioner: murmur2), and values
that cross a topic come back as their serde reads them."""

from __future__ import annotations

import json
import struct
from typing import Any

from streamtide.window import Windowed


def key_bytes(key: Any, serde: str = "string") -> bytes | None:
    """The serialized form of a (non-windowed) key: UTF-8 for strings, 8-byte big-endian
    for longs, compact sorted JSON for json keys."""
    if key is None:
        return None
    if serde == "string":
        return str(key).encode("utf-8")
    if serde == "long":
        return struct.pack(">q", key)
    if serde == "json":
        return json.dumps(key, sort_keys=True, separators=(",", ":")).encode("utf-8")
    raise ValueError(f"no byte form for key serde {serde!r}")


def partition_key_bytes(key: Any, serde: str = "string") -> bytes | None:
    """The bytes a sink partitions by: a windowed key goes by its base key."""
    if isinstance(key, Windowed):
        return key_bytes(key.key, "string")
    return key_bytes(key, serde)


def round_trip(value: Any, serde: str) -> Any:
    """``value`` as it reads back after a write with ``serde``."""
    if value is None:
        return None
    if serde == "json":
        return json.loads(json.dumps(value))
    if serde == "long":
        return int(value)
    if serde in ("string",):
        return str(value)
    if serde in ("windowed", "opaque"):  # opaque: an internal record only the plan reads
        return value
    raise ValueError(f"unknown serde {serde!r}")


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (``Utils.murmur2``), one byte at a time, as a signed int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_of(data: bytes, partitions: int) -> int:
    """Kafka's default partition of a keyed record: ``toPositive(murmur2) % partitions``."""
    return (murmur2(data) & 0x7FFFFFFF) % partitions
