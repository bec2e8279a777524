"""Collects what a task attempt produces and writes it as unsealed log segments.

Nothing a task writes is visible until the driver seals the attempt's segments at stage
commit (docs/engine.md, "One batch"); this collector is the attempt's side of that protocol.
"""

from __future__ import annotations

from typing import Any

from streamtide.errors import UnknownTopicError
from streamtide.log.api import Log, LogRecord, SegmentRef


class SegmentCollector:
    """A ``RecordCollector`` that buffers records per partition, then writes segments."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._partitions: dict[str, int] = {}
        self._pending: dict[tuple[str, int], list[LogRecord]] = {}

    def partitions_for(self, topic: str) -> int:
        count = self._partitions.get(topic)
        if count is None:
            if not self.log.has_topic(topic):
                raise UnknownTopicError(
                    f"topic {topic!r} does not exist; create it before running the topology "
                    f"(streamtide topics create {topic} --partitions N)"
                )
            count = self._partitions[topic] = self.log.partitions(topic)
        return count

    def send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        records = self._pending.get((topic, partition))
        if records is None:
            self.partitions_for(topic)
            records = self._pending[(topic, partition)] = []
        records.append(LogRecord(key, value, timestamp, tuple(headers or ())))

    def record_count(self) -> int:
        return sum(len(records) for records in self._pending.values())

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (topic, _), records in self._pending.items():
            out[topic] = out.get(topic, 0) + len(records)
        return out

    def write_segments(self, writer_id: str) -> list[SegmentRef]:
        """Write one unsealed segment per partition that received records."""
        refs = []
        for (topic, partition), records in sorted(self._pending.items()):
            if records:
                refs.append(self.log.write_segment(topic, partition, records, writer_id=writer_id))
        self._pending.clear()
        return refs
