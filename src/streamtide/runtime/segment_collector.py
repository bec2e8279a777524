"""Collects what a task attempt produces, for the work unit to write as unsealed segments.

Nothing a task writes is visible until the driver seals the attempt's segments at stage
commit (docs/engine.md, "One batch"); this collector is the attempt's side of that protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from streamtide.errors import UnknownTopicError
from streamtide.log.api import Log
from streamtide.log.segments import headers_array


class _Columns:
    """One partition's pending records, column by column (four appends per record, but no
    object per record that the garbage collector would have to walk until the segment is
    written: rows as tuples made large batches slower)."""

    __slots__ = ("headers", "keys", "timestamps", "values")

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[Any] = []

    def table(self) -> pa.Table:
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array(self.timestamps, pa.int64()),
        ]
        names = ["key", "value", "timestamp"]
        if any(self.headers):
            columns.append(headers_array(self.headers))
            names.append("headers")
        return pa.Table.from_arrays(columns, names=names)


class SegmentCollector:
    """A ``RecordCollector`` that buffers records per partition as columns, for the work unit
    to write (``runtime.unit_writes``) or a Kafka transaction to send."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._partitions: dict[str, int] = {}
        self._pending: dict[tuple[str, int], _Columns] = {}

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

    def _columns(self, topic: str, partition: int) -> _Columns:
        columns = self._pending.get((topic, partition))
        if columns is None:
            self.partitions_for(topic)
            columns = self._pending[(topic, partition)] = _Columns()
        return columns

    def send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        columns = self._pending.get((topic, partition))
        if columns is None:
            columns = self._columns(topic, partition)
        columns.keys.append(key)
        columns.values.append(value)
        columns.timestamps.append(timestamp)
        columns.headers.append(headers or ())

    def send_many(
        self,
        topic: str,
        partition: int,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        timestamps: Sequence[int],
        headers: Sequence[Any],
    ) -> None:
        """``send`` of whole columns (one partition)."""
        columns = self._columns(topic, partition)
        columns.keys.extend(keys)
        columns.values.extend(values)
        columns.timestamps.extend(timestamps)
        columns.headers.extend(headers)

    def record_count(self) -> int:
        return sum(len(columns.keys) for columns in self._pending.values())

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (topic, _), columns in self._pending.items():
            out[topic] = out.get(topic, 0) + len(columns.keys)
        return out

    def drain(self) -> list[tuple[str, int, _Columns]]:
        """Take every partition's pending records (``(topic, partition, columns)``, in topic
        and partition order), for a log that commits them itself (Kafka transactions)."""
        pending = [(t, p, c) for (t, p), c in sorted(self._pending.items()) if c.keys]
        self._pending.clear()
        return pending

    def take_tables(self) -> list[tuple[str, int, pa.Table]]:
        """Take every partition's pending records as a table (in topic and partition order),
        for the work unit to write with its other tasks' (``Log.write_segments``)."""
        return [(t, p, c.table()) for t, p, c in self.drain()]
