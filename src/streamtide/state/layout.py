"""Stores kept entirely inside one inner ``KeyValueBytesStore``.

The typed key-value, window, session and dedup stores are layouts: every entry lives in an
ordered bytes store (whatever kind the supplier made, changelogged or not), so their lifecycle
is that store's. The changelogging wrapper shares it too. This module holds that part once.
"""

from __future__ import annotations

from typing import Any

from streamtide.errors import StoreError
from streamtide.processor.api import StateStore, StateStoreContext
from streamtide.serde import Serde
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.timestamped import TimestampedValueSerde


class BytesLayoutStore(StateStore):
    """A store over ``inner``: it takes its name from it and opens, flushes and closes with it."""

    #: how error messages name the store, as in "window store 'w' does not accept a None key"
    label = "store"

    def __init__(self, inner: KeyValueBytesStore) -> None:
        self.name = inner.name
        self.inner = inner
        self.persistent = inner.persistent

    def init(self, context: StateStoreContext) -> None:
        self.inner.init(context)

    def _open_inner_standalone(self, *args: Any) -> None:
        """Open ``inner`` without a task (tools, tests), if its kind supports that."""
        opener = getattr(self.inner, "open_standalone", None)
        if opener is None:
            raise StoreError(f"store {self.name!r} cannot be opened without a task")
        opener(*args)

    @property
    def is_open(self) -> bool:
        return self.inner.is_open

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def approximate_num_entries(self) -> int:
        """Entries of the inner store (layouts that store an entry as several keys override)."""
        return self.inner.approximate_num_entries()

    def _none_key_error(self) -> StoreError:
        """What a write or lookup with a None key raises (checked inline: a hot path)."""
        return StoreError(f"{self.label} {self.name!r} does not accept a None key")


class SerdeLayoutStore(BytesLayoutStore):
    """A layout with key and value serdes; those left None are the task's defaults.

    A *timestamped* layout stores each value with a timestamp (``state.timestamped``): its
    ``value_serde`` is then a ``TimestampedValueSerde`` around the given one, so the layout's
    ordinary methods read and write plain values.
    """

    #: whether values are stored with a timestamp (set by the timestamped layouts)
    timestamped = False

    def __init__(
        self,
        inner: KeyValueBytesStore,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> None:
        super().__init__(inner)
        self.key_serde = key_serde
        self.value_serde = self._stored_values(value_serde)

    def init(self, context: StateStoreContext) -> None:
        self.key_serde = self.key_serde or context.default_key_serde
        self.value_serde = self.value_serde or self._stored_values(context.default_value_serde)
        super().init(context)

    def _stored_values(self, serde: Serde | None) -> Serde | None:
        if serde is None or not self.timestamped:
            return serde
        return TimestampedValueSerde(serde)

    def _key_bytes(self, key: Any) -> bytes:
        """The serialized ``key``; a None key is refused."""
        if key is None:
            raise self._none_key_error()
        return self.key_serde.serialize(key)  # type: ignore[union-attr, return-value]
