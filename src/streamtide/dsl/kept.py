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

from collections.abc import Callable
from typing import Any

from streamtide.dsl.processors import count_aggregator, count_initializer, count_merger
from streamtide.serde import Serde, StringSerde, exact_values

#: Stands for a kept value that must be deserialized from its bytes to be read.
UNREAD: Any = object()


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
        self.counting = (
            initializer is count_initializer
            and aggregator is count_aggregator
            and merger in (None, count_merger)
        )

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

    def read(self, raw: bytes, kept: Any) -> Any:
        """A kept value: itself, or deserialized from its bytes."""
        return self.value_serde.deserialize(raw) if kept is UNREAD else kept
