"""Order-preserving byte encodings shared by the store layouts (dedup, window, session).

Keys of a layout are compared as unsigned bytes, so numbers are written so that byte order is
numeric order: a signed long is shifted by 2**63 and written as 8 big-endian bytes. A variable
length key is prefixed with its 4-byte length, so that a key's entries never mix with those of
a longer key it is a prefix of.
"""

from __future__ import annotations

import struct

MIN_LONG = -(1 << 63)
MAX_LONG = (1 << 63) - 1

_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_BIAS = 1 << 63
#: ``encode_long(a) + encode_long(b)`` is ``LONG_PAIR.pack(a + LONG_BIAS, b + LONG_BIAS)``, for
#: a loop that inlines it
LONG_PAIR = struct.Struct(">QQ")
LONG_BIAS = _BIAS


def encode_long(value: int) -> bytes:
    """8 bytes whose unsigned order is the signed order of ``value``."""
    return _U64.pack(value + _BIAS)


def decode_long(data: bytes, offset: int = 0) -> int:
    """The long ``encode_long`` wrote at ``offset``."""
    return _U64.unpack_from(data, offset)[0] - _BIAS


def encode_key(key: bytes) -> bytes:
    """A length-prefixed key, so that one key's entries never mix with a longer key's."""
    return _U32.pack(len(key)) + key


def decode_key(data: bytes, offset: int) -> tuple[bytes, int]:
    """The key at ``offset`` and the offset just after it."""
    length = _U32.unpack_from(data, offset)[0]
    start = offset + 4
    return data[start : start + length], start + length
