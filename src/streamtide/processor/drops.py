"""Why a task dropped a record: the reasons its dropped-record counts are split by.

Every drop still counts in the task's ``dropped-records`` metric (as in Kafka Streams); the
reason goes into ``dropped-records.<reason>`` as well, which the engine exports as
``streamtide_records_dropped_total{task,reason}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamtide.processor.api import Metrics

#: Later than the grace period of every window the record belongs to: dropped as a whole.
LATE = "late"
#: A record that still updates some windows is dropped for one that has closed (hopping).
EXPIRED_WINDOW = "expired_window"
#: The key or value could not be deserialized (``log_and_continue`` skipped it).
DESERIALIZATION_ERROR = "deserialization_error"
#: A processor raised for the record and ``processing_exception_handler`` chose to go on.
PROCESSING_ERROR = "processing_error"
#: The record's timestamp is negative.
INVALID_TIMESTAMP = "invalid_timestamp"
#: An aggregation or repartition got a record without key (or without value).
NULL_KEY_OR_VALUE = "null_key_or_value"

REASONS = (
    LATE,
    EXPIRED_WINDOW,
    DESERIALIZATION_ERROR,
    PROCESSING_ERROR,
    INVALID_TIMESTAMP,
    NULL_KEY_OR_VALUE,
)

DROPPED = "dropped-records"
PREFIX = f"{DROPPED}."


def record_drop(metrics: Metrics, reason: str, *, count_total: bool = True) -> None:
    """Count one dropped record for ``reason`` (and in ``dropped-records`` unless the caller
    counts that itself)."""
    if count_total:
        metrics.increment(DROPPED)
    metrics.increment(PREFIX + reason)


def record_drops(metrics: Metrics, reason: str, count: int) -> None:
    """Count ``count`` dropped records for ``reason`` (and in ``dropped-records``): an
    operator counts a batch's drops at once."""
    metrics.increment(DROPPED, count)
    metrics.increment(PREFIX + reason, count)
