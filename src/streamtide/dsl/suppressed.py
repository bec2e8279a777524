"""``KTable.suppress`` options (Kafka's KIP-328): what to hold back, and how big the buffer
may grow.

``Suppressed.until_window_closes(BufferConfig.unbounded())`` emits only each window's final
result, once stream time reaches its end plus grace (plus the gap, for sessions);
``Suppressed.until_time_limit(d, buffer)`` emits a key's latest value once ``d`` of stream time
passed since the key was first buffered. Both are immutable values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from streamtide.time import Duration, to_millis


class BufferFull(enum.Enum):
    """What a full suppression buffer does."""

    #: emit the oldest records early (only for ``until_time_limit``)
    EMIT_EARLY = "emit_early"
    #: stop the application with an error naming the buffer and its limits
    SHUT_DOWN = "shut_down"


def _limit(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return value


@dataclass(frozen=True)
class BufferConfig:
    """Limits of a suppression buffer: records and bytes (None: unlimited), and what to do
    when one is exceeded. A record's size is its key and value bytes, its headers, and 28
    bytes of buffer time, timestamp, offset and partition (Kafka's estimate)."""

    records_limit: int | None = None
    bytes_limit: int | None = None
    when_full: BufferFull = BufferFull.SHUT_DOWN

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """No limit: the buffer holds whatever is still suppressed."""
        return cls()

    @classmethod
    def max_records(cls, records: int) -> BufferConfig:
        """At most ``records`` keys; when exceeded, emit the oldest early."""
        return cls(_limit(records, "max_records"), None, BufferFull.EMIT_EARLY)

    @classmethod
    def max_bytes(cls, size: int) -> BufferConfig:
        """At most ``size`` bytes; when exceeded, emit the oldest early."""
        return cls(None, _limit(size, "max_bytes"), BufferFull.EMIT_EARLY)

    def with_max_records(self, records: int) -> BufferConfig:
        return replace(self, records_limit=_limit(records, "max_records"))

    def with_max_bytes(self, size: int) -> BufferConfig:
        return replace(self, bytes_limit=_limit(size, "max_bytes"))

    def with_no_bound(self) -> BufferConfig:
        return replace(self, records_limit=None, bytes_limit=None)

    def emit_early_when_full(self) -> BufferConfig:
        """When full, emit the oldest records before their time (not for final results)."""
        return replace(self, when_full=BufferFull.EMIT_EARLY)

    def shutdown_when_full(self) -> BufferConfig:
        """When full, stop the application with an error (no result is ever emitted early)."""
        return replace(self, when_full=BufferFull.SHUT_DOWN)

    def is_over(self, records: int, size: int) -> bool:
        return (self.records_limit is not None and records > self.records_limit) or (
            self.bytes_limit is not None and size > self.bytes_limit
        )


@dataclass(frozen=True)
class Suppressed:
    """What ``KTable.suppress`` holds back; build it with the class methods."""

    final_results: bool
    time_limit_ms: int
    buffer: BufferConfig
    name: str | None = None

    @classmethod
    def until_window_closes(cls, buffer: BufferConfig) -> Suppressed:
        """Only each window's final result, when the window closes (windowed tables only).
        The buffer must never emit early: use ``unbounded()`` or ``shutdown_when_full()``."""
        if not isinstance(buffer, BufferConfig):
            raise TypeError(f"until_window_closes() needs a BufferConfig, got {buffer!r}")
        if buffer.when_full is BufferFull.EMIT_EARLY:
            raise ValueError(
                "until_window_closes() needs a buffer that never emits early (a result "
                "emitted early would not be final): use BufferConfig.unbounded() or "
                "add .shutdown_when_full()"
            )
        return cls(True, 0, buffer)

    @classmethod
    def until_time_limit(cls, time_to_wait: Duration, buffer: BufferConfig) -> Suppressed:
        """A key's latest value once ``time_to_wait`` of stream time passed since the key
        entered the buffer (later updates replace the value, not the time)."""
        ms = to_millis(time_to_wait, "time to wait for more events")
        if ms < 0:
            raise ValueError(f"time to wait for more events must not be negative, got {ms} ms")
        if not isinstance(buffer, BufferConfig):
            raise TypeError(f"until_time_limit() needs a BufferConfig, got {buffer!r}")
        return cls(False, ms, buffer)

    def with_name(self, name: str) -> Suppressed:
        """Name the suppress node (and its buffer store ``<name>-store``)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a suppress name must be a non-empty string, got {name!r}")
        return replace(self, name=name)
