"""Repartition segments of one stage are merged by timestamp, each task's order kept."""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from streamtide.engine.interleave import interleave_segments, merge_order
from streamtide.log import LogRecord, open_log


def test_merge_order_takes_the_lowest_head_and_keeps_each_source_in_order() -> None:
    # source 0 is out of order internally (5 before 1): it must stay so
    order = merge_order([[5, 1, 9], [2, 3], [7]])
    assert order == [(1, 0), (1, 1), (0, 0), (0, 1), (2, 0), (0, 2)]


def test_ties_go_to_the_lower_source() -> None:
    assert merge_order([[4], [4], [4]]) == [(0, 0), (1, 0), (2, 0)]


@given(st.lists(st.lists(st.integers(0, 12), max_size=12), max_size=4))
def test_the_order_is_the_head_by_head_merge(timestamps: list[list[int]]) -> None:
    """Sources out of order internally, ties within and across them: the order is that of
    taking the lowest (timestamp, source) head one row at a time."""
    heads = [[(ts, source, row) for row, ts in enumerate(c)] for source, c in enumerate(timestamps)]
    assert merge_order(timestamps) == [(s, row) for _, s, row in heapq.merge(*heads)]


def test_interleave_replaces_the_tasks_segments_by_one_merged_segment(tmp_path) -> None:
    log = open_log(f"file://{tmp_path}")
    log.create_topic("r", 1)
    log.create_topic("out", 1)
    a = log.write_segment(
        "r", 0, [LogRecord(b"a", b"1", 10), LogRecord(b"a", b"2", 30)], writer_id="w/0_0/x"
    )
    b = log.write_segment("r", 0, [LogRecord(b"b", b"3", 20)], writer_id="w/0_1/y")
    other = log.write_segment("out", 0, [LogRecord(b"c", b"4", 1)], writer_id="w/0_1/y")
    tasks = {
        "0_0": {"segments": [a.as_dict()]},
        "0_1": {"segments": [b.as_dict(), other.as_dict()]},
    }
    merged = interleave_segments(log, tasks, ["r"], "w/merged/")
    assert tasks == {"0_0": {"segments": []}, "0_1": {"segments": [other.as_dict()]}}
    (segment,) = merged
    from streamtide.log.api import SegmentRef

    ref = SegmentRef.from_dict(segment)
    log.seal("r", 0, ref, seal_id="b0/merged")
    assert [(r.value, r.timestamp) for r in log.read("r", 0)] == [
        (b"1", 10),
        (b"3", 20),
        (b"2", 30),
    ]


def test_a_single_segment_is_left_alone(tmp_path) -> None:
    log = open_log(f"file://{tmp_path}")
    log.create_topic("r", 1)
    a = log.write_segment("r", 0, [LogRecord(b"a", b"1", 10)], writer_id="w/0_0/x")
    tasks = {"0_0": {"segments": [a.as_dict()]}}
    assert interleave_segments(log, tasks, ["r"], "w/merged/") == []
    assert tasks["0_0"]["segments"] == [a.as_dict()]
