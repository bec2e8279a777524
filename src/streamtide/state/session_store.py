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

_BOUNDS = struct.Struct(">QQ")  # end, then start, each shifted as encode_long does
_BIAS = 1 << 63

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
        if not updates:
            return
        segments = self._open()
        interval = segments.interval
        lag = updates[0][0] - segments.live_from(updates[0][0])  # stream time - live_from
        last: dict[tuple[bytes, int, int], int] = {}  # session -> its last effective update
        drops: list[tuple[int, int]] = []  # (update index, stream time): expire segments there
        newest = None
        live_at, cutoff, dropped_below = None, 0, None
        for index, (now, key, start, end, value) in enumerate(updates):
            if value is None:
                last[(key, start, end)] = index
                continue
            if now != live_at:
                live_at, cutoff = now, now - lag
                below = cutoff // interval
                if below != dropped_below:  # what put's expiry check does, once per segment
                    drops.append((index, now))
                    dropped_below = below
            if end >= cutoff:
                last[(key, start, end)] = index
                if newest is None or end > newest:
                    newest = end
        prefixes: dict[int, bytes] = {}  # segment id -> its prefix
        last_segment, prefix = None, b""
        encoded_keys: dict[bytes, bytes] = {}  # key -> its length-prefixed form
        pending: list[tuple[bytes, bytes | None]] = []
        pack = _BOUNDS.pack
        drops.append((len(updates), 0))  # a sentinel after the last update
        drop_at, drop_now = drops[0]
        next_drop = 1
        for index in sorted(last.values()):
            _, key, start, end, value = updates[index]
            while drop_at <= index:
                if pending:  # the writes before the expiry go first
                    self.inner.put_all(pending)
                    pending = []
                segments.drop_expired(drop_now)
                drop_at, drop_now = drops[next_drop]
                next_drop += 1
            segment = end // interval
            if segment != last_segment:
                cached = prefixes.get(segment)
                if cached is None:
                    cached = prefixes[segment] = segments.prefix(segment)
                prefix = cached
                last_segment = segment
            encoded = encoded_keys.get(key)
            if encoded is None:
                encoded = encoded_keys[key] = encode_key(key)
            pending.append((prefix + encoded + pack(end + _BIAS, start + _BIAS), value))
        if pending:
            self.inner.put_all(pending)
        for _, drop_now in drops[next_drop - 1 : -1]:  # expiries after the last write
            segments.drop_expired(drop_now)
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

    def fetch_serialized(
        self, key_bytes: bytes, now: int | None = None
    ) -> list[tuple[int, int, bytes]]:
        """``fetch`` of a serialized key at stream time ``now`` (default: the task's current
        one), as ``(end, start, serialized aggregate)`` (nothing deserialized: an operator
        reads a key's sessions once per batch and may never need them)."""
        segments = self._open()
        encoded = encode_key(key_bytes)
        low_suffix = encode_long(segments.live_from(now))
        found = []
        for segment in segments.live_segments(MIN_LONG, now=now):
            prefix = segments.prefix(segment) + encoded
            at = len(prefix)
            for raw_key, raw_value in self.inner.range(prefix + low_suffix, prefix + _ALL_ONES):
                end, start = _BOUNDS.unpack_from(raw_key, at)
                found.append((end - _BIAS, start - _BIAS, raw_value))
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
