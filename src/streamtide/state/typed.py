"""The typed key-value store: serdes around a bytes store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from streamtide.errors import SerdeError, StoreError
from streamtide.serde import Serde, StringSerde, exact_values
from streamtide.state.api import KeyValueBytesStore, KeyValueStore
from streamtide.state.layout import SerdeLayoutStore
from streamtide.state.timestamped import ValueAndTimestamp

#: Entries a range read deserializes at once.
_DECODE_CHUNK = 1024
#: Stands for a value a batch view keeps only as bytes (deserialized at each read).
_UNREAD: Any = object()


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
        view = self._view
        if view is not None:
            if key.__class__ is str and view.string_keys:
                found = view.kept.get(key)
                if found is not None:
                    raw, value = found
                    return value if value is not _UNREAD else self.value_serde.deserialize(raw)  # type: ignore[union-attr]
            return view.get(key)
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
        view = self._view
        if view is not None:
            raw = self.value_serde.serialize(value)  # type: ignore[union-attr]
            ident = key if view.string_keys else key_bytes
            view.kept[ident] = (raw, value if value.__class__ in view.exact else _UNREAD)
            view.written[ident] = (key_bytes, raw)
            return
        self.inner.put(key_bytes, self.value_serde.serialize(value))  # type: ignore[union-attr]

    # ---- a batch's view (see ``BatchView``) ----------------------------------------------

    _view: BatchView | None = None

    def begin_batch(self) -> bool:
        """Serve ``get`` and ``put`` from memory until ``end_batch`` (see ``BatchView``);
        False when this store cannot (a layout of its own, or not open)."""
        if type(self) is not SerdeKeyValueStore or not self.inner.is_open:
            return False
        if self._view is None:
            self._view = BatchView(self)
        return True

    def end_batch(self) -> None:
        """Write the batch's puts to the store and leave the batch view."""
        view = self._view
        if view is not None:
            self._view = None
            view.write_back()

    def _settle(self) -> None:
        """Before any other operation: the batch's puts reach the store (the view stays,
        emptied)."""
        view = self._view
        if view is not None:
            view.write_back()

    def put_if_absent(self, key: Any, value: Any) -> Any:
        self._settle()
        existing = self.inner.put_if_absent(
            self._key_bytes(key),
            self.value_serde.serialize(value),  # type: ignore[union-attr, arg-type]
        )
        return self.value_serde.deserialize(existing)  # type: ignore[union-attr]

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        self._settle()
        self.inner.put_all(
            (self._key_bytes(k), self.value_serde.serialize(v))  # type: ignore[union-attr]
            for k, v in entries
        )

    def delete(self, key: Any) -> Any:
        self._settle()
        return self.value_serde.deserialize(self.inner.delete(self._key_bytes(key)))  # type: ignore[union-attr]

    def _decode(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        """Deserialized entries, a chunk of ``_DECODE_CHUNK`` at a time (each column at
        once); a chunk with an entry a serde rejects is decoded entry by entry, so every
        entry before it is still yielded before the error."""
        key_serde, value_serde = self.key_serde, self.value_serde
        assert key_serde is not None and value_serde is not None  # given by init
        while chunk := list(islice(entries, _DECODE_CHUNK)):
            keys: list[bytes | None] = [k for k, _ in chunk]
            values: list[bytes | None] = [v for _, v in chunk]
            decoded: Iterator[tuple[Any, Any]]
            try:
                decoded = zip(
                    key_serde.deserialize_many(keys), value_serde.deserialize_many(values)
                )
            except SerdeError:
                kd, vd = key_serde.deserialize, value_serde.deserialize
                decoded = ((kd(k), vd(v)) for k, v in chunk)
            yield from decoded

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        self._settle()
        lo = None if from_key is None else self._key_bytes(from_key)
        hi = None if to_key is None else self._key_bytes(to_key)
        return self._decode(self.inner.range(lo, hi))

    def prefix_scan(
        self, prefix: Any, prefix_serde: Serde | None = None
    ) -> Iterator[tuple[Any, Any]]:
        self._settle()
        serde = prefix_serde or self.key_serde
        raw = serde.serialize(prefix)  # type: ignore[union-attr]
        return self._decode(self.inner.prefix_scan(raw))  # type: ignore[arg-type]

    def all(self) -> Iterator[tuple[Any, Any]]:
        self._settle()
        return self._decode(self.inner.all())

    def approximate_num_entries(self) -> int:
        self._settle()
        return super().approximate_num_entries()

    def flush(self) -> None:
        self._settle()
        super().flush()

    def close(self) -> None:
        self._settle()
        super().close()


class BatchView:
    """A key-value store as one batch of a Processor API node sees it: ``get`` and ``put``
    served from memory, the puts written to the store once, when the batch ends.

    A user's processor reads and writes its store once or more per record; through the
    layers (serdes, changelog buffer, RocksDB) that is several calls each. For the batch,
    each key read or written is kept by its identity (its text for a string key, else its
    bytes) with its value's bytes, serialized at ``put`` as before (so a serde error is the
    ``put``'s, and a value changed in place after its ``put`` is not changed in the store),
    and the value itself when deserializing is known to give it back (``exact_values``).
    The last put of each key reaches the store at ``write_back``, in first-write order:
    the store's write buffer, and so its changelog, end as the puts one by one would leave
    them. Any other operation on the store writes back first (``_settle``).
    """

    __slots__ = ("exact", "kept", "store", "string_keys", "written")

    def __init__(self, store: SerdeKeyValueStore) -> None:
        self.store = store
        self.string_keys = type(store.key_serde) is StringSerde
        self.exact = exact_values(store.value_serde)  # type: ignore[arg-type]
        #: identity -> (value bytes or None, value or ``_UNREAD``): what a get reads
        self.kept: dict[Any, tuple[bytes | None, Any]] = {}
        #: identity -> (key bytes, value bytes or None): the puts not yet written back
        self.written: dict[Any, tuple[bytes, bytes | None]] = {}

    def get(self, key: Any) -> Any:
        """A get of a key not kept yet (or not found by its text): read once, then kept."""
        store = self.store
        if key.__class__ is str and self.string_keys:
            try:
                key_bytes = key.encode("utf-8")
            except UnicodeError:
                key_bytes = store._key_bytes(key)  # the serde's own error
            ident: Any = key
        else:
            key_bytes = store._key_bytes(key)
            ident = key_bytes.decode("utf-8") if self.string_keys else key_bytes
        found = self.kept.get(ident)
        if found is None:
            raw = store.inner.get(key_bytes)
            value = store.value_serde.deserialize(raw)  # type: ignore[union-attr]
            self.kept[ident] = (raw, value if value.__class__ in self.exact else _UNREAD)
            return value
        raw, value = found
        return value if value is not _UNREAD else store.value_serde.deserialize(raw)  # type: ignore[union-attr]

    def write_back(self) -> None:
        """The batch's puts to the store (the last of each key, in first-write order)."""
        written = self.written
        self.kept.clear()
        if written:
            entries = list(written.values())
            written.clear()
            self.store.inner.put_all(entries)


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
