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


def send_columns(
    collector: RecordCollector,
    topic: str,
    partition: int,
    keys: list[bytes],
    values: list[bytes | None],
    headers: list[Any],
    timestamp: int,
) -> None:
    """Send records given as columns (one timestamp for all), in one call if the collector
    has ``send_many``."""
    send_many = getattr(collector, "send_many", None)
    if send_many is not None:
        send_many(topic, partition, keys, values, [timestamp] * len(keys), headers)
        return
    for key, value, header in zip(keys, values, headers):
        collector.send(topic, partition, key, value, timestamp, header)
