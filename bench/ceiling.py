"""The ceiling: each operation's per-record logic as a plain Python loop with dict state over
records already in memory and deserialized (no Spark, no RocksDB, no serdes, no commits), one
partition at a time with its own stream time, as a task sees it; and a raw read of the input
from the log.

The loops follow Streamtide's rules (``docs/deduplication.md``, the session aggregate of
``dsl/session_operator.py``, epoch-aligned stream-time punctuation) and keep every output
record in a list, as a sink would receive it, but without a record cache.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from typing import Any

from bench.workload import TOPIC, Event, Workload, by_partition, user_profiles, value_of
from streamtide.log import open_log

#: What a task's processor sees: (key, value, timestamp).
Rec = tuple[str, dict[str, Any], int]
Loop = Callable[[list[Rec], Workload], list[tuple]]


def dedup(records: list[Rec], w: Workload) -> list[tuple]:
    """Forward a record unless an unexpired entry of its id lies within the interval."""
    interval = w.dedup_interval_ms
    by_key = w.dedup_on == "key"
    seen: dict[Any, list[int]] = {}
    expiry: list[tuple[int, Any]] = []
    stream_time = -1
    out = []
    for key, value, t in records:
        dedup_id = key if by_key else (key, value["id"])
        if t > stream_time:
            stream_time = t
        cutoff = stream_time - interval
        while expiry and expiry[0][0] < cutoff:
            ts, old = heapq.heappop(expiry)
            stamps = seen[old]
            stamps.remove(ts)
            if not stamps:
                del seen[old]
        stamps = seen.get(dedup_id)
        if stamps is not None and any(t - interval <= s <= t + interval for s in stamps):
            continue  # a duplicate: dropped, not remembered
        if t >= cutoff:  # a late record is forwarded but not remembered
            seen.setdefault(dedup_id, []).append(t)
            heapq.heappush(expiry, (t, dedup_id))
        out.append((key, value, t))
    return out


def session_count(records: list[Rec], w: Workload) -> list[tuple]:
    """Merge each record with its key's sessions within the gap; emit tombstones for the
    replaced sessions, then the merged session's count."""
    gap = w.session_gap_ms
    retention = max(gap, 86_400_000)
    sessions: dict[str, list[list[int]]] = {}
    stream_time = -1
    out: list[tuple] = []
    for key, _value, t in records:
        if t > stream_time:
            stream_time = t
        mine = sessions.setdefault(key, [])
        merged = [s for s in mine if s[1] >= t - gap and s[0] <= t + gap]
        start = end = t
        count = 1
        for s in merged:
            start = min(start, s[0])
            end = max(end, s[1])
            count += s[2]
        for s in merged:
            mine.remove(s)
            if s[0] != start or s[1] != end:
                out.append((key, s[0], s[1], None, s[1]))
        if end >= stream_time - retention:
            mine.append([start, end, count])
        out.append((key, start, end, count, end))
    return out


def punctuation(records: list[Rec], w: Workload) -> list[tuple]:
    """Count per key; whenever stream time reaches the next epoch-aligned fire time, emit every
    key's count in key order (missed intervals are skipped)."""
    every = w.punctuate_every_ms
    counts: dict[str, int] = {}
    next_time = 0
    stream_time = -1
    out = []
    for key, _value, t in records:
        if t > stream_time:
            stream_time = t
        counts[key] = counts.get(key, 0) + 1
        if stream_time >= next_time:
            for k in sorted(counts):
                out.append((k, counts[k], stream_time))
            next_time += ((stream_time - next_time) // every + 1) * every
    return out


def stream_table_join(records: list[Rec], w: Workload) -> list[tuple]:
    """Each record merged with its key's profile (a dict built from the table first)."""
    table = dict(user_profiles(w))
    out = []
    for key, value, t in records:
        user = table.get(key)
        if user is not None:
            out.append((key, {**value, **user}, t))
    return out


LOOPS: dict[str, Loop] = {
    "dedup": dedup,
    "session-count": session_count,
    "punctuation": punctuation,
    "stream-table-join": stream_table_join,
}


def in_memory(events: list[Event], w: Workload) -> list[list[Rec]]:
    """Each partition's records as a task's processor sees them (built before timing)."""
    return [
        [(e.key, value_of(e), e.ts) for e in part] for part in by_partition(events, w.partitions)
    ]


def run_loop(operation: str, partitions: list[list[Rec]], w: Workload) -> tuple[float, int]:
    """Seconds for ``operation`` over every partition, and the number of output records."""
    loop = LOOPS[operation]
    started = time.perf_counter()
    outputs = sum(len(loop(records, w)) for records in partitions)
    return time.perf_counter() - started, outputs


def read_log(log_url: str, partitions: int) -> tuple[float, int]:
    """Seconds to read every partition of the input as Arrow tables, and the rows read."""
    log = open_log(log_url)
    try:
        started = time.perf_counter()
        rows = sum(log.read_table(TOPIC, p).num_rows for p in range(partitions))
        return time.perf_counter() - started, rows
    finally:
        log.close()
