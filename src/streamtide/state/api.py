"""Key-value store interfaces.

Two levels, as in Kafka Streams: a *bytes* store (in-memory or RocksDB, ordered by the
unsigned byte order of keys) and a *typed* store that users see, which applies serdes on the
way in and out. Range and prefix queries follow the serialized key order.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from streamtide.processor.api import StateStore

K = TypeVar("K")
V = TypeVar("V")


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class KeyValueBytesStore(StateStore):
    """An ordered map from bytes to bytes."""

    kind = "key_value"

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    @abstractmethod
    def put(self, key: bytes, value: bytes | None) -> None:
        """Store ``value`` under ``key``; a None value deletes the key."""

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def delete(self, key: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is not None:
            self.put(key, None)
        return existing

    @abstractmethod
    def range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key <= to_key`` in key order (None: unbounded)."""

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries whose key starts with ``prefix``, in key order."""
        for key, value in self.range(prefix, prefix_end(prefix)):
            if not key.startswith(prefix):
                return
            yield key, value

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self.range(None, None)

    @abstractmethod
    def approximate_num_entries(self) -> int: ...

    def delete_range(self, from_key: bytes | None, to_key: bytes | None) -> None:
        """Delete every key with ``from_key <= key < to_key`` (end exclusive, as in RocksDB;
        None: unbounded). Segmented stores drop a whole segment with one call."""
        doomed = []
        for key, _ in self.range(from_key, to_key):
            if to_key is not None and key >= to_key:
                break
            doomed.append(key)
        for key in doomed:
            self.put(key, None)

    def clear(self) -> None:
        """Delete every entry (used when local state must be rebuilt)."""
        for key in [k for k, _ in self.all()]:
            self.put(key, None)


class KeyValueStore(StateStore, Generic[K, V]):
    """The typed key-value store processors and users see."""

    kind = "key_value"

    @abstractmethod
    def get(self, key: K) -> V | None: ...

    @abstractmethod
    def put(self, key: K, value: V | None) -> None:
        """Store ``value``; None deletes the key."""

    @abstractmethod
    def put_if_absent(self, key: K, value: V) -> V | None:
        """Store ``value`` only if ``key`` is absent; return the existing value or None."""

    @abstractmethod
    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None: ...

    @abstractmethod
    def delete(self, key: K) -> V | None:
        """Remove ``key``; return the value it had, or None."""

    @abstractmethod
    def range(self, from_key: K | None, to_key: K | None) -> Iterator[tuple[K, V]]:
        """Entries between the two keys, both inclusive, in serialized-key order."""

    @abstractmethod
    def prefix_scan(self, prefix: Any, prefix_serde: Any = None) -> Iterator[tuple[K, V]]:
        """Entries whose serialized key starts with the serialized ``prefix``."""

    @abstractmethod
    def all(self) -> Iterator[tuple[K, V]]: ...

    @abstractmethod
    def approximate_num_entries(self) -> int: ...
