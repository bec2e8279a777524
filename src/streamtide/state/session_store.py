"""The session store: aggregates per (key, session start, session end), segmented by end time.

Layout inside one ordered ``KeyValueBytesStore`` (in-memory, RocksDB, changelogged, ...)::

    segment(end) | len(key) | key | end | start  ->  serialized aggregate

with ``segment(end) = end // segment_interval`` and every number an 8-byte order-preserving
long (the key length is 4 bytes). So one key's sessions in one segment are contiguous and
ordered by end, then start; walking the segments in order gives that order over all of them;
and a whole segment is expired with one range of deletes. Everything lives in the inner store,
so a restore from the changelog brings back the complete state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from streamtide.serde import Serde
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
from streamtide.window import Window, Windowed

_U64 = struct.Struct(">Q")
_BIAS = 1 << 63  # encode_long's shift, inlined in write_all_at

#: 16 bytes of 0xff: greater than any encoded (end, start) pair.
_ALL_ONES = b"\xff" * 16


class SessionStore(SegmentedLayoutStore):
    """Sessions of each key with their aggregates (see the module docstring for the layout).

    A session whose end is older than ``stream_time - retention`` is expired: lookups never
    return it, ``put`` does not store it, and its segment is dropped once all of the segment
    is expired. Stream time is the task's (``context.current_stream_time_ms()``).
    """

    kind = "session"
    label = "session store"

    # ---- encoding ------------------------------------------------------------------------

    def _entry_key(self, segments: Segments, key: bytes, start: int, end: int) -> bytes:
        return (
            segments.prefix(segments.segment_id(end))
            + encode_key(key)
            + encode_long(end)
            + encode_long(start)
        )

    def _decode(self, raw_key: bytes, raw_value: bytes) -> tuple[Windowed, Any]:
        key, offset = decode_key(raw_key, 8)
        end = decode_long(raw_key, offset)
        start = decode_long(raw_key, offset + 8)
        window = Window(start, end)
        value = self.value_serde.deserialize(raw_value)  # type: ignore[union-attr]
        return Windowed(self.key_serde.deserialize(key), window), value  # type: ignore[union-attr]

    # ---- writes --------------------------------------------------------------------------

    def put(self, session: Windowed, aggregate: Any) -> None:
        """Store ``aggregate`` for ``session``; None removes it. Expired sessions are ignored."""
        segments = self._open()
        start, end = session.window.start, session.window.end
        raw = self._entry_key(segments, self._key_bytes(session.key), start, end)
        self._write(segments, raw, end, self.value_serde.serialize(aggregate))  # type: ignore[union-attr]

    def remove(self, session: Windowed) -> None:
        """Delete ``session`` (no-op when it is not stored)."""
        self.put(session, None)

    def write_all_at(self, updates: list[tuple[int, bytes, int, int, bytes | None]]) -> None:
        """Apply ``(stream_time, serialized key, start, end, serialized aggregate or None)``
        updates in order, each as ``put`` would have at that stream time: segments expire at
        the same points and expired puts are ignored. Only each session's last effective
        update reaches the inner store, which then holds what the sequence of ``put`` calls
        leaves (batch processing's write-back)."""
        segments = self._open()
        last: dict[tuple[bytes, int, int], int] = {}
        live_at, cutoff = None, 0
        for index, (now, key, start, end, value) in enumerate(updates):
            if now != live_at:
                live_at, cutoff = now, segments.live_from(now)
            if value is None or end >= cutoff:
                last[(key, start, end)] = index
        interval = segments.interval
        prefixes: dict[int, bytes] = {}  # segment id -> its prefix
        encoded_keys: dict[bytes, bytes] = {}  # key -> its length-prefixed form
        pending: list[tuple[bytes, bytes | None]] = []
        newest = None
        dropped_below = None
        live_at = None
        for index, (now, key, start, end, value) in enumerate(updates):
            if value is not None:
                if now != live_at:
                    live_at, cutoff = now, segments.live_from(now)
                    below = cutoff // interval
                    if below != dropped_below:  # what put's expiry check does, once per segment
                        if pending:  # the writes before the expiry go first
                            self.inner.put_all(pending)
                            pending = []
                        segments.drop_expired(now)
                        dropped_below = below
                if end < cutoff:
                    continue
                if newest is None or end > newest:
                    newest = end
            if last.get((key, start, end)) == index:
                segment = end // interval
                prefix = prefixes.get(segment)
                if prefix is None:
                    prefix = prefixes[segment] = segments.prefix(segment)
                encoded = encoded_keys.get(key)
                if encoded is None:
                    encoded = encoded_keys[key] = encode_key(key)
                pending.append(
                    (prefix + encoded + _U64.pack(end + _BIAS) + _U64.pack(start + _BIAS), value)
                )
        if pending:
            self.inner.put_all(pending)
        if newest is not None:
            segments.note_time(newest)

    # ---- reads ---------------------------------------------------------------------------

    def find_sessions(
        self, key: Any, earliest_session_end: int, latest_session_start: int
    ) -> list[tuple[Windowed, Any]]:
        """The key's live sessions with ``end >= earliest_session_end`` and
        ``start <= latest_session_start``, ordered by end, then start."""
        segments = self._open()
        encoded = encode_key(self._key_bytes(key))
        found = []
        low_end = max(earliest_session_end, segments.live_from())
        low_suffix = encode_long(low_end)  # prefix + end sorts before every start under it
        for segment in segments.live_segments(earliest_session_end):
            prefix = segments.prefix(segment) + encoded
            low = prefix + low_suffix
            high = prefix + _ALL_ONES  # above every (end, start) pair
            for raw_key, raw_value in self.inner.range(low, high):
                start = decode_long(raw_key, len(prefix) + 8)
                if start <= latest_session_start:
                    found.append(self._decode(raw_key, raw_value))
        return found

    def fetch(self, key: Any) -> list[tuple[Windowed, Any]]:
        """Every live session of ``key``, ordered by end, then start."""
        return self.find_sessions(key, MIN_LONG, MAX_LONG)

    def fetch_session(self, key: Any, start: int, end: int, *, live_only: bool = True) -> Any:
        """The aggregate of exactly the session ``[start, end]`` of ``key``, or None (also
        when expired, unless ``live_only`` is False: a closed session is read once more, to
        emit its final result, before its segment can be dropped)."""
        segments = self._open()
        if live_only and not segments.is_live(end):
            return None
        raw = self.inner.get(self._entry_key(segments, self._key_bytes(key), start, end))
        return self.value_serde.deserialize(raw)  # type: ignore[union-attr]

    def all(self) -> list[tuple[Windowed, Any]]:
        """Every live session, by segment, then serialized key, then end, then start."""
        segments = self._open()
        found = []
        live_from = segments.live_from()
        for segment in segments.live_segments(MIN_LONG):
            for raw_key, raw_value in segments.scan(segment):
                windowed, value = self._decode(raw_key, raw_value)
                if windowed.window.end >= live_from:
                    found.append((windowed, value))
        return found


@dataclass
class SessionStoreBuilder(SupplierStoreBuilder):
    """Builds one ``SessionStore`` per task over the supplier's bytes store (changelogged by the
    supplier unless logging is disabled)."""

    supplier: KeyValueBytesStoreSupplier
    retention_ms: int
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging_enabled: bool = True

    def build(self) -> SessionStore:
        return SessionStore(self._inner(), self.retention_ms, self.key_serde, self.value_serde)
