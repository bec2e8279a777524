"""Input ranges of a stage, aligned in event time across partitions.

Ranges capped by record count alone let one partition's batch reach far further in event
time than another's; downstream of a repartition the slower partition's records then look
late (dedup intervals, window grace, session retention). So a stage's batch is cut at one
event time ``T`` for all its partitions: each partition reads its capped window, ``T`` is the
smallest window maximum among partitions that still have more input, and each partition reads
the longest prefix of its window whose timestamps stay ``<= T``. The partition that defines
``T`` reads its whole window, so every batch makes progress.

What this guarantees: no range holds a record later than ``T`` but the defining partition's
(whose window ends at ``T``), no range stops before a record it could take without passing
``T``, and every batch makes progress. A log with a time index (Kafka: ``offsets_for_times``)
gets the same without reading the windows: ``T`` comes from the last few records of each
capped window (``TAIL_RECORDS``), and each cut from one request, the first offset at or past
``T + 1`` in every partition. Where each partition's timestamps do not decrease (the usual
case, and always Kafka's ``LogAppendTime``), the tail's maximum is the window's and both give
the same ends. Out-of-order timestamps may put a window's maximum before its tail: then ``T``
is lower and the other partitions are cut earlier, never later, which keeps the guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamtide.log.api import Log

#: (topic, partition) -> (start, capped end)
Windows = dict[tuple[str, int], tuple[int, int]]
#: How many records at the end of a capped window give its time where the log has a time
#: index (``offsets_for_times``).
TAIL_RECORDS = 16


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
    if hasattr(log, "offsets_for_times"):
        return _by_time_index(log, windows, busy, capped)
    return _by_reading(log, windows, log_ends)


def _by_reading(
    log: Log, windows: Windows, log_ends: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """Read every busy window's timestamps and cut each at ``T``."""
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
        ends[key] = _cut(tables[key], limit, end)
    return ends


def _by_time_index(
    log: Log, windows: Windows, busy: list[tuple[str, int]], capped: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """``T`` from the tails of the capped windows, the cuts from the log's time index (see
    the module docstring): a few records per capped window and one request."""
    times = {key: _tail_time(log, key, *windows[key]) for key in capped}
    known = {key: t for key, t in times.items() if t is not None}
    ends = {key: end for key, (_, end) in windows.items()}
    if not known:
        return ends
    limit = min(known.values())
    defining = next(key for key, t in known.items() if t == limit)
    after = log.offsets_for_times({key: limit + 1 for key in busy if key != defining})  # type: ignore[attr-defined]
    for key, first in after.items():
        start, end = windows[key]
        if first is None or first >= end:
            continue  # nothing in the window passes T
        if first >= start:
            ends[key] = first
        else:  # a record before the window passes T: the index cannot tell, read the window
            topic, partition = key
            ends[key] = _cut(log.read_table(topic, partition, start, end), limit, end)
    return ends


def _tail_time(log: Log, key: tuple[str, int], start: int, end: int) -> int | None:
    """The latest timestamp among the last ``TAIL_RECORDS`` offsets of a window (all of it
    if those hold no record, e.g. only transaction markers); None if it holds none."""
    topic, partition = key
    table = log.read_table(topic, partition, max(start, end - TAIL_RECORDS), end)
    if not table.num_rows and end - start > TAIL_RECORDS:
        table = log.read_table(topic, partition, start, end)
    if not table.num_rows:
        return None
    return int(pc.max(table.column("timestamp")).as_py())


def _cut(table: pa.Table, limit: int, end: int) -> int:
    """Where a window read as ``table`` (ending at ``end``) stops at time ``limit``: the
    offset of the first row left out (offsets may have gaps, e.g. on Kafka)."""
    rows = _prefix_within(table.column("timestamp"), limit)
    return end if rows >= table.num_rows else int(table.column("offset")[rows].as_py())


def _prefix_within(timestamps: pa.ChunkedArray, limit: int) -> int:
    """Length of the longest prefix whose running maximum stays ``<= limit``: the rows before
    the first timestamp above it (computed in Arrow, not row by row in Python)."""
    above = pc.greater(timestamps, limit)
    first = pc.index(above, True).as_py()
    return len(timestamps) if first < 0 else first
