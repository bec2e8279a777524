"""What a foreign-key join sends between its two sides (Kafka's SubscriptionWrapper,
SubscriptionResponseWrapper and CombinedKey), and their bytes.

A left row subscribes to its foreign key with a ``Subscription`` sent to the foreign table's
partition of that key; the foreign side answers with a ``Response`` sent back to the left
row's partition. Both carry the hash of the left value the subscription was made for: when
the answer arrives, a left value that changed since makes a different hash and the answer is
dropped as stale. The subscription store is keyed by the combined key (foreign key, primary
key): a 4-byte length of the foreign key's bytes, those bytes, the primary key's bytes, so
that all subscribers of a foreign key are one prefix scan, in the order of their keys' bytes.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

from streamtide.errors import SerdeError
from streamtide.serde import Serde

#: Send nothing back: the row moved to another foreign key (an inner join's unsubscription).
DELETE_KEY_NO_PROPAGATE = 0
#: Unsubscribe and send back a None foreign value (the row was deleted, or a left join's
#: row moved away from this foreign key).
DELETE_KEY_AND_PROPAGATE = 1
#: Subscribe and send back the foreign value, or None when there is none (the foreign key
#: changed: an earlier result must be replaced or retracted).
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
#: Subscribe and send back the foreign value only if there is one (a first subscription).
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3

INSTRUCTIONS = frozenset(range(4))
VERSION = 1
_HEADER = struct.Struct(">BBBi")  # version, instruction, hash present, primary partition
_LENGTH = struct.Struct(">i")
HASH_SIZE = 16


def value_hash(value_bytes: bytes | None) -> bytes | None:
    """The 128-bit hash of a left value's bytes (None: no value)."""
    if value_bytes is None:
        return None
    return hashlib.blake2b(value_bytes, digest_size=HASH_SIZE).digest()


def combined_prefix(foreign_key_bytes: bytes) -> bytes:
    """The prefix of every subscription store key of one foreign key."""
    return _LENGTH.pack(len(foreign_key_bytes)) + foreign_key_bytes


def combined_key(foreign_key_bytes: bytes, primary_key_bytes: bytes) -> bytes:
    """The subscription store key of (foreign key, primary key)."""
    return combined_prefix(foreign_key_bytes) + primary_key_bytes


def primary_key_bytes(combined: bytes) -> bytes:
    """The primary key's bytes of a subscription store key."""
    (length,) = _LENGTH.unpack_from(combined)
    return combined[_LENGTH.size + length :]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A left row's request to the foreign side: ``primary_key`` is the row's serialized key,
    ``primary_partition`` the left partition to answer to."""

    value_hash: bytes | None
    instruction: int
    primary_key: bytes
    primary_partition: int | None


@dataclass(frozen=True, slots=True)
class Response:
    """The foreign side's answer: the foreign value (None: none) for the left value whose
    hash was subscribed."""

    value_hash: bytes | None
    foreign_value: Any
    primary_partition: int | None


def _pack_header(instruction: int, hashed: bytes | None, partition: int | None) -> bytes:
    header = _HEADER.pack(
        VERSION, instruction, hashed is not None, -1 if partition is None else partition
    )
    return header if hashed is None else header + hashed


def _unpack_header(data: bytes, what: str) -> tuple[int, bytes | None, int | None, int]:
    """Instruction, hash, partition and the offset after them."""
    if len(data) < _HEADER.size:
        raise SerdeError(f"a serialized {what} is truncated ({len(data)} bytes)")
    version, instruction, hashed, partition = _HEADER.unpack_from(data)
    if version != VERSION:
        raise SerdeError(f"a serialized {what} has version {version}; this one reads {VERSION}")
    at = _HEADER.size
    value_hash_ = None
    if hashed:
        value_hash_ = bytes(data[at : at + HASH_SIZE])
        at += HASH_SIZE
        if len(value_hash_) != HASH_SIZE:
            raise SerdeError(f"a serialized {what} is truncated ({len(data)} bytes)")
    return instruction, value_hash_, None if partition < 0 else partition, at


class SubscriptionSerde(Serde[Subscription]):
    """A subscription as bytes: version, instruction, hash, partition, the primary key."""

    name = "foreign-key subscription"

    def _to_bytes(self, value: Subscription) -> bytes:
        if value.instruction not in INSTRUCTIONS:
            raise ValueError(f"unknown instruction {value.instruction!r}")
        header = _pack_header(value.instruction, value.value_hash, value.primary_partition)
        return header + value.primary_key

    def _from_bytes(self, data: bytes) -> Subscription:
        instruction, hashed, partition, at = _unpack_header(data, "subscription")
        if instruction not in INSTRUCTIONS:
            raise SerdeError(f"a serialized subscription has unknown instruction {instruction}")
        return Subscription(hashed, instruction, bytes(data[at:]), partition)


class ResponseSerde(Serde[Response]):
    """A response as bytes: version, whether a foreign value follows, hash, partition and
    the foreign value (``inner``; the
    task's default value serde when None)."""

    def __init__(self, inner: Serde[Any] | None) -> None:
        self.inner = inner
        self.name = f"foreign-key response of {inner.name if inner is not None else 'default'}"

    @property
    def inner_serde_unset(self) -> bool:
        """True until the task gives it its default value serde (``resolve_serde``)."""
        return self.inner is None

    def with_inner(self, inner: Serde[Any]) -> ResponseSerde:
        return ResponseSerde(inner)

    def _to_bytes(self, value: Response) -> bytes:
        assert self.inner is not None, "resolve_serde gives it the default value serde first"
        foreign = self.inner.serialize(value.foreign_value)
        # the instruction byte says whether a foreign value follows (b"" may be one)
        header = _pack_header(foreign is not None, value.value_hash, value.primary_partition)
        return header if foreign is None else header + foreign

    def _from_bytes(self, data: bytes) -> Response:
        present, hashed, partition, at = _unpack_header(data, "response")
        assert self.inner is not None, "resolve_serde gives it the default value serde first"
        foreign = self.inner.deserialize(bytes(data[at:])) if present else None
        return Response(hashed, foreign, partition)

    def __repr__(self) -> str:
        return f"ResponseSerde({self.inner!r})"
