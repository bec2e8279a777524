"""The order in which a task reads a repartition partition on a Kafka log.

On the file log the driver merges a stage's repartition segments by timestamp when it seals
them, keeping each writing task's own order (``engine.interleave``). On Kafka each writing task
commits its records in its own transaction, so a partition holds one task's block of a batch
after another's, and a batch spans a whole window of event time: read as it lies, a later
stage would see event time jump back and forth by up to that window, making records look late
to dedup intervals, window grace and session retention.

So on Kafka every repartition record carries a header naming the task that wrote it
(``SOURCE_HEADER``), and the reading task merges each range by timestamp, keeping each
writer's own order: the order the file log's merge gives. The header is removed on reading.
"""

from __future__ import annotations

from itertools import accumulate, repeat

import pyarrow as pa

from streamtide.log.segments import headers_array, headers_to_python
from streamtide.task_id import TaskId

#: The header naming the task that wrote a repartition record (Kafka logs only).
SOURCE_HEADER = "streamtide.writer"


def merge_by_writer(table: pa.Table) -> pa.Table:
    """Rows of a ``Log.read_table`` result merged by timestamp across writers (each writer's
    rows keep their order), with ``SOURCE_HEADER`` taken out of the headers."""
    if table.num_rows == 0 or "headers" not in table.column_names:
        return table
    headers = headers_to_python(table.column("headers"))
    writers: dict[bytes, list[int]] = {}
    stripped = []
    for index, row in enumerate(headers):
        writer = b""
        kept = []
        for key, value in row:
            if key == SOURCE_HEADER:
                writer = value
            else:
                kept.append((key, value))
        writers.setdefault(writer, []).append(index)
        stripped.append(tuple(kept))
    timestamps = table.column("timestamp").to_pylist()
    sources = [writers[w] for w in sorted(writers, key=_task_order)]
    order = [
        sources[source][row]
        for source, row in merge_order([[timestamps[i] for i in rows] for rows in sources])
    ]
    take = pa.array(order, pa.int64())
    merged = table.take(take)
    column = headers_array([stripped[i] for i in order])
    return merged.set_column(merged.column_names.index("headers"), "headers", column)


def merge_order(timestamps: list[list[int]]) -> list[tuple[int, int]]:
    """(source, row) pairs in merged order: the lowest head timestamp first, ties to the
    lower source; each source's rows stay in their own order.

    That merge takes a row once every row before it in its source is taken and no other
    head is lower: the order of a sort by each row's running maximum timestamp in its source
    (a row below that maximum follows its predecessors at once), then source, then row.
    Each source's keys are non-decreasing, so the sort merges ready runs, in C loops."""
    keyed: list[tuple[int, int, int]] = []
    for source, column in enumerate(timestamps):
        keyed.extend(zip(accumulate(column, max), repeat(source), range(len(column))))
    keyed.sort()
    return [(source, row) for _, source, row in keyed]


def _task_order(writer: bytes) -> tuple[int, ...]:
    """Writers in task order (``0_2`` before ``0_10``), as the file log's merge takes them;
    rows without a writer first."""
    try:
        task = TaskId.parse(writer.decode())
    except ValueError:
        return (-1,)
    return (task.subtopology, task.partition)
