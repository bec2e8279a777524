"""Marks of source partitions: how a reader knows its topic is the one it read before.

A committed offset means something only for the topic it was committed against. A topic that
was deleted and re-created has the same name, and may be shorter, as long or longer; reading
it from the old offset skips or misreads records. Logs that give topics ids (the file log;
Kafka brokers that report them) tell it by the id. Where there is none, a reader keeps a
*mark* of the last record it consumed below its committed offset: that record's offset,
timestamp and a checksum of its key and value. The record at that offset is the same as long
as the topic is (records are immutable); a re-created topic holds another one there, or none.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamtide.log.errors import LogError


@dataclass(frozen=True)
class SourceMark:
    """The last record a task consumed from a partition: its offset, timestamp and crc32."""

    offset: int
    timestamp: int
    crc: int

    def to_list(self) -> list[int]:
        return [self.offset, self.timestamp, self.crc]

    @classmethod
    def from_list(cls, data: Any) -> SourceMark:
        offset, timestamp, crc = (int(v) for v in data)
        return cls(offset, timestamp, crc)

    def describe(self) -> str:
        return f"offset {self.offset} (timestamp {self.timestamp}, crc {self.crc:08x})"


def record_crc(key: bytes | None, value: bytes | None) -> int:
    """A checksum of a record's key and value (a null one differs from an empty one)."""
    crc = zlib.crc32(b"\x00" if key is None else b"\x01" + key)
    return zlib.crc32(b"\x00" if value is None else b"\x01" + value, crc)


def last_mark(table: Any) -> SourceMark | None:
    """The mark of the last record of a read table (columns offset, key, value, timestamp);
    None for an empty one."""
    if table.num_rows == 0:
        return None
    last = table.slice(table.num_rows - 1, 1).to_pylist()[0]
    return SourceMark(last["offset"], last["timestamp"], record_crc(last["key"], last["value"]))


def mark_holds(log: Any, topic: str, partition: int, mark: SourceMark) -> bool | None:
    """Whether the partition still holds the marked record: True, False (it holds another
    record there, or none where it should), or None when that cannot be told (the records up
    to the mark were deleted, by retention or ``truncate_before``)."""
    if mark.offset < log.begin_offset(topic, partition):
        return None
    if mark.offset >= log.end_offset(topic, partition):
        return False
    try:
        found = next(iter(log.read(topic, partition, mark.offset, mark.offset + 1)), None)
    except LogError:
        return None  # deleted meanwhile
    if found is None or found.offset != mark.offset:
        return False
    return found.timestamp == mark.timestamp and record_crc(found.key, found.value) == mark.crc


Key = tuple[str, int]


def marks_hold(
    log: Any, marks: Mapping[Key, SourceMark], begins: Mapping[Key, int], ends: Mapping[Key, int]
) -> dict[Key, bool | None]:
    """``mark_holds`` of many partitions, given their begin and end offsets: the marked
    records are read together where the log can (Kafka's ``records_at``: one consumer for
    all of them), and one by one where it cannot tell from that."""
    held: dict[Key, bool | None] = {}
    wanted = {}
    for key, mark in marks.items():
        if mark.offset < begins[key]:
            held[key] = None
        elif mark.offset >= ends[key]:
            held[key] = False
        else:
            wanted[key] = mark.offset
    found = log.records_at(wanted) if wanted and hasattr(log, "records_at") else {}
    for key in wanted:
        mark = marks[key]
        if key in found:
            timestamp, k, v = found[key]
            held[key] = timestamp == mark.timestamp and record_crc(k, v) == mark.crc
        else:
            held[key] = mark_holds(log, key[0], key[1], mark)
    return held
