"""Test input and output topics of the ``TopologyTestDriver``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from streamtide.record import Record
from streamtide.serde import Serde

if TYPE_CHECKING:
    from streamtide.testing.driver import TopologyTestDriver


class TestInputTopic:
    """Serializes test records and pipes them into the topology, one at a time."""

    __test__ = False  # not a pytest test class

    def __init__(
        self, driver: TopologyTestDriver, topic: str, key_serde: Serde, value_serde: Serde
    ) -> None:
        self.driver = driver
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde

    def pipe_input(
        self,
        key: Any,
        value: Any,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, bytes]] = (),
    ) -> None:
        """Send one record (timestamp defaults to the driver's wall clock) and process it."""
        self._pipe(Record(key, value, self._timestamp(timestamp), tuple(headers)))
        self.driver.commit()

    def pipe_value(self, value: Any, timestamp: int | None = None) -> None:
        self.pipe_input(None, value, timestamp)

    def pipe_record_list(self, records: Iterable[Record | tuple]) -> None:
        """Send several records, then commit once (caches emit once for the whole list).

        Items are ``Record`` objects or ``(key, value)`` / ``(key, value, timestamp)`` tuples.
        """
        for item in records:
            if isinstance(item, Record):
                record = item
            else:
                key, value, *rest = item
                record = Record(key, value, self._timestamp(rest[0] if rest else None))
            self._pipe(record)
        self.driver.commit()

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        self.pipe_record_list(pairs)

    def _timestamp(self, timestamp: int | None) -> int:
        return self.driver.wall_clock_ms if timestamp is None else int(timestamp)

    def _pipe(self, record: Record) -> None:
        self.driver.pipe_raw(
            self.topic,
            self.key_serde.serialize(record.key),
            self.value_serde.serialize(record.value),
            record.timestamp,
            record.headers,
        )


class TestOutputTopic:
    """Reads what the topology wrote to one topic, deserialized, from a private cursor."""

    __test__ = False

    def __init__(
        self, driver: TopologyTestDriver, topic: str, key_serde: Serde, value_serde: Serde
    ) -> None:
        self.driver = driver
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._position = 0

    def _take(self) -> list[Any]:
        records = self.driver.topic_records(self.topic)[self._position :]
        self._position += len(records)
        return records

    def read_records(self) -> list[Record]:
        """Every unread record, as ``Record`` (key, value, timestamp, headers)."""
        kd, vd = self.key_serde.deserialize, self.value_serde.deserialize
        return [Record(kd(r.key), vd(r.value), r.timestamp, tuple(r.headers)) for r in self._take()]

    def read_record(self) -> Record:
        if self.is_empty():
            raise IndexError(f"no unread record in topic {self.topic!r}")
        raw = self.driver.topic_records(self.topic)[self._position]
        self._position += 1
        return Record(
            self.key_serde.deserialize(raw.key),
            self.value_serde.deserialize(raw.value),
            raw.timestamp,
            tuple(raw.headers),
        )

    def read_key_values(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records()]

    def read_values(self) -> list[Any]:
        return [r.value for r in self.read_records()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """Latest value per key, as a table would hold it (None values remove the key)."""
        table: dict[Any, Any] = {}
        for key, value in self.read_key_values():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        return table

    def queue_size(self) -> int:
        return len(self.driver.topic_records(self.topic)) - self._position

    def is_empty(self) -> bool:
        return self.queue_size() == 0
