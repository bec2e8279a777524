"""The record that flows through a topology."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record came from: its topic, partition and offset."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Record:
    """Key, value, timestamp (epoch ms) and headers; immutable, ``with_*`` make copies."""

    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = field(default=())

    def with_key(self, key: Any) -> Record:
        return replace(self, key=key)

    def with_value(self, value: Any) -> Record:
        return replace(self, value=value)

    def with_timestamp(self, timestamp: int) -> Record:
        return replace(self, timestamp=timestamp)

    def with_headers(self, headers: tuple[tuple[str, bytes], ...]) -> Record:
        return replace(self, headers=tuple(headers))
