"""Batch ranges are cut at one event time across the partitions of a stage."""

from __future__ import annotations

import pytest

from streamtide.engine.ranges import TAIL_RECORDS, aligned_ends
from streamtide.log import LogRecord, open_log


def make_log(tmp_path, partitions: dict[int, list[int]]):
    log = open_log(f"file://{tmp_path}")
    log.create_topic("t", len(partitions))
    for partition, stamps in partitions.items():
        log.append("t", partition, [LogRecord(b"k", b"v", ts) for ts in stamps])
    return log


def test_the_slowest_partition_sets_the_time_and_reads_its_whole_window(tmp_path) -> None:
    # partition 0 covers 0..30 in its first 4 records, partition 1 covers 0..3
    log = make_log(tmp_path, {0: [0, 10, 20, 30, 40, 50], 1: [0, 1, 2, 3, 4, 5]})
    ends = aligned_ends(log, {("t", 0): (0, 4), ("t", 1): (0, 4)})
    assert ends == {("t", 0): 1, ("t", 1): 4}  # T = 3: partition 0 stops after ts 0


def test_out_of_order_records_do_not_pass_the_cut(tmp_path) -> None:
    log = make_log(tmp_path, {0: [0, 9, 2, 3, 50], 1: [0, 4, 5, 6, 60]})
    ends = aligned_ends(log, {("t", 0): (0, 4), ("t", 1): (0, 4)})
    # T = min(9, 6) = 6; partition 0's running max passes 6 at its second record
    assert ends == {("t", 0): 1, ("t", 1): 4}


def test_drained_partitions_do_not_hold_others_back(tmp_path) -> None:
    log = make_log(tmp_path, {0: [0, 100], 1: [0, 1, 2, 3, 4, 5]})
    ends = aligned_ends(log, {("t", 0): (0, 2), ("t", 1): (0, 3)})
    # partition 0 is read to its end, so only partition 1 limits: T = 2
    assert ends == {("t", 0): 1, ("t", 1): 3}


def test_everything_drained_reads_the_full_windows(tmp_path) -> None:
    log = make_log(tmp_path, {0: [5, 1], 1: [9]})
    assert aligned_ends(log, {("t", 0): (0, 2), ("t", 1): (0, 1)}) == {("t", 0): 2, ("t", 1): 1}


def test_no_timestamps_are_read_when_the_cut_cannot_matter(tmp_path, monkeypatch) -> None:
    log = make_log(tmp_path, {0: [0, 100], 1: [0, 1, 2]})
    reads = []
    real = log.read_table
    monkeypatch.setattr(log, "read_table", lambda *a, **k: reads.append(a) or real(*a, **k))
    # every window reaches its partition's end: nothing is capped
    assert aligned_ends(log, {("t", 0): (0, 2), ("t", 1): (0, 3)}) == {("t", 0): 2, ("t", 1): 3}
    # only one partition has input
    assert aligned_ends(log, {("t", 0): (0, 1), ("t", 1): (3, 3)}) == {("t", 0): 1, ("t", 1): 3}
    assert reads == []


# ---- on Kafka: the same cuts from the time index, without reading the windows -------------

BASE = 1_000  # Kafka stores timestamps from 1 ms on


def make_kafka_log(kafka_url, partitions: dict[int, list[int]]):
    log = open_log(kafka_url)
    log.create_topic("t", len(partitions), configs={"retention.ms": "-1"})
    for partition, stamps in partitions.items():
        log.append("t", partition, [LogRecord(b"k", b"v", BASE + ts) for ts in stamps])
    return log


@pytest.mark.parametrize(
    ("stamps", "windows", "expected"),
    [
        ({0: [0, 10, 20, 30, 40, 50], 1: [0, 1, 2, 3, 4, 5]}, (4, 4), (1, 4)),
        ({0: [0, 9, 2, 3, 50], 1: [0, 4, 5, 6, 60]}, (4, 4), (1, 4)),
        ({0: [0, 100], 1: [0, 1, 2, 3, 4, 5]}, (2, 3), (1, 3)),
        ({0: [5, 1], 1: [9]}, (2, 1), (2, 1)),
    ],
    ids=["slowest-sets-the-time", "out-of-order", "drained", "all-drained"],
)
def test_kafka_cuts_batches_where_reading_the_windows_would(
    kafka_url, stamps, windows, expected
) -> None:
    log = make_kafka_log(kafka_url, stamps)
    try:
        reads = []
        real = log.read_table
        log.read_table = lambda *a, **k: reads.append(a) or real(*a, **k)  # type: ignore[method-assign]
        found = aligned_ends(log, {("t", p): (0, w) for p, w in enumerate(windows)})
        assert found == {("t", p): e for p, e in enumerate(expected)}
        # at most the tails of the capped windows were read, never a whole window of more
        assert all(end - start <= TAIL_RECORDS for _, _, start, end in reads)
    finally:
        log.close()


def test_kafka_cut_reads_only_the_tails_of_long_windows(kafka_url) -> None:
    # two partitions of 200 records in time order, one twice as dense in time
    log = make_kafka_log(kafka_url, {0: list(range(0, 400, 2)), 1: list(range(200))})
    try:
        windows = {("t", 0): (0, 100), ("t", 1): (0, 150)}
        read = []
        real = log.read_table
        log.read_table = lambda *a, **k: read.append(a) or real(*a, **k)  # type: ignore[method-assign]
        # T = min(198, 149) = 149: partition 0 stops before timestamp 150 (offset 75)
        assert aligned_ends(log, windows) == {("t", 0): 75, ("t", 1): 150}
        assert sum(end - start for _, _, start, end in read) <= 2 * TAIL_RECORDS
    finally:
        log.close()
