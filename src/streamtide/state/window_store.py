"""The window store: one value per (key, window start) for fixed-size time windows.

Layout inside one ordered ``KeyValueBytesStore``::

    segment(start) | len(key) | key | start  ->  serialized value

with ``segment(start) = start // segment_interval`` and 8-byte order-preserving longs (the key
length is 4 bytes). A key's windows in one segment are contiguous and ordered by start, and a
whole segment is expired with one range of deletes. All state is in the inner store.

A window ``[start, start + size)`` is kept for ``retention`` after its end: it is expired once
``start + size < stream_time - retention``; expired windows are never returned nor stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from streamtide.serde import Serde
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.encoding import (
    MAX_LONG,
    MIN_LONG,
    decode_key,
    decode_long,
    encode_key,
    encode_long,
)
from streamtide.state.segments import SegmentedLayoutStore, Segments
from streamtide.state.stores import KeyValueBytesStoreSupplier, SupplierStoreBuilder
from streamtide.state.timestamped import ValueAndTimestamp
from streamtide.window import Window, Windowed


class WindowStore(SegmentedLayoutStore):
    """Values of fixed-size windows per key (see the module docstring for the layout)."""

    kind = "window"
    label = "window store"

    def __init__(
        self,
        inner: KeyValueBytesStore,
        window_size_ms: int,
        retention_ms: int,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> None:
        if window_size_ms <= 0:
            raise ValueError(f"window size must be positive, got {window_size_ms}")
        super().__init__(inner, retention_ms, key_serde, value_serde)
        self.window_size_ms = window_size_ms

    def _segment_horizon_ms(self) -> int:
        # segments are indexed by window start, which expires ``size`` earlier than the end
        return self.window_size_ms

    # ---- encoding ------------------------------------------------------------------------

    def _entry_key(self, segments: Segments, key: bytes, start: int) -> bytes:
        return segments.prefix(segments.segment_id(start)) + encode_key(key) + encode_long(start)

    def _decode(self, raw_key: bytes, raw_value: bytes) -> tuple[Windowed, Any]:
        key, offset = decode_key(raw_key, 8)
        start = decode_long(raw_key, offset)
        window = Window(start, start + self.window_size_ms)
        value = self.value_serde.deserialize(raw_value)  # type: ignore[union-attr]
        return Windowed(self.key_serde.deserialize(key), window), value  # type: ignore[union-attr]

    # ---- writes --------------------------------------------------------------------------

    def put(self, key: Any, window_start: int, value: Any) -> None:
        """Store ``value`` for the window of ``key`` starting at ``window_start``; None deletes.

        Writes to expired windows are ignored.
        """
        segments = self._open()
        raw = self._entry_key(segments, self._key_bytes(key), window_start)
        self._write(segments, raw, window_start, self.value_serde.serialize(value))  # type: ignore[union-attr]

    def write_all_at(self, updates: list[tuple[int, bytes, int, bytes | None]]) -> None:
        """Apply ``(stream time, serialized key, window start, stored value or None)``
        updates in order, each as ``put`` would have at that stream time: segments expire at
        the same points and writes to expired windows are ignored (an operator's write-back
        of a batch; the stored values are as the store keeps them)."""
        if not updates:
            return
        segments = self._open()
        pending: list[tuple[bytes, bytes | None]] = []
        boundary = None  # the segment below which the last expiry check dropped everything
        live_at, live_from = None, 0
        newest = None
        for now, key, start, value in updates:
            raw_key = self._entry_key(segments, key, start)
            if value is None:
                pending.append((raw_key, None))
                continue
            if now != live_at:
                live_at, live_from = now, segments.live_from(now)
                below = segments.segment_id(live_from)
                if below != boundary:  # what put's expiry check does, once per segment
                    if pending:  # the writes before the expiry go first
                        self.inner.put_all(pending)
                        pending = []
                    segments.drop_expired(now)
                    boundary = below
            if start < live_from:
                continue
            if newest is None or start > newest:
                newest = start
            pending.append((raw_key, value))
        if pending:
            self.inner.put_all(pending)
        if newest is not None:
            segments.note_time(newest)

    # ---- reads ---------------------------------------------------------------------------

    def get(self, key: Any, window_start: int) -> Any:
        """The value of one window of ``key``, or None (also when the window expired)."""
        segments = self._open()
        if not segments.is_live(window_start):
            return None
        raw = self.inner.get(self._entry_key(segments, self._key_bytes(key), window_start))
        return self.value_serde.deserialize(raw)  # type: ignore[union-attr]

    def get_stored(self, key_bytes: bytes, window_start: int) -> bytes | None:
        """The stored bytes of one window of a serialized key (live or not), as the store
        keeps them: an operator reading a window once per batch decodes them itself."""
        segments = self._open()
        return self.inner.get(self._entry_key(segments, key_bytes, window_start))

    def _fetch_raw(
        self, key_bytes: bytes, time_from: int, time_to: int, now: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """The stored entries of the serialized key's windows starting in ``[time_from,
        time_to]`` that are live at stream time ``now`` (default: the task's current one)."""
        segments = self._open()
        encoded = encode_key(key_bytes)
        low_start = max(time_from, segments.live_from(now))
        for segment in segments.live_segments(time_from, time_to, now):
            prefix = segments.prefix(segment) + encoded
            low, high = prefix + encode_long(low_start), prefix + encode_long(time_to)
            yield from self.inner.range(low, high)

    def fetch(
        self, key: Any, time_from: int = MIN_LONG, time_to: int = MAX_LONG
    ) -> list[tuple[Windowed, Any]]:
        """The key's live windows whose start is in ``[time_from, time_to]``, by start."""
        raw = self._fetch_raw(self._key_bytes(key), time_from, time_to)
        return [self._decode(k, v) for k, v in raw]

    def fetch_all(
        self, time_from: int = MIN_LONG, time_to: int = MAX_LONG
    ) -> list[tuple[Windowed, Any]]:
        """Every key's live windows starting in ``[time_from, time_to]``, ordered by window
        start, then serialized key."""
        segments = self._open()
        low_start = max(time_from, segments.live_from())
        found = []
        for segment in segments.live_segments(time_from, time_to):
            in_segment = []
            for raw_key, raw_value in segments.scan(segment):
                _, offset = decode_key(raw_key, 8)
                if low_start <= decode_long(raw_key, offset) <= time_to:
                    in_segment.append(self._decode(raw_key, raw_value))
            in_segment.sort(key=lambda item: item[0].window.start)  # stable: key order stays
            found.extend(in_segment)
        return found

    def all(self) -> list[tuple[Windowed, Any]]:
        """Every live window, ordered by window start, then serialized key."""
        return self.fetch_all()


class TimestampedWindowStore(WindowStore):
    """A window store that keeps each window's timestamp (``state.timestamped``).

    Its ``WindowStore`` methods are the plain view users read: values without timestamps (a
    plain ``put`` stores ``NO_TIMESTAMP``). The DSL's window aggregations use
    ``get_with_timestamp`` and ``put_with_timestamp``.
    """

    timestamped = True

    def get_with_timestamp(
        self, key: Any, window_start: int, *, live_only: bool = True
    ) -> ValueAndTimestamp | None:
        """The value and timestamp of one window of ``key``, or None (also when expired,
        unless ``live_only`` is False: a window's final result is read as it closes, even
        if the same step of stream time expired it)."""
        segments = self._open()
        if live_only and not segments.is_live(window_start):
            return None
        raw = self.inner.get(self._entry_key(segments, self._key_bytes(key), window_start))
        return self.value_serde.deserialize_with_timestamp(raw)  # type: ignore[union-attr]

    def fetch_with_timestamps(
        self, key: Any, time_from: int, time_to: int
    ) -> list[tuple[int, ValueAndTimestamp]]:
        """``(window start, value and timestamp)`` of the key's live windows starting in
        ``[time_from, time_to]``, by start."""
        deserialize = self.value_serde.deserialize_with_timestamp  # type: ignore[union-attr]
        return [
            (decode_long(k, len(k) - 8), deserialize(v))
            for k, v in self._fetch_raw(self._key_bytes(key), time_from, time_to)
        ]

    def fetch_stored(
        self, key_bytes: bytes, time_from: int, time_to: int, now: int
    ) -> list[tuple[int, bytes]]:
        """``(window start, stored bytes)`` of a serialized key's windows starting in
        ``[time_from, time_to]`` that are live at stream time ``now``, by start: an operator
        reads a key's windows once per batch and decodes them itself."""
        return [
            (decode_long(k, len(k) - 8), v)
            for k, v in self._fetch_raw(key_bytes, time_from, time_to, now)
        ]

    def put_with_timestamp(self, key: Any, window_start: int, value: Any, timestamp: int) -> None:
        """Store ``value`` with ``timestamp`` for one window of ``key``; None deletes."""
        segments = self._open()
        raw = self._entry_key(segments, self._key_bytes(key), window_start)
        stored = self.value_serde.serialize_with_timestamp(value, timestamp)  # type: ignore[union-attr]
        self._write(segments, raw, window_start, stored)


@dataclass
class WindowStoreBuilder(SupplierStoreBuilder):
    """Builds one ``WindowStore`` per task over the supplier's bytes store (changelogged by the
    supplier unless logging is disabled); a ``TimestampedWindowStore`` if ``timestamped``."""

    supplier: KeyValueBytesStoreSupplier
    window_size_ms: int
    retention_ms: int
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging_enabled: bool = True
    timestamped: bool = False

    def build(self) -> WindowStore:
        store = TimestampedWindowStore if self.timestamped else WindowStore
        return store(
            self._inner(),
            self.window_size_ms,
            self.retention_ms,
            self.key_serde,
            self.value_serde,
        )
