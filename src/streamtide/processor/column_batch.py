"""``ColumnBatch``: the rows a node hands to its children, as parallel columns.

A task cuts its input into pieces (``runtime.stream_task``) and hands each piece to the
source node as one batch; every operator hands its output to its children the same way
(``processor.operator``). Each row keeps what a record carries (key, value, timestamp,
headers) plus what the task knew while it would have processed that record one at a time:
the offset of the input record it derives from, the stream time right after that input
record (stream time moves on every input record, also on those an upstream operator drops),
and the input row itself (``rows``: its index in the piece's raw input ``source``), which an
operator names when a user function fails for the row and which the task uses to hand the
raw record to the error handlers.

Rows made outside input processing (by a punctuator, or by a cache at commit) derive from
no input row: their ``rows`` entry is ``NO_ROW`` and their offset is None, as the record
metadata of such records is.

Rows that derive from one input row are always next to each other in a batch (an operator
emits the outputs of one input row together), which ``row_end`` relies on.

A source hands its values on as the bytes it read when nothing below reads them but to test
them for None (``runtime.source.SourceNode``); the batch then names the serde that would
deserialize them (``encoded_values``), and ``record`` gives the deserialized value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamtide.record import Record
from streamtide.serde import Serde

#: The ``rows`` entry of a row that derives from no input row (punctuation, commit).
NO_ROW = -1


@dataclass(slots=True)
class ColumnBatch:
    """Rows in processing order, one list per column (see the module docstring)."""

    topic: str | None
    partition: int
    source: Any
    rows: list[int]
    keys: list[Any]
    values: list[Any]
    timestamps: list[int]
    headers: list[Any]
    offsets: list[int | None]
    stream_times: list[int]
    #: the serde of ``values`` when they are still bytes (see the module docstring)
    encoded_values: Serde[Any] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def unsourced(
        cls,
        partition: int,
        keys: list[Any],
        values: list[Any],
        timestamps: list[int],
        headers: list[Any],
        stream_time: int,
    ) -> ColumnBatch:
        """Rows that derive from no input row (made by a punctuator or at commit), all at
        stream time ``stream_time``."""
        n = len(keys)
        return cls(
            None,
            partition,
            None,
            [NO_ROW] * n,
            keys,
            values,
            timestamps,
            headers,
            [None] * n,
            [stream_time] * n,
        )

    @classmethod
    def from_records(cls, partition: int, records: list[Record], stream_time: int) -> ColumnBatch:
        """``records`` as rows of no input row (what a punctuator or a cache forwards)."""
        return cls.unsourced(
            partition,
            [record.key for record in records],
            [record.value for record in records],
            [record.timestamp for record in records],
            [record.headers for record in records],
            stream_time,
        )

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
            self.encoded_values,
        )

    def single(self, position: int) -> ColumnBatch:
        """The row at ``position`` as a batch of its own (``take([position])``, cheaper)."""
        p = position
        return ColumnBatch(
            self.topic,
            self.partition,
            self.source,
            [self.rows[p]],
            [self.keys[p]],
            [self.values[p]],
            [self.timestamps[p]],
            [self.headers[p]],
            [self.offsets[p]],
            [self.stream_times[p]],
            self.encoded_values,
        )

    def with_values(self, values: list[Any]) -> ColumnBatch:
        """The same rows with new values."""
        return self.with_keys_values(self.keys, values)

    def with_keys(self, keys: list[Any]) -> ColumnBatch:
        """The same rows with new keys."""
        return self.with_keys_values(keys, self.values)

    def with_keys_values(self, keys: list[Any], values: list[Any]) -> ColumnBatch:
        """The same rows with new keys and values."""
        return ColumnBatch(
            self.topic,
            self.partition,
            self.source,
            self.rows,
            keys,
            values,
            self.timestamps,
            self.headers,
            self.offsets,
            self.stream_times,
            self.encoded_values if values is self.values else None,
        )

    def derive(
        self,
        positions: list[int],
        keys: list[Any],
        values: list[Any],
        timestamps: list[int] | None = None,
        headers: list[Any] | None = None,
    ) -> ColumnBatch:
        """New rows, the j-th made from the row at ``positions[j]`` (ascending, repeats
        allowed): it keeps that row's input row, offset and stream time, and its timestamp
        and headers unless given."""
        if timestamps is None:
            timestamps = [self.timestamps[i] for i in positions]
        if headers is None:
            headers = [self.headers[i] for i in positions]
        return ColumnBatch(
            self.topic,
            self.partition,
            self.source,
            [self.rows[i] for i in positions],
            keys,
            values,
            timestamps,
            headers,
            [self.offsets[i] for i in positions],
            [self.stream_times[i] for i in positions],
        )

    def without_rows(self, failed: set[int]) -> ColumnBatch:
        """The rows whose input row is not in ``failed``."""
        return self.take([p for p, row in enumerate(self.rows) if row not in failed])

    def row_end(self, position: int) -> int:
        """The first position after ``position`` whose input row differs from its own."""
        rows = self.rows
        row = rows[position]
        end = position + 1
        n = len(rows)
        while end < n and rows[end] == row:
            end += 1
        return end

    def record(self, position: int) -> Record:
        """The row at ``position`` as a ``Record`` (what error handlers are given)."""
        value = self.values[position]
        if self.encoded_values is not None:
            value = self.encoded_values.deserialize(value)
        return Record(
            self.keys[position],
            value,
            self.timestamps[position],
            tuple(self.headers[position] or ()),
        )


class EmittedRows:
    """Rows an operator emits, each made from the input row at its position (collected in
    the operator's loop as one tuple a row, made into one batch of columns with ``batch``)."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        #: (position, key, value, timestamp) of each row, in emission order
        self.rows: list[tuple[int, Any, Any, int]] = []

    def add(self, position: int, key: Any, value: Any, timestamp: int) -> None:
        self.rows.append((position, key, value, timestamp))

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def batch(self, batch: ColumnBatch) -> ColumnBatch:
        """The rows, made from ``batch``'s rows (their input rows, offsets, stream times and
        headers)."""
        if not self.rows:
            return batch.derive([], [], [], [])
        positions, keys, values, timestamps = map(list, zip(*self.rows))
        return batch.derive(positions, keys, values, timestamps)
