"""The operator contract's row loop: ``call_rows`` and the batch helpers it relies on."""

from __future__ import annotations

from typing import Any

from streamtide.processor.column_batch import NO_ROW, ColumnBatch
from streamtide.processor.operator import ColumnOperator, call_rows


class Reporter(ColumnOperator):
    """Notes every reported row, as a node would, and continues at the next input row."""

    def __init__(self) -> None:
        self.failed: list[tuple[int, str]] = []

    def process_batch(self, batch: ColumnBatch) -> None:
        raise AssertionError("not used")

    def fail(self, batch: ColumnBatch, position: int, error: Exception) -> int:
        self.failed.append((position, type(error).__name__))
        return batch.row_end(position)


def batch_of(values: list[Any], rows: list[int] | None = None) -> ColumnBatch:
    n = len(values)
    rows = list(range(n)) if rows is None else rows
    return ColumnBatch(
        "t", 0, None, rows, [None] * n, values, list(range(n)), [()] * n, rows, list(range(n))
    )


def test_every_row_once_and_no_positions_when_none_fails() -> None:
    calls: list[int] = []
    operator = Reporter()
    batch = batch_of([1, 2, 3])
    positions, results = call_rows(operator, batch, lambda v: calls.append(v) or v, batch.values)
    assert positions is None and results == [1, 2, 3] and calls == [1, 2, 3]


def test_a_row_that_raises_is_reported_and_the_rest_go_on() -> None:
    operator = Reporter()
    batch = batch_of([1, 0, 2, 0, 4])
    positions, results = call_rows(operator, batch, lambda v: 8 // v, batch.values)
    assert positions == [0, 2, 4] and results == [8, 4, 2]
    assert operator.failed == [(1, "ZeroDivisionError"), (3, "ZeroDivisionError")]


def test_the_other_outputs_of_a_failed_input_row_are_skipped() -> None:
    """Rows 1-3 derive from input row 7: after the first of them fails, the rest of input
    row 7 never comes (record at a time, its first exception ends the record)."""
    operator = Reporter()
    batch = batch_of([1, 0, 5, 6, 3], rows=[4, 7, 7, 7, 9])
    positions, results = call_rows(operator, batch, lambda v: 12 // v, batch.values)
    assert positions == [0, 4] and results == [12, 4]
    assert operator.failed == [(1, "ZeroDivisionError")]


def test_a_function_raising_stop_iteration_fails_its_row_instead_of_ending_the_loop() -> None:
    def stop_on_two(value: int) -> int:
        if value == 2:
            raise StopIteration
        return value

    operator = Reporter()
    batch = batch_of([1, 2, 3])
    positions, results = call_rows(operator, batch, stop_on_two, batch.values)
    assert positions == [0, 2] and results == [1, 3]
    assert operator.failed == [(1, "StopIteration")]


def test_unsourced_rows_derive_from_no_input_row() -> None:
    batch = ColumnBatch.unsourced(3, ["k"], ["v"], [5], [()], 9)
    assert batch.rows == [NO_ROW] and batch.offsets == [None] and batch.stream_times == [9]
    assert batch.topic is None and batch.partition == 3


def test_derive_keeps_each_rows_input_row_offset_and_stream_time() -> None:
    batch = batch_of(["a", "b"])
    out = batch.derive([1, 1, 0], ["x", "y", "z"], [1, 2, 3])
    assert out.rows == [1, 1, 0] and out.offsets == [1, 1, 0] and out.stream_times == [1, 1, 0]
    assert out.timestamps == [1, 1, 0] and out.keys == ["x", "y", "z"]
    assert out.without_rows({1}).keys == ["z"]
