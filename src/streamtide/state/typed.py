"""The typed key-value store: serdes around a bytes store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from streamtide.errors import SerdeError, StoreError
from streamtide.serde import Serde, StringSerde
from streamtide.state.api import KeyValueBytesStore, KeyValueStore
from streamtide.state.layout import SerdeLayoutStore
from streamtide.state.timestamped import ValueAndTimestamp

#: Entries a range read deserializes at once.
_DECODE_CHUNK = 1024


class SerdeKeyValueStore(SerdeLayoutStore, KeyValueStore[Any, Any]):
    """Applies key and value serdes around an ordered bytes store.

    Serdes left as None are taken from the task's defaults when the store is opened.
    """

    def __init__(
        self, inner: KeyValueBytesStore, key_serde: Serde | None, value_serde: Serde | None
    ) -> None:
        super().__init__(inner, key_serde, value_serde)

    def open_standalone(self) -> SerdeKeyValueStore:
        """Open without a task (serdes must have been given)."""
        if self.key_serde is None or self.value_serde is None:
            raise StoreError(f"store {self.name!r} needs serdes to be opened standalone")
        self._open_inner_standalone()
        return self

    def get(self, key: Any) -> Any:
        # (a string key encoded inline: a store read is on every record's path)
        if key.__class__ is str and self.key_serde.__class__ is StringSerde:
            try:
                key_bytes = key.encode("utf-8")
            except UnicodeError:
                key_bytes = self._key_bytes(key)  # the serde's own error
        else:
            key_bytes = self._key_bytes(key)
        return self.value_serde.deserialize(self.inner.get(key_bytes))  # type: ignore[union-attr]

    def put(self, key: Any, value: Any) -> None:
        if key.__class__ is str and self.key_serde.__class__ is StringSerde:
            try:
                key_bytes = key.encode("utf-8")
            except UnicodeError:
                key_bytes = self._key_bytes(key)
        else:
            key_bytes = self._key_bytes(key)
        self.inner.put(key_bytes, self.value_serde.serialize(value))  # type: ignore[union-attr]

    def put_if_absent(self, key: Any, value: Any) -> Any:
        existing = self.inner.put_if_absent(
            self._key_bytes(key),
            self.value_serde.serialize(value),  # type: ignore[union-attr, arg-type]
        )
        return self.value_serde.deserialize(existing)  # type: ignore[union-attr]

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        self.inner.put_all(
            (self._key_bytes(k), self.value_serde.serialize(v))  # type: ignore[union-attr]
            for k, v in entries
        )

    def delete(self, key: Any) -> Any:
        return self.value_serde.deserialize(self.inner.delete(self._key_bytes(key)))  # type: ignore[union-attr]

    def _decode(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        """Deserialized entries, a chunk of ``_DECODE_CHUNK`` at a time (each column at
        once); a chunk with an entry a serde rejects is decoded entry by entry, so every
        entry before it is still yielded before the error."""
        key_serde, value_serde = self.key_serde, self.value_serde
        while chunk := list(islice(entries, _DECODE_CHUNK)):
            keys = [k for k, _ in chunk]
            values = [v for _, v in chunk]
            try:
                decoded = zip(
                    key_serde.deserialize_many(keys), value_serde.deserialize_many(values)
                )  # type: ignore[union-attr]
            except SerdeError:
                kd, vd = key_serde.deserialize, value_serde.deserialize  # type: ignore[union-attr]
                decoded = ((kd(k), vd(v)) for k, v in chunk)
            yield from decoded

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        lo = None if from_key is None else self._key_bytes(from_key)
        hi = None if to_key is None else self._key_bytes(to_key)
        return self._decode(self.inner.range(lo, hi))

    def prefix_scan(
        self, prefix: Any, prefix_serde: Serde | None = None
    ) -> Iterator[tuple[Any, Any]]:
        serde = prefix_serde or self.key_serde
        raw = serde.serialize(prefix)  # type: ignore[union-attr]
        return self._decode(self.inner.prefix_scan(raw))  # type: ignore[arg-type]

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._decode(self.inner.all())


class TimestampedKeyValueStore(SerdeKeyValueStore):
    """A key-value store that keeps each value's timestamp (``state.timestamped``).

    Its ``KeyValueStore`` methods are the plain view users read: values without timestamps
    (a plain ``put`` stores ``NO_TIMESTAMP``). The DSL's aggregations use
    ``get_with_timestamp`` and ``put_with_timestamp``.
    """

    timestamped = True

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        raw = self.inner.get(self._key_bytes(key))
        return self.value_serde.deserialize_with_timestamp(raw)  # type: ignore[union-attr]

    def put_with_timestamp(self, key: Any, value: Any, timestamp: int) -> None:
        """Store ``value`` with ``timestamp``; None deletes the key."""
        raw = self.value_serde.serialize_with_timestamp(value, timestamp)  # type: ignore[union-attr]
        self.inner.put(self._key_bytes(key), raw)
