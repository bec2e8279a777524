"""Errors of the log layer; all derive from ``streamtide.errors.LogError``."""

from __future__ import annotations

from streamtide.errors import CorruptLogError, LogError, SegmentError, UnknownTopicError

__all__ = [
    "CorruptLogError",
    "LogClosedError",
    "LogError",
    "OffsetOutOfRangeError",
    "SealConflictError",
    "SegmentError",
    "TopicExistsError",
    "UnknownPartitionError",
    "UnknownTopicError",
]


class TopicExistsError(LogError):
    """``create_topic`` was asked for a topic that already exists."""


class UnknownPartitionError(LogError):
    """A partition number outside ``[0, partitions)`` of an existing topic."""


class OffsetOutOfRangeError(LogError):
    """A read or truncation asked for offsets outside ``[begin_offset, end_offset]``."""


class SealConflictError(SegmentError):
    """A seal would duplicate data: the seal_id names another segment, or the segment was
    already sealed under another seal_id."""


class LogClosedError(LogError):
    """The log handle was used after ``close()``."""
