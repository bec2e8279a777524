"""What a stateful operator keeps in memory for one batch: keys by identity, values serialized.

Read once, write once (``processor.operator``): an operator reads a key's state on the batch's
first row that needs it and keeps it until the batch is written back. Keys are kept by their
serialized bytes, which is how the store compares them (a string key by its text: the same
identity, found without serializing). Values are kept as the store holds them, serialized, so
an aggregator that changes its aggregate in place cannot alter what the operator emitted;
values the serde is known to give back exactly (``serde.exact_values``) are kept as they are
too, which spares deserializing them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from streamtide.dsl.processors import count_aggregator, count_initializer, count_merger
from streamtide.serde import Serde, StringSerde, exact_values
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.transaction import WriteBuffer

#: Stands for a kept value that must be deserialized from its bytes to be read.
UNREAD: Any = object()


def is_count(
    initializer: Callable[[], Any] | Any,
    aggregator: Callable[[Any, Any, Any], Any] | None,
    merger: Callable[[Any, Any, Any], Any] | None = None,
) -> bool:
    """Whether these are count's functions: then an operator may inline them (the same
    additions in the same order), and reads its input values only to test them for None."""
    return (
        initializer is count_initializer
        and aggregator is count_aggregator
        and merger in (None, count_merger)
    )


class KeptState:
    """How one operator keeps its store's keys and values in memory (see the module
    docstring)."""

    def __init__(
        self,
        key_serde: Serde,
        value_serde: Serde,
        initializer: Callable[[], Any] | Any = None,
        aggregator: Callable[[Any, Any, Any], Any] | None = None,
        merger: Callable[[Any, Any, Any], Any] | None = None,
    ) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.string_keys = type(key_serde) is StringSerde
        self.exact = exact_values(value_serde)
        #: a count (its functions may be inlined: the same additions in the same order)
        self.counting = is_count(initializer, aggregator, merger)

    def ident(self, key: Any) -> tuple[Any, bytes]:
        """The key's identity in memory (its text for a string key, else its bytes) and its
        bytes."""
        if self.string_keys and key.__class__ is str:
            return key, key.encode("utf-8")
        key_bytes: bytes = self.key_serde.serialize(key)  # type: ignore[assignment]
        return (key_bytes.decode("utf-8") if self.string_keys else key_bytes), key_bytes

    def ident_of(self, key_bytes: bytes) -> Any:
        """The identity of a serialized key."""
        return key_bytes.decode("utf-8") if self.string_keys else key_bytes

    def keep(self, value: Any) -> Any:
        """What to keep next to a value's bytes: itself, or ``UNREAD``."""
        return value if value.__class__ in self.exact else UNREAD

    def read(self, raw: bytes | None, kept: Any) -> Any:
        """A kept value: itself, or deserialized from its bytes."""
        return self.value_serde.deserialize(raw) if kept is UNREAD else kept


class StagedWrites:
    """A bytes store as one batch sees it: the batch's writes kept in memory over the store
    (reads see them, range scans merged with them) and written back once, with ``write_back``
    (for an operator whose state is a layout of its own over a bytes store, such as the
    suppression buffer)."""

    def __init__(self, inner: KeyValueBytesStore) -> None:
        self.inner = inner
        self._writes = WriteBuffer()

    def get(self, key: bytes) -> bytes | None:
        found, value = self._writes.lookup(key)
        return value if found else self.inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._writes.put(key, value)

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        below = self.inner.range(from_key, to_key)
        if not self._writes:
            return below
        return self._writes.overlay(below, from_key, to_key)

    def write_back(self) -> None:
        """Hand the batch's writes to the store, in key order."""
        if self._writes:
            self.inner.put_all(self._writes.items())
            self._writes.clear()
