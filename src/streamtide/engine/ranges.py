"""Input ranges of a stage, aligned in event time across partitions.

Ranges capped by record count alone let one partition's batch reach far further in event
time than another's; downstream of a repartition the slower partition's records then look
late (dedup intervals, window grace, session retention). So a stage's batch is cut at one
event time ``T`` for all its partitions: each partition reads its capped window, ``T`` is the
smallest window maximum among partitions that still have more input, and each partition reads
the longest prefix of its window whose timestamps stay ``<= T``. The partition that defines
``T`` reads its whole window, so every batch makes progress.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamtide.log.api import Log

#: (topic, partition) -> (start, capped end)
Windows = dict[tuple[str, int], tuple[int, int]]


def aligned_ends(
    log: Log, windows: Windows, log_ends: Mapping[tuple[str, int], int] | None = None
) -> dict[tuple[str, int], int]:
    """The end offset per partition after cutting every window at the common time ``T``.

    ``log_ends`` are the partitions' end offsets when the windows were fixed (asked of the
    log when not given). Timestamps are read only when the cut can matter: some partition
    has more input than its window, and at least two partitions have input (the usual
    caught-up batch reads nothing).
    """
    busy = [key for key, (start, end) in windows.items() if end > start]
    if log_ends is None:
        log_ends = log.end_offsets(busy)
    capped = [key for key in busy if windows[key][1] < log_ends[key]]
    if not capped or len(busy) < 2:
        return {key: end for key, (_, end) in windows.items()}
    tables: dict[tuple[str, int], pa.Table] = {}
    limit: int | None = None  # the common time T: the least last timestamp of a capped window
    for (topic, partition), (start, end) in windows.items():
        if end <= start:
            continue
        table = log.read_table(topic, partition, start, end)
        tables[(topic, partition)] = table
        if end < log_ends[(topic, partition)] and table.num_rows:
            last = int(pc.max(table.column("timestamp")).as_py())
            limit = last if limit is None else min(limit, last)
    ends = {}
    for key, (_start, end) in windows.items():
        if limit is None or key not in tables:
            ends[key] = end
            continue
        table = tables[key]
        rows = _prefix_within(table.column("timestamp"), limit)
        # the offset of the first row left out (offsets may have gaps, e.g. on Kafka)
        ends[key] = end if rows >= table.num_rows else int(table.column("offset")[rows].as_py())
    return ends


def _prefix_within(timestamps: pa.ChunkedArray, limit: int) -> int:
    """Length of the longest prefix whose running maximum stays ``<= limit``: the rows before
    the first timestamp above it (computed in Arrow, not row by row in Python)."""
    above = pc.greater(timestamps, limit)
    first = pc.index(above, True).as_py()
    return len(timestamps) if first < 0 else first
