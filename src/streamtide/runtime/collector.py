"""Where sinks send serialized records: the engine writes segments, the test driver lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


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


@runtime_checkable
class ColumnCollector(RecordCollector, Protocol):
    """A collector that also takes many records of one partition in one call (the engine's
    segment collector does; the test driver's lists records one by one)."""

    def send_many(
        self,
        topic: str,
        partition: int,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        timestamps: Sequence[int],
        headers: Sequence[Any],
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
    is a ``ColumnCollector``."""
    if isinstance(collector, ColumnCollector):
        collector.send_many(topic, partition, keys, values, [timestamp] * len(keys), headers)
        return
    for key, value, header in zip(keys, values, headers):
        collector.send(topic, partition, key, value, timestamp, header)
