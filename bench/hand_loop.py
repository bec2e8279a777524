"""The pipeline as a hand-written consumer would write it: one single-core Python loop over
the raw bytes of the input records, decoding and encoding with the standard ``json`` module,
dicts for state, no framework (no exactly-once commits, no RocksDB, no changelogs).

The records are read from the log before the clock starts and put in the order a Kafka
Streams task takes them from its partitions (each partition in its own order, the partition
with the lowest next timestamp first), so stream time and the records dropped as late are
those of the engine's tasks, not an artifact of how a consumer's polls happen to interleave.

The windowed counts are written as Streamtide's application writes them with its defaults
(the record cache on): each updated window's latest count once per commit, in the order of
the last updates, a commit after each batch of input (``flush_every`` records: what one
engine batch takes from all partitions), not every update: otherwise the loop would encode and
write about 880,000 page-count records where Streamtide writes about 9,000.
"""

from __future__ import annotations

import heapq
import json
import time
from typing import Any

from bench.streamtide_bench import BIG_CENTS, PIPELINE_GRACE_MS, PIPELINE_WINDOW_MS
from bench.workload import PIPELINE_TOPIC, USERS_TOPIC
from streamtide.log import open_log

#: (key, value, timestamp) as the log holds them.
RawRecord = tuple[bytes, bytes, int]


def read_raw(log_url: str, topic: str, partitions: int) -> list[list[RawRecord]]:
    """Every record of ``topic`` as raw bytes, per partition (outside the timed loop)."""
    log = open_log(log_url)
    try:
        out = []
        for partition in range(partitions):
            table = log.read_table(topic, partition)
            out.append(
                list(
                    zip(
                        table.column("key").to_pylist(),
                        table.column("value").to_pylist(),
                        table.column("timestamp").to_pylist(),
                    )
                )
            )
        return out
    finally:
        log.close()


def merged(partitions: list[list[RawRecord]]) -> list[RawRecord]:
    """The records of all partitions, each partition in its own order, the one with the
    lowest next timestamp first."""
    return list(heapq.merge(*partitions, key=lambda record: record[2]))


def pipeline(
    records: list[RawRecord], users: list[RawRecord], flush_every: int
) -> dict[str, list[Any]]:
    """The pipeline's three outputs as encoded (key, value) pairs: the windowed page counts
    (each updated window's latest count every ``flush_every`` input records and at the end),
    the large amounts, and each record with its key's count."""
    loads, dumps = json.loads, json.dumps
    table = {key.decode(): loads(value) for key, value, _ in users}
    window_counts: dict[tuple[str, int], int] = {}
    updated: dict[tuple[str, int], int] = {}  # since the last commit, in last-update order
    per_key: dict[str, int] = {}
    counts_out: list[Any] = []
    big_out: list[Any] = []
    counted_out: list[Any] = []
    stream_time = -1
    for index, (raw_key, raw_value, ts) in enumerate(records):
        if index % flush_every == 0:  # a commit after each flush_every records
            _flush(updated, counts_out)
        event = loads(raw_value)
        if event["kind"] == "bot":
            continue
        key = raw_key.decode()
        user = table.get(key)
        if user is None:
            continue
        joined = {
            "id": event["id"],
            "page": event["page"],
            "kind": event["kind"],
            "cents": round(event["amount"] * 100),
            "ts": event["ts"],
            "country": user["country"],
        }
        if ts > stream_time:
            stream_time = ts
        start = ts - ts % PIPELINE_WINDOW_MS
        if start + PIPELINE_WINDOW_MS + PIPELINE_GRACE_MS > stream_time:  # not late
            window = (joined["page"], start)
            count = window_counts.get(window, 0) + 1
            window_counts[window] = count
            updated.pop(window, None)  # the last update moves to the end
            updated[window] = count
        if joined["cents"] > BIG_CENTS:
            big_out.append((raw_key, dumps(joined).encode()))
        seen = per_key.get(key, 0) + 1
        per_key[key] = seen
        joined["count"] = seen
        counted_out.append((raw_key, dumps(joined).encode()))
    _flush(updated, counts_out)
    return {
        "pipeline-page-counts": counts_out,
        "pipeline-big": big_out,
        "pipeline-counted": counted_out,
    }


def _flush(updated: dict[tuple[str, int], int], out: list[Any]) -> None:
    """A commit: each updated window's latest count, encoded and written."""
    for (page, start), count in updated.items():
        out.append((f"{page}@{start}".encode(), count.to_bytes(8, "big")))
    updated.clear()


def run_pipeline(log_url: str, partitions: int, batch_size: int) -> tuple[float, int, int]:
    """Seconds for the hand loop over every pipeline event (the users table's decoding
    included, a commit every ``batch_size`` records per partition), the events read and the
    output records."""
    records = merged(read_raw(log_url, PIPELINE_TOPIC, partitions))
    users = [r for part in read_raw(log_url, USERS_TOPIC, partitions) for r in part]
    started = time.perf_counter()
    outputs = pipeline(records, users, batch_size * partitions)
    seconds = time.perf_counter() - started
    return seconds, len(records), sum(len(v) for v in outputs.values())
