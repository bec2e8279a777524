"""Where a stage reads a source partition from: its committed offset, checked first.

A committed offset only means something for the topic it was committed against. When the
topic was deleted and re-created (its id changed, or, on a log without topic ids, it no longer
holds the record read last before the committed offset), or now ends before the committed
offset, or no longer holds it, reading on would silently skip or misread records. The application
stops with ``InputTopicChangedError`` unless ``auto_offset_reset`` says where to continue:
``"earliest"`` (the first offset still held) or ``"latest"`` (the end). A partition without
a committed offset starts at the earliest offset, or at the end with ``"latest"``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streamtide.errors import InputTopicChangedError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourcePosition:
    """What the driver knows of one source partition when it fixes a range."""

    topic: str
    partition: int
    committed: int | None
    begin: int
    end: int
    committed_topic_id: str | None = None
    topic_id: str | None = None
    #: where the log has no topic ids: the record the task read last before the committed
    #: offset, if the partition no longer holds it (``log.source_marks``)
    lost_record: str | None = None


def problem(pos: SourcePosition) -> str | None:
    """Why the committed offset cannot be used as it is, or None."""
    if pos.committed is None:
        return None
    known = pos.committed_topic_id is not None and pos.topic_id is not None
    if known and pos.committed_topic_id != pos.topic_id:
        return (
            f"topic {pos.topic!r} was deleted and re-created (id {pos.committed_topic_id} "
            f"when offset {pos.committed} was committed, now {pos.topic_id})"
        )
    if pos.lost_record is not None:
        return (
            f"topic {pos.topic!r} was deleted and re-created: partition {pos.partition} no "
            f"longer holds the record the application read at {pos.lost_record}, before the "
            f"committed offset {pos.committed}"
        )
    if pos.committed > pos.end:
        return (
            f"partition {pos.partition} of topic {pos.topic!r} ends at offset {pos.end}, before "
            f"the committed offset {pos.committed} (was it re-created or truncated?)"
        )
    if pos.committed < pos.begin:
        return (
            f"partition {pos.partition} of topic {pos.topic!r} begins at offset {pos.begin}: "
            f"the records from the committed offset {pos.committed} on were deleted"
        )
    return None


def input_start(pos: SourcePosition, auto_offset_reset: str | None) -> int:
    """The offset to read ``pos`` from; raises ``InputTopicChangedError`` when the committed
    offset is unusable and no reset policy is set."""
    if pos.committed is None:
        return pos.end if auto_offset_reset == "latest" else pos.begin
    why = problem(pos)
    if why is None:
        return pos.committed
    if auto_offset_reset is None:
        raise InputTopicChangedError(
            f"cannot continue reading: {why}; set auto_offset_reset to 'earliest' or "
            "'latest' to continue from there"
        )
    start = pos.begin if auto_offset_reset == "earliest" else pos.end
    log.warning("%s; auto_offset_reset=%s: reading from offset %d", why, auto_offset_reset, start)
    return start
