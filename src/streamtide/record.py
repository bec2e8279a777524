"""The record that flows through a topology."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record came from: its topic, partition and offset."""

    topic: str
    partition: int
    offset: int


class Record:
    """Key, value, timestamp (epoch ms) and headers; immutable, ``with_*`` make copies.

    A plain class with slots rather than a frozen dataclass: every record of a batch is built
    once or more, and this construction costs less than half as much.
    """

    __slots__ = ("headers", "key", "timestamp", "value")

    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes], ...]

    def __init__(
        self,
        key: Any,
        value: Any,
        timestamp: int,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        _set_key(self, key)
        _set_value(self, value)
        _set_timestamp(self, timestamp)
        _set_headers(self, headers)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _fields(self) -> tuple[Any, Any, int, tuple[tuple[str, bytes], ...]]:
        return self.key, self.value, self.timestamp, self.headers

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Record:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Record(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp!r}, "
            f"headers={self.headers!r})"
        )

    def __reduce__(self) -> tuple[type[Record], tuple[Any, ...]]:
        return Record, self._fields()

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: tuple[tuple[str, bytes], ...]) -> Record:
        return Record(self.key, self.value, self.timestamp, tuple(headers))


# the slots' member descriptors: setting through them skips the frozen __setattr__
_set_key = vars(Record)["key"].__set__
_set_value = vars(Record)["value"].__set__
_set_timestamp = vars(Record)["timestamp"].__set__
_set_headers = vars(Record)["headers"].__set__
