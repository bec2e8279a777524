"""Timestamp extractors: the function that decides a consumed record's timestamp.

``fn(record, partition_time) -> int`` gets the consumed record as a ``ConsumerRecord`` (key and
value deserialized, the timestamp stored in the log, headers, topic, partition and offset) and
the partition time: the highest timestamp extracted so far from that partition (``-1`` before
the first). Its result becomes the record's timestamp: the partition group orders records by
it, stream time advances with it, and it is the timestamp every processor sees. A negative
result follows ``invalid_timestamp_handler``. Set one per source with
``Consumed.with_(..., timestamp_extractor=fn)`` or for all sources with
``StreamsConfig.default_timestamp_extractor``; None keeps the record's own timestamp.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtide.errors import ConfigError
from streamtide.names import resolve_name


@dataclass(frozen=True)
class ConsumerRecord:
    """A consumed record as a timestamp extractor sees it."""

    topic: str
    partition: int
    offset: int | None
    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


#: ``fn(record, partition_time) -> timestamp``.
TimestampExtractor = Callable[[ConsumerRecord, int], int]


def extractor_named(name: Any, where: str) -> TimestampExtractor:
    """The function a dotted name (``module.function`` or ``module:function``) names."""
    usage = "name a timestamp extractor as module.function"
    found = resolve_name(name, where, "timestamp extractor", usage)
    if not callable(found):
        raise ConfigError(f"{where}: {name!r} is not callable")
    return found


def wallclock_timestamp(record: ConsumerRecord, partition_time: int) -> int:
    """Processing time: the current wall-clock time in ms (Kafka's WallclockTimestampExtractor)."""
    return time.time_ns() // 1_000_000


def use_partition_time_on_invalid_timestamp(record: ConsumerRecord, partition_time: int) -> int:
    """The record's own timestamp, or the partition time when it is negative (Kafka's
    UsePartitionTimeOnInvalidTimestamp); still negative before the partition's first record."""
    return record.timestamp if record.timestamp >= 0 else partition_time
