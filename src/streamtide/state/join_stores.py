"""The stores of a stream-stream join: one list-valued window store per side, and the shared
store of records still waiting for a partner (left and outer joins).

Both keep several records under one entry, as Kafka's join stores keep duplicates: an entry's
value is a list of serialized values (each a 4-byte length, then the bytes), extended on every
append, so records of one key and timestamp come back in arrival order.

- ``JoinWindowStore`` is a ``WindowStore`` indexed by record timestamp (the window start), its
  values lists of the side's values.
- ``OuterJoinStore`` keys an entry ``timestamp | side | key`` (8-byte order-preserving long,
  one byte 0 for the right side and 1 for the left, then the serialized key), so a scan meets
  the records by timestamp, the right side's first at equal timestamps (Kafka's order).

Both live inside one ordered bytes store each, so they are changelogged and restored like
every other layout.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from streamtide.processor.api import StateStoreContext
from streamtide.serde import Serde
from streamtide.state.encoding import decode_key, decode_long, encode_long
from streamtide.state.layout import SerdeLayoutStore
from streamtide.state.segments import Segments
from streamtide.state.stores import KeyValueBytesStoreSupplier, SupplierStoreBuilder
from streamtide.state.window_store import WindowStore, WindowStoreBuilder
from streamtide.window import Window, Windowed

_LENGTH = struct.Struct(">I")

LEFT = b"\x01"
RIGHT = b"\x00"


def append_item(packed: bytes | None, item: bytes) -> bytes:
    """``packed`` (a list of items, or None for an empty one) with ``item`` appended."""
    return (packed or b"") + _LENGTH.pack(len(item)) + item


def unpack_items(packed: bytes) -> list[bytes]:
    """The items of a packed list, in the order they were appended."""
    items = []
    offset = 0
    while offset < len(packed):
        (length,) = _LENGTH.unpack_from(packed, offset)
        offset += 4
        items.append(packed[offset : offset + length])
        offset += length
    return items


class JoinWindowStore(WindowStore):
    """One side of a stream-stream join: every record's value under (key, timestamp).

    As in Kafka's join stores, a record is kept while its timestamp is greater than the
    store's *observed time* minus ``retention`` (before + after + grace), where the observed
    time is the newest timestamp appended to this store (so one side that falls behind does
    not expire the other side's records). ``fetch`` returns ``(Windowed(key, Window(t, t +
    size)), [values])`` like a window store whose values are lists; the join reads
    ``fetch_values``.
    """

    label = "join window store"

    def init(self, context: StateStoreContext) -> None:
        super().init(context)
        self._observed: int | None = None
        self._segments = Segments(self.inner, self.retention_ms, self.observed_time, horizon_ms=-1)

    def observed_time(self) -> int:
        """The newest timestamp stored (-1 when empty); read back once after opening."""
        if self._observed is None:
            self._observed = -1
            last = next(iter(self.inner.range(None, None, reverse=True)), None)
            if last is not None:
                segment = decode_long(last[0])
                for raw_key, _ in self.inner.range(encode_long(segment), encode_long(segment + 1)):
                    _, offset = decode_key(raw_key, 8)
                    self._observed = max(self._observed, decode_long(raw_key, offset))
        return self._observed

    def append(self, key: Any, timestamp: int, value: Any) -> None:
        """Add ``value`` to the records of ``key`` at ``timestamp`` (ignored when expired)."""
        segments = self._open()
        self._observed = max(self.observed_time(), timestamp)
        raw_key = self._entry_key(segments, self._key_bytes(key), timestamp)
        item = self.value_serde.serialize(value)  # type: ignore[union-attr]
        if item is None or not segments.is_live(timestamp):
            return
        self._write(segments, raw_key, timestamp, append_item(self.inner.get(raw_key), item))

    def fetch_values(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``(timestamp, value)`` of the key's live records in ``[time_from, time_to]``, by
        timestamp, then arrival."""
        if time_to < time_from:
            return []
        return [
            (windowed.window.start, value)
            for windowed, values in self.fetch(key, time_from, time_to)
            for value in values
        ]

    def fetch_stored(
        self, key_bytes: bytes, time_from: int, time_to: int
    ) -> tuple[list[int], list[bytes]]:
        """The timestamps and packed values (``unpack_items``) of a serialized key's live
        entries in ``[time_from, time_to]``, by timestamp: an operator reading one range per
        key for a batch unpacks and deserializes them itself."""
        timestamps: list[int] = []
        packed: list[bytes] = []
        if time_to >= time_from:
            for raw_key, raw_value in self._fetch_raw(key_bytes, time_from, time_to):
                _, offset = decode_key(raw_key, 8)
                timestamps.append(decode_long(raw_key, offset))
                packed.append(raw_value)
        return timestamps, packed

    def _decode(self, raw_key: bytes, raw_value: bytes) -> tuple[Windowed, Any]:
        key, offset = decode_key(raw_key, 8)
        start = decode_long(raw_key, offset)
        deserialize = self.value_serde.deserialize  # type: ignore[union-attr]
        values = [deserialize(item) for item in unpack_items(raw_value)]
        window = Window(start, start + self.window_size_ms)
        return Windowed(self.key_serde.deserialize(key), window), values  # type: ignore[union-attr]


