"""Errors of the log layer; all derive from ``streamtide.errors.LogError``."""

from __future__ import annotations

from streamtide.errors import CorruptLogError, LogError, SegmentError, UnknownTopicError

__all__ = [
    "CorruptLogError",
    "LogClosedError",
    "LogError",
    "LogUnavailableError",
    "OffsetOutOfRangeError",
    "ProducerFencedError",
    "SealConflictError",
    "SegmentError",
    "TopicExistsError",
    "UnknownPartitionError",
    "UnknownTopicError",
    "UnsupportedOperationError",
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


class LogUnavailableError(LogError):
    """The log's servers cannot be reached or did not answer in time (Kafka brokers down,
    unreachable, or refusing the credentials). Retrying later may succeed."""


class UnsupportedOperationError(LogError):
    """This kind of log does not offer the operation (for example segment sealing, which
    only the file log's commit protocol uses)."""


class ProducerFencedError(LogError):
    """A newer attempt of the same transactional write took over (Kafka fenced this producer):
    this attempt's uncommitted records are discarded and it must stop."""
