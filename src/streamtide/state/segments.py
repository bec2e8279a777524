"""Time segments laid out inside one ordered bytes store (shared by window and session stores).

A segmented store keeps every entry under a key that begins with its segment id, an 8-byte
order-preserving encoding of ``time // segment_interval``. All entries of a segment are thus
contiguous, and expiring segments is a single range delete on the inner store: no side
structure exists that a restore from the changelog would have to rebuild.
``SegmentedLayoutStore`` is the lifecycle and write path the window and session stores share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from streamtide.errors import StoreError
from streamtide.processor.api import StateStoreContext
from streamtide.serde import Serde
from streamtide.state.api import KeyValueBytesStore
from streamtide.state.encoding import decode_long, encode_long
from streamtide.state.layout import SerdeLayoutStore

NUM_SEGMENTS = 3
MIN_SEGMENT_INTERVAL_MS = 60_000


def segment_interval(retention_ms: int, num_segments: int = NUM_SEGMENTS) -> int:
    """``max(retention // (num_segments - 1), 60 s)``: the time span of one segment."""
    return max(retention_ms // (num_segments - 1), MIN_SEGMENT_INTERVAL_MS)


class Segments:
    """Segment arithmetic and whole-segment expiry over one bytes store.

    ``live_from()`` is the oldest time still kept: ``stream_time - retention`` (shifted by the
    caller's ``horizon`` for stores indexed by something other than the expiring time).
    """

    def __init__(
        self,
        inner: KeyValueBytesStore,
        retention_ms: int,
        stream_time: Callable[[], int],
        horizon_ms: int = 0,
    ) -> None:
        self.inner = inner
        self.retention_ms = retention_ms
        self.interval = segment_interval(retention_ms)
        self._stream_time = stream_time
        self._horizon = horizon_ms
        self._dropped_below: int | None = None  # a cache only: recomputed after every open
        self._max_time: int | None = None  # newest indexed time seen (lazily read back)

    def segment_id(self, time: int) -> int:
        return time // self.interval

    def prefix(self, segment: int) -> bytes:
        return encode_long(segment)

    def scan(self, segment: int) -> Iterator[tuple[bytes, bytes]]:
        """Every entry of one segment, in key order (a bounded range, cheap on any store)."""
        return self.inner.range(self.prefix(segment), self.prefix(segment + 1))

    def live_from(self, now: int | None = None) -> int:
        """Entries indexed before this time are expired (never returned, never stored);
        ``now`` is the stream time to judge at (default: the task's current one)."""
        if now is None:
            now = self._stream_time()
        return now - self.retention_ms - self._horizon

    def is_live(self, time: int, now: int | None = None) -> bool:
        return time >= self.live_from(now)

    def note_time(self, time: int) -> None:
        """Remember the newest indexed time, so lookups know which segments may exist."""
        newest = self.newest_time()
        if time > newest:
            self._max_time = time

    def newest_time(self, now: int | None = None) -> int:
        """The newest time that may be indexed: stream time (``now``, default the task's
        current one), or a later one that was put."""
        if self._max_time is None:
            last = next(iter(self.inner.range(None, None, reverse=True)), None)
            self._max_time = -1
            if last is not None:
                # the highest segment's last instant bounds every time stored in it
                self._max_time = (decode_long(last[0]) + 1) * self.interval - 1
        return max(self._max_time, self._stream_time() if now is None else now)

    def live_segments(
        self, from_time: int, to_time: int | None = None, now: int | None = None
    ) -> range:
        """Ids of the segments that may hold live entries indexed in ``[from_time, to_time]``
        at stream time ``now`` (default: the task's current one)."""
        newest = self.newest_time(now)
        upper = newest if to_time is None else min(to_time, newest)
        lower = max(from_time, self.live_from(now))
        if upper < lower:
            return range(0)
        return range(self.segment_id(lower), self.segment_id(upper) + 1)

    def drop_expired(self, now: int | None = None) -> bool:
        """Delete every segment whose entries are all expired at stream time ``now`` (default:
        the current one), with one range delete (issued only when such an entry exists);
        return whether anything was deleted."""
        below = self.segment_id(self.live_from(now))
        if self._dropped_below is not None and below <= self._dropped_below:
            return False
        self._dropped_below = below
        bound = self.prefix(below)
        if next(iter(self.inner.range(None, bound)), None) is None:
            return False
        self.inner.delete_range(None, bound)
        return True


class SegmentedLayoutStore(SerdeLayoutStore):
    """A serde layout whose entries are kept in time segments (window and session stores)."""

    def __init__(
        self,
        inner: KeyValueBytesStore,
        retention_ms: int,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> None:
        if retention_ms < 0:
            raise ValueError(f"{self.label} retention must not be negative, got {retention_ms}")
        super().__init__(inner, key_serde, value_serde)
        self.retention_ms = retention_ms
        self._segments: Segments | None = None

    def init(self, context: StateStoreContext) -> None:
        super().init(context)
        self._segments = Segments(
            self.inner,
            self.retention_ms,
            context.current_stream_time_ms,
            horizon_ms=self._segment_horizon_ms(),
        )

    def _segment_horizon_ms(self) -> int:
        """How long before the time that expires the indexed time lies (see ``Segments``)."""
        return 0

    @property
    def segment_interval(self) -> int:
        return self._open().interval

    def _open(self) -> Segments:
        if self._segments is None or not self.inner.is_open:
            raise StoreError(f"{self.label} {self.name!r} is not open")
        return self._segments

    def _write(
        self, segments: Segments, raw_key: bytes, time: int, raw_value: bytes | None
    ) -> None:
        """Store the serialized ``raw_value`` under ``raw_key``, indexed at ``time``; None
        deletes. Writes to an expired time are ignored; segments that expired entirely are
        dropped first."""
        if raw_value is None:
            self.inner.put(raw_key, None)
            return
        segments.drop_expired()
        if not segments.is_live(time):
            return
        segments.note_time(time)
        self.inner.put(raw_key, raw_value)
