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
