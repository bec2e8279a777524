"""Interleave the segments a stage writes into one repartition partition by timestamp.

Every upstream task of a stage writes its own segment into each repartition partition.
Sealed one after another, a large batch would put one task's whole time range before the
next task's, and downstream time-based operators (dedup lateness, window grace, session
retention) would see the later segments as late. Like records arriving in a Kafka
repartition topic as they are produced, the driver merges the segments of one partition
into one before sealing: a k-way merge by timestamp that keeps each task's own order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from streamtide.log.api import Log, SegmentRef
from streamtide.runtime.repartition_order import merge_order
from streamtide.task_id import TaskId


def interleave_segments(
    log: Log, tasks: dict[str, dict[str, Any]], topics: Iterable[str], writer_id: str
) -> list[dict[str, Any]]:
    """Replace, per partition of ``topics``, the tasks' segments by one merged segment.

    ``tasks`` maps task id to its prepare entry (with ``segments``); merged-away segments
    are removed from it. Returns the merged segments (unsealed) as dicts.
    """
    wanted = set(topics)
    groups: dict[tuple[str, int], list[tuple[str, dict[str, Any]]]] = {}
    for task in sorted(tasks, key=TaskId.parse):
        for data in tasks[task]["segments"]:
            if data["topic"] in wanted:
                groups.setdefault((data["topic"], data["partition"]), []).append((task, data))
    parts = []
    for (topic, partition), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        tables = [log.read_segment(SegmentRef.from_dict(data)) for _, data in members]
        order = merge_order([t.column("timestamp").to_pylist() for t in tables])
        offsets = [0]
        for table in tables:
            offsets.append(offsets[-1] + table.num_rows)
        combined = pa.concat_tables(tables)
        indices = pa.array([offsets[source] + row for source, row in order], pa.int64())
        parts.append((topic, partition, combined.take(indices), f"{writer_id}{topic}/{partition}"))
        for task, data in members:
            tasks[task]["segments"] = [s for s in tasks[task]["segments"] if s is not data]
    # one file for every merged partition (``Log.write_segments``)
    return [ref.as_dict() for ref in log.write_segments(parts, writer_id=f"{writer_id}merged")]
