"""Records of one batch as parallel columns, handed from node to node (the column lane).

When every node below a task's source can take whole columns (a batch twin that declares
``columnar``, and sinks), the task hands them one ``ColumnBatch`` per batch instead of one
``Record`` per row. Each row keeps what a record would carry plus what the task would have
known while processing it: its source offset and the stream time after it (stream time moves
on every input record, also those an upstream node drops). The task takes this lane only when
nothing else could happen between two records: input of one source topic, no punctuation
falling due within the batch, no wall-clock schedule, no deserialization error and no
negative timestamp (docs/engine.md, "Batch processing").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class ColumnBatch:
    """Rows in processing order; ``rows`` are their indices in the source's input columns
    (``source``, an ``InputColumns``), for error reports that need the raw record."""

    topic: str
    partition: int
    source: Any
    rows: list[int]
    keys: list[Any]
    values: list[Any]
    timestamps: list[int]
    headers: list[Any]
    offsets: list[int | None]
    stream_times: list[int]

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, positions: list[int]) -> ColumnBatch:
        """The rows at ``positions`` (ascending), as a batch of their own."""
        if len(positions) == len(self.rows):
            return self
        return ColumnBatch(
            self.topic,
            self.partition,
            self.source,
            [self.rows[i] for i in positions],
            [self.keys[i] for i in positions],
            [self.values[i] for i in positions],
            [self.timestamps[i] for i in positions],
            [self.headers[i] for i in positions],
            [self.offsets[i] for i in positions],
            [self.stream_times[i] for i in positions],
        )
