"""How a versioned key-value store lays its record versions out in one ordered bytes store.

Three regions, told apart by their first byte::

    b"L" | key                                    ->  valid_from | value       (latest versions)
    b"M" | name                                   ->  8-byte long              (store metadata)
    b"S" | segment(valid_to) | len(key) | key | valid_from
                                                  ->  valid_to | tag | value   (older versions)

Longs are written order-preserving (``state.encoding``). ``tag`` is ``b"\\x01"`` before a
value and ``b"\\x00"`` for a tombstone, so an empty value and a delete stay apart. A key's
current value lives in the latest region, read with one point lookup; every other version
(and every tombstone) lives in the segment of its ``valid_to``, so a whole segment expires at
once when history retention has passed it, and a key's versions within a segment are
contiguous and ordered by ``valid_from``. The metadata region holds the store's observed
stream time (the largest timestamp ever put), which decides grace and retention.
"""

from __future__ import annotations

import struct

from streamtide.state.encoding import decode_long, encode_key, encode_long

LATEST = b"L"
META = b"M"
HISTORY = b"S"

#: The metadata entry holding the store's observed stream time.
OBSERVED_STREAM_TIME = META + b"observed-stream-time"

_VALUE = b"\x01"
_TOMBSTONE = b"\x00"
_LONG = struct.Struct(">q")

#: Kafka Streams' value for "no timestamp observed yet".
NO_TIMESTAMP = -1


def default_segment_interval(history_retention_ms: int) -> int:
    """Kafka Streams' default segment interval for a history retention: shorter segments for
    short retentions, about a twelfth to a twenty-fourth of it for long ones."""
    if history_retention_ms <= 60_000:
        return max(history_retention_ms // 3, 2_000)
    if history_retention_ms <= 300_000:
        return max(history_retention_ms // 5, 20_000)
    if history_retention_ms <= 3_600_000:
        return max(history_retention_ms // 12, 60_000)
    return max(history_retention_ms // 24, 300_000)


def latest_key(key: bytes) -> bytes:
    return LATEST + key


def encode_latest(valid_from: int, value: bytes) -> bytes:
    return _LONG.pack(valid_from) + value


def decode_latest(raw: bytes) -> tuple[int, bytes]:
    """``(valid_from, value)`` of a latest-region entry."""
    return _LONG.unpack_from(raw)[0], raw[8:]


def segment_bound(segment: int) -> bytes:
    """The first key of ``segment`` in the history region (every entry of it sorts after)."""
    return HISTORY + encode_long(segment)


def history_prefix(segment: int, key: bytes) -> bytes:
    """The common prefix of ``key``'s versions in ``segment``."""
    return HISTORY + encode_long(segment) + encode_key(key)


def history_key(prefix: bytes, valid_from: int) -> bytes:
    return prefix + encode_long(valid_from)


def valid_from_of(raw_key: bytes) -> int:
    """The ``valid_from`` a history key ends with."""
    return decode_long(raw_key, len(raw_key) - 8)


def encode_version(valid_to: int, value: bytes | None) -> bytes:
    if value is None:
        return _LONG.pack(valid_to) + _TOMBSTONE
    return _LONG.pack(valid_to) + _VALUE + value


def decode_version(raw: bytes) -> tuple[int, bytes | None]:
    """``(valid_to, value)`` of a history entry; value None: a tombstone."""
    valid_to = _LONG.unpack_from(raw)[0]
    return valid_to, (raw[9:] if raw[8:9] == _VALUE else None)


def encode_time(timestamp: int) -> bytes:
    return _LONG.pack(timestamp)


def decode_time(raw: bytes | None) -> int:
    return NO_TIMESTAMP if raw is None else _LONG.unpack_from(raw)[0]
