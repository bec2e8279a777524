"""What a work unit's tasks wrote in one run, written at its end as two shared files.

A task's run on the file log leaves its outputs and changelog records here instead of writing
a segment per partition (a file, two fsyncs and a directory entry each: most of what a busy
task cost). At the end of the run the work unit writes them all with ``Log.write_segments``:
one file for the changelogs and one for the outputs and repartition records, so two files
and four fsyncs per work unit and batch, whatever its task count. Two rather than one so that
changelog records, which a truncation after a snapshot drops, do not share a file with output
records, which stay: a shared file is deleted only when no partition holds a slice of it.

Each task's report carries the list its segments are added to; the driver sees them only
once the work unit has written them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streamtide.log.api import Log


@dataclass
class _TaskWrites:
    segments: list[dict[str, Any]]  # the task report's list, filled by ``write``
    writer: str
    tables: list[tuple[str, int, pa.Table]]
    changelogs: set[str]


class UnitWrites:
    """The tables a work unit's tasks left to write, by task."""

    def __init__(self) -> None:
        self._tasks: list[_TaskWrites] = []

    def add(
        self,
        segments: list[dict[str, Any]],
        writer: str,
        tables: list[tuple[str, int, pa.Table]],
        changelogs: set[str],
    ) -> None:
        """Hold one task's tables (``(topic, partition, table)``) written by ``writer``;
        ``segments`` receives their refs (as dicts) when they are written."""
        self._tasks.append(_TaskWrites(segments, writer, tables, changelogs))

    def write(self, log: Log, writer_id: str) -> float:
        """Write everything held (changelogs in one file of ``<writer_id>/changelogs``, the
        rest in one of ``<writer_id>/outputs``); returns the milliseconds it took."""
        started = time.perf_counter()
        tasks, self._tasks = self._tasks, []
        for kind in ("changelogs", "outputs"):
            parts, owners = [], []
            for task in tasks:
                for topic, partition, table in task.tables:
                    if (topic in task.changelogs) == (kind == "changelogs"):
                        parts.append((topic, partition, table, task.writer))
                        owners.append(task)
            if parts:
                refs = log.write_segments(parts, writer_id=f"{writer_id}/{kind}")
                for task, ref in zip(owners, refs):
                    task.segments.append(ref.as_dict())
        for task in tasks:
            task.segments.sort(key=lambda s: (s["topic"], s["partition"]))
        return (time.perf_counter() - started) * 1000

    def clear(self) -> None:
        """Drop what is held (a run that failed reports nothing)."""
        self._tasks.clear()

    def __len__(self) -> int:
        return len(self._tasks)
