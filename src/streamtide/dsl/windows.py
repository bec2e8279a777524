"""Window specifications for ``KGroupedStream.windowed_by``: time windows and session windows.

Both are immutable: every ``with``-style method returns a new object, so a shared instance is
never changed by accident. Durations accept a ``timedelta`` or int milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamtide.time import Duration, to_millis
from streamtide.window import Window

#: How long windows and sessions are kept when nothing else is said: one day.
DEFAULT_RETENTION_MS = 86_400_000


def _positive(duration: Duration, name: str) -> int:
    ms = to_millis(duration, name)
    if ms <= 0:
        raise ValueError(f"{name} must be positive, got {ms} ms")
    return ms


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows ``[start, start + size)`` aligned to the epoch.

    Tumbling when ``advance == size`` (each record falls into exactly one window), hopping when
    ``advance < size`` (a record falls into ``size / advance`` overlapping windows). A window
    accepts records while ``window.end > stream_time - grace``; later records are dropped.
    """

    size_ms: int
    advance_ms: int
    grace_ms: int = 0

    @classmethod
    def of_size(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` (> 0)."""
        ms = _positive(size, "window size")
        return cls(ms, ms, 0)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` that accept records for ``grace`` after their end."""
        return cls.of_size(size).grace(grace)

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` that close at their end (grace 0)."""
        return cls.of_size(size)

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows that start every ``advance`` (0 < advance <= size)."""
        ms = to_millis(advance, "window advance")
        if not 0 < ms <= self.size_ms:
            raise ValueError(
                f"window advance must be positive and at most the window size "
                f"({self.size_ms} ms), got {ms} ms"
            )
        return replace(self, advance_ms=ms)

    def grace(self, grace: Duration) -> TimeWindows:
        """Accept out-of-order records for ``grace`` after a window's end (default 0)."""
        ms = to_millis(grace, "grace period")
        if ms < 0:
            raise ValueError(f"grace period must not be negative, got {ms} ms")
        return replace(self, grace_ms=ms)

    @property
    def is_tumbling(self) -> bool:
        return self.advance_ms == self.size_ms

    def windows_for(self, timestamp: int) -> list[Window]:
        """Every window containing ``timestamp``, by ascending start (none starts before 0)."""
        size, step = self.size_ms, self.advance_ms
        last_start = timestamp - timestamp % step
        first = max(0, timestamp - size + 1)
        first_start = -(-first // step) * step  # round up to a multiple of the advance
        return [Window(s, s + size) for s in range(first_start, last_start + 1, step)]

    def __repr__(self) -> str:
        kind = "tumbling" if self.is_tumbling else f"hopping by {self.advance_ms} ms"
        return f"TimeWindows(size={self.size_ms} ms, {kind}, grace={self.grace_ms} ms)"


@dataclass(frozen=True)
class SessionWindows:
    """Sessions of activity separated by at least ``gap`` of inactivity, per key.

    Two rules for late records (SEMANTICS section 5):

    - windows built with ``with_inactivity_gap(gap)`` (and ``.until(retention)``) have no
      grace of their own: sessions are kept for ``retention`` after their end, and a late
      record that merges with none of them still makes a (not stored) one-record session;
    - windows built with ``of_inactivity_gap_and_grace(gap, grace)`` (or
      ``of_inactivity_gap_with_no_grace``) follow Kafka's grace rule: a record whose merged
      session ends before ``stream_time - gap - grace`` is dropped; ``.until(r)`` then only
      sets how long the store keeps sessions (``r >= gap + grace``).
    """

    gap_ms: int
    retention_ms: int = DEFAULT_RETENTION_MS
    #: the grace given to ``of_inactivity_gap_and_grace`` (None: the seed's rule)
    declared_grace_ms: int | None = None

    @classmethod
    def with_inactivity_gap(cls, gap: Duration) -> SessionWindows:
        """Sessions closed by ``gap`` (> 0) without records; retention one day or the gap."""
        ms = _positive(gap, "inactivity gap")
        return cls(ms, max(ms, DEFAULT_RETENTION_MS))

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions closed by ``gap`` that still merge records ``grace`` after ``end + gap``;
        a record later than that is dropped (``dropped-records``). Kept for ``gap + grace``."""
        ms = _positive(gap, "inactivity gap")
        grace_ms = to_millis(grace, "grace period")
        if grace_ms < 0:
            raise ValueError(f"grace period must not be negative, got {grace_ms} ms")
        return cls(ms, ms + grace_ms, grace_ms)

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        """Sessions closed by ``gap`` that accept no late records (grace 0)."""
        return cls.of_inactivity_gap_and_grace(gap, 0)

    @property
    def grace_ms(self) -> int:
        """How long after ``end + gap`` a session still merges records: the declared grace,
        or, for windows without one, retention - gap."""
        if self.declared_grace_ms is not None:
            return self.declared_grace_ms
        return self.retention_ms - self.gap_ms

    @property
    def close_after_ms(self) -> int:
        """A session is closed once stream time is past ``end + close_after_ms``."""
        return self.gap_ms + self.grace_ms

    def until(self, retention: Duration) -> SessionWindows:
        """Keep sessions for ``retention`` of stream time after their end (>= the gap, and
        >= gap + grace for windows with a grace)."""
        ms = to_millis(retention, "session retention")
        if ms < self.gap_ms:
            raise ValueError(
                f"session retention ({ms} ms) must be at least the inactivity gap "
                f"({self.gap_ms} ms): a shorter one would expire sessions that can still merge"
            )
        if self.declared_grace_ms is not None and ms < self.close_after_ms:
            raise ValueError(
                f"session retention ({ms} ms) must be at least the gap plus grace "
                f"({self.close_after_ms} ms): sessions must be kept while they accept records"
            )
        return replace(self, retention_ms=ms)

    def __repr__(self) -> str:
        grace = "" if self.declared_grace_ms is None else f", grace={self.declared_grace_ms} ms"
        return f"SessionWindows(gap={self.gap_ms} ms, retention={self.retention_ms} ms{grace})"


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of a fixed time difference that slide with the records (Kafka's KIP-450).

    A window ``[start, start + time_difference]`` (both ends inclusive) exists for every
    distinct set of a key's records that lie at most ``time_difference`` apart: each record
    creates the window that ends at it (its left window) and, when later records follow within
    the difference, the window that starts just after it (its right window). A window accepts
    records while ``end >= stream_time - grace``.
    """

    time_difference_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_and_grace(
        cls, time_difference: Duration, grace: Duration
    ) -> SlidingWindows:
        """Windows of ``time_difference`` (> 0) accepting records ``grace`` after their end."""
        difference = _positive(time_difference, "sliding window time difference")
        grace_ms = to_millis(grace, "grace period")
        if grace_ms < 0:
            raise ValueError(f"grace period must not be negative, got {grace_ms} ms")
        return cls(difference, grace_ms)

    @classmethod
    def of_time_difference_without_grace(cls, time_difference: Duration) -> SlidingWindows:
        """Windows of ``time_difference`` that close at their end (grace 0)."""
        return cls.of_time_difference_and_grace(time_difference, 0)

    of_time_difference_with_no_grace = of_time_difference_without_grace

    def __repr__(self) -> str:
        return (
            f"SlidingWindows(time_difference={self.time_difference_ms} ms, "
            f"grace={self.grace_ms} ms)"
        )
