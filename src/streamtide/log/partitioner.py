"""Key-to-partition mapping, the same as Kafka's default partitioner.

``partition_for_key`` is ``toPositive(murmur2(key)) % partitions`` exactly as Kafka's Java
client computes it, so keyed data lands in the same partition whether it is written through
the file log or (later) a Kafka cluster. It is stable across processes and runs, unlike
Python's ``hash()``.
"""

from __future__ import annotations

import struct

_MASK = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` as a signed int (``Utils.murmur2``)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length - length % 4
    for k in struct.unpack_from(f"<{end // 4}I", data):  # the 4-byte words, little-endian
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[end + 2] << 16
    if tail >= 2:
        h ^= data[end + 1] << 8
    if tail >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` (Kafka's default for keyed records)."""
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    return (murmur2(bytes(key)) & 0x7FFFFFFF) % partitions