@dataclass
class JoinWindowStoreBuilder(WindowStoreBuilder):
    """Builds one ``JoinWindowStore`` per task."""

    def build(self) -> JoinWindowStore:
        return JoinWindowStore(
            self._inner(), self.window_size_ms, self.retention_ms, self.key_serde, self.value_serde
        )


@dataclass(frozen=True)
class WaitingRecord:
    """Records of one side that found no partner yet: their key, timestamp and values."""

    timestamp: int
    is_left: bool
    key: Any
    values: list[Any]
    raw_key: bytes = field(default=b"", repr=False, compare=False)


class OuterJoinStore(SerdeLayoutStore):
    """Records of a left or outer join that are waiting for a partner or for their window to
    close (see the module docstring for the layout). ``value_serde`` is the left side's,
    ``other_value_serde`` the right side's."""

    label = "outer join store"

    def __init__(
        self,
        inner: Any,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        other_value_serde: Serde | None = None,
    ) -> None:
        super().__init__(inner, key_serde, value_serde)
        self.other_value_serde = other_value_serde
        #: the join's in-memory bound: no waiting record closes before this (None: unknown)
        self.next_close: int | None = None

    def init(self, context: StateStoreContext) -> None:
        self.other_value_serde = self.other_value_serde or context.default_value_serde
        super().init(context)

    def _entry_key(self, timestamp: int, is_left: bool, key: Any) -> bytes:
        return encode_long(timestamp) + (LEFT if is_left else RIGHT) + self._key_bytes(key)

    def _serde(self, is_left: bool) -> Serde:
        return self.value_serde if is_left else self.other_value_serde  # type: ignore[return-value]

    def append(self, timestamp: int, is_left: bool, key: Any, value: Any) -> None:
        """Add a record of one side that is waiting for a partner."""
        raw_key = self._entry_key(timestamp, is_left, key)
        item = self._serde(is_left).serialize(value)
        if item is None:
            return
        self.inner.put(raw_key, append_item(self.inner.get(raw_key), item))

    def remove(self, timestamp: int, is_left: bool, key: Any) -> None:
        """Forget the waiting records of one side under (timestamp, key): they found a partner."""
        raw_key = self._entry_key(timestamp, is_left, key)
        if self.inner.get(raw_key) is not None:
            self.inner.put(raw_key, None)

    def remove_entry(self, entry: WaitingRecord) -> None:
        """Forget an entry ``scan`` returned (its records were emitted)."""
        self.inner.put(entry.raw_key, None)

    def scan(self) -> Iterator[WaitingRecord]:
        """Every waiting entry, by timestamp, the right side first, then serialized key."""
        key_serde = self.key_serde
        for raw_key, raw_value in self.inner.range(None, None):
            is_left = raw_key[8:9] == LEFT
            deserialize = self._serde(is_left).deserialize
            yield WaitingRecord(
                decode_long(raw_key),
                is_left,
                key_serde.deserialize(raw_key[9:]),  # type: ignore[union-attr]
                [deserialize(item) for item in unpack_items(raw_value)],
                bytes(raw_key),
            )


@dataclass
class OuterJoinStoreBuilder(SupplierStoreBuilder):
    """Builds one ``OuterJoinStore`` per task (changelogged unless logging is disabled)."""

    supplier: KeyValueBytesStoreSupplier
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    logging_enabled: bool = True

    def build(self) -> OuterJoinStore:
        return OuterJoinStore(
            self._inner(), self.key_serde, self.value_serde, self.other_value_serde
        )
