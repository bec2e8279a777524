"""Where sinks send serialized records: the engine writes segments, the test driver lists."""

from __future__ import annotations

from typing import Any, Protocol


class RecordCollector(Protocol):
    """Receives every record a task produces (outputs, repartition and DLQ records)."""

    def partitions_for(self, topic: str) -> int:
        """Number of partitions of a physical topic."""
        ...

    def send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
    ) -> None: ...


def send_records(
    collector: RecordCollector,
    topic: str,
    partition: int,
    records: list[tuple[bytes, bytes | None, Any]],
    timestamp: int,
) -> None:
    """Send ``(key, value, headers)`` records, in one call if the collector has ``send_many``."""
    send_many = getattr(collector, "send_many", None)
    if send_many is not None:
        keys, values, headers = zip(*records)
        send_many(topic, partition, list(keys), list(values), [timestamp] * len(keys), headers)
        return
    for key, value, headers in records:
        collector.send(topic, partition, key, value, timestamp, headers)
