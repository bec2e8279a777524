"""A task's buffered input as columns.

The work unit reads each input range as one Arrow table; its columns become Python lists
once, instead of one record object per row. ``BatchInput.take`` hands a whole batch to the
task together with its processing order: the partition group's rule (the head record with the
lowest timestamp next, ties to the lowest source index), which is a merge of the per-partition
sequences by their heads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from streamtide.log.segments import headers_to_python
from streamtide.runtime.repartition_order import merge_order


class RawRecord(Protocol):
    """A serialized record read from a partition (read only)."""

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def headers(self) -> Any: ...

    @property
    def offset(self) -> int | None: ...


@dataclass
class InputColumns:
    """Records of one source partition, in offset order, column by column."""

    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    headers: list[Any] = field(default_factory=list)
    offsets: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.timestamps)

    def extend_records(self, records: Iterable[RawRecord]) -> int:
        before = len(self.timestamps)
        for record in records:
            self.keys.append(record.key)
            self.values.append(record.value)
            self.timestamps.append(record.timestamp)
            self.headers.append(tuple(record.headers or ()))
            self.offsets.append(record.offset)
        return len(self.timestamps) - before

    def extend_table(self, table: pa.Table) -> int:
        """Append the rows of a ``Log.read_table`` result (columns offset, key, value,
        timestamp, headers)."""
        rows: int = table.num_rows
        if not rows:
            return 0
        self.keys.extend(table.column("key").to_pylist())
        self.values.extend(table.column("value").to_pylist())
        self.timestamps.extend(table.column("timestamp").to_pylist())
        self.offsets.extend(table.column("offset").to_pylist())
        self.headers.extend(headers_to_python(table.column("headers")))
        return rows


class BatchInput:
    """One ``InputColumns`` per source topic of a task (see the module docstring)."""

    def __init__(self, topics: list[str]) -> None:
        self._topics = list(topics)
        self._columns = {topic: InputColumns() for topic in topics}

    def add_topic(self, topic: str) -> None:
        """Buffer ``topic`` too (a topic a pattern source matched while the task ran)."""
        if topic not in self._columns:
            self._topics.append(topic)
            self._columns[topic] = InputColumns()

    def _queue(self, topic: str) -> InputColumns:
        columns = self._columns.get(topic)
        if columns is None:
            raise KeyError(f"topic {topic!r} is not a source of this task")
        return columns

    def add_records(self, topic: str, records: Iterable[RawRecord]) -> int:
        return self._queue(topic).extend_records(records)

    def add_table(self, topic: str, table: pa.Table) -> int:
        return self._queue(topic).extend_table(table)

    def __len__(self) -> int:
        return sum(len(c) for c in self._columns.values())

    def buffered(self, topic: str) -> int:
        return len(self._queue(topic))

    def take(self) -> tuple[list[tuple[str, InputColumns]], list[tuple[int, int]] | None]:
        """Remove and return everything buffered: the non-empty topics' columns (in source
        order) and the processing order as ``(index into that list, row)`` pairs, or None
        when only one topic has input (then rows are processed in order)."""
        taken = []
        for topic in self._topics:
            columns = self._columns[topic]
            if len(columns):
                taken.append((topic, columns))
                self._columns[topic] = InputColumns()
        return taken, processing_order(taken)


def processing_order(
    taken: list[tuple[str, InputColumns]],
) -> list[tuple[int, int]] | None:
    """The partition group's order of ``taken`` by the columns' timestamps (see
    ``BatchInput.take``)."""
    if len(taken) <= 1:
        return None
    return merge_order([columns.timestamps for _, columns in taken])
