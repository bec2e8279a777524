"""Sliding-window aggregation (KIP-450) through the TopologyTestDriver.

Inputs and expected outputs are Apache Kafka's KStreamSlidingWindowAggregateTest: each
window's updates gathered by window start as a set of (value, timestamp), as Kafka's test
compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamtide import (
    Consumed,
    EmitStrategy,
    Materialized,
    Serdes,
    SlidingWindows,
    StreamsBuilder,
    Window,
    Windowed,
)
from tests.dsl.windowed_support import run_windowed, string_init, to_string_adder

STRING = Serdes.string()


def aggregate(s: Any) -> Any:
    return s.aggregate(string_init, to_string_adder, Materialized.as_("sliding"))


def reduce(s: Any) -> Any:
    return s.reduce(lambda agg, value: f"{agg}+{value}", Materialized.as_("sliding"))


def gathered(
    windows: SlidingWindows,
    operation: Callable[[Any], Any],
    values_at: list[tuple[str, int]],
    strategy: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE,
) -> dict[int, set[tuple[str, int]]]:
    """Output grouped by window start (key "A"); every window spans the time difference.
    With ``on_window_close()`` every window is also checked to be emitted once."""
    records = [("A", value, ts) for value, ts in values_at]
    found: dict[int, set[tuple[str, int]]] = {}
    out = run_windowed(windows, operation, records, STRING, strategy)[0]
    if strategy is EmitStrategy.ON_WINDOW_CLOSE:
        assert len({key for key, _, _ in out}) == len(out)
    for key, value, ts in out:
        assert key.key == "A"
        assert key.window.end - key.window.start == windows.time_difference_ms
        found.setdefault(key.window.start, set()).add((value, ts))
    return found


def test_aggregate_small_input() -> None:
    values_at = [("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22), ("7", 30)]
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    assert gathered(windows, aggregate, values_at) == {
        0: {("0+1", 10), ("0+1+2", 10)},
        4: {("0+1+2+3", 14)},
        5: {("0+1+2+3+4", 15)},
        10: {("0+1+2+3+4+5", 20)},
        11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
        12: {("0+3+4+5+6", 22)},
        15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
        16: {("0+5", 20), ("0+5+6", 22)},
        20: {("0+5+6+7", 30)},
        21: {("0+6", 22), ("0+6+7", 30)},
        23: {("0+7", 30)},
    }


def test_reduce_small_input() -> None:
    values_at = [("1", 10), ("2", 14), ("3", 15), ("4", 22), ("5", 26), ("6", 30)]
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    assert gathered(windows, reduce, values_at) == {
        0: {("1", 10)},
        4: {("1+2", 14)},
        5: {("1+2+3", 15)},
        11: {("2", 14), ("2+3", 15)},
        12: {("2+3+4", 22)},
        15: {("3", 15), ("3+4", 22)},
        16: {("4", 22), ("4+5", 26)},
        20: {("4+5+6", 30)},
        23: {("5", 26), ("5+6", 30)},
        27: {("6", 30)},
    }


EARLY = [("1", 0), ("2", 5), ("3", 6), ("4", 3), ("5", 13), ("6", 10)]
EARLY_WINDOWS = {
    0: {("0+1", 0), ("0+1+2", 5), ("0+1+2+3", 6), ("0+1+2+3+4", 6), ("0+1+2+3+4+5", 13),
        ("0+1+2+3+4+5+6", 13)},
    1: {("0+2", 5), ("0+2+3", 6), ("0+2+3+4", 6), ("0+2+3+4+5", 13), ("0+2+3+4+5+6", 13)},
    4: {("0+2+3", 6), ("0+2+3+5", 13), ("0+2+3+5+6", 13)},
    6: {("0+3", 6), ("0+3+5", 13), ("0+3+5+6", 13)},
    7: {("0+5", 13), ("0+5+6", 13)},
    11: {("0+5", 13)},
}  # fmt: skip


def test_early_records_small_input() -> None:
    windows = SlidingWindows.of_time_difference_and_grace(50, 0)
    found = gathered(windows, aggregate, [*EARLY, ("7", 70)])
    assert found == {**EARLY_WINDOWS, 20: {("0+7", 70)}}


def test_early_records_without_grace() -> None:
    windows = SlidingWindows.of_time_difference_without_grace(50)
    found = gathered(windows, aggregate, [*EARLY, ("6", 70)])
    assert found == {**EARLY_WINDOWS, 20: {("0+6", 70)}}


def test_early_records_repeated_input() -> None:
    values_at = [("1", 0), ("2", 2), ("3", 4), ("4", 0), ("5", 2), ("6", 2), ("7", 0), ("8", 7)]
    windows = SlidingWindows.of_time_difference_and_grace(5, 0)
    assert gathered(windows, aggregate, values_at) == {
        0: {("0+1", 0), ("0+1+2", 2), ("0+1+2+3+4+5", 4), ("0+1+2+3+4+5+6", 4), ("0+1+2+3", 4),
            ("0+1+2+3+4", 4), ("0+1+2+3+4+5+6+7", 4)},
        1: {("0+2+3+5+6", 4), ("0+2", 2), ("0+2+3", 4), ("0+2+3+5", 4)},
        2: {("0+2+3+5+6+8", 7)},
        3: {("0+3", 4), ("0+3+8", 7)},
        5: {("0+8", 7)},
    }  # fmt: skip


def test_no_grace_period_small_input() -> None:
    values_at = [("1", 100), ("2", 105), ("3", 106), ("4", 103), ("5", 113), ("6", 110)]
    windows = SlidingWindows.of_time_difference_without_grace(50)
    assert gathered(windows, aggregate, values_at) == {
        50: {("0+1", 100)},
        55: {("0+1+2", 105)},
        56: {("0+1+2+3", 106), ("0+1+2+3+4", 106)},
        63: {("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)},
        101: {("0+2", 105), ("0+2+3", 106), ("0+2+3+4", 106), ("0+2+3+4+5", 113),
              ("0+2+3+4+5+6", 113)},
        104: {("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)},
        106: {("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)},
        107: {("0+5", 113), ("0+5+6", 113)},
        111: {("0+5", 113)},
    }  # fmt: skip


def test_count_keeps_keys_apart_and_emits_updates_in_kafka_order() -> None:
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    records = [("a", "x", 10), ("b", "x", 12), ("a", "x", 15)]
    out, _ = run_windowed(windows, lambda s: s.count(), records, Serdes.long())
    w = lambda key, start: Windowed(key, Window(start, start + 10))  # noqa: E731
    assert out == [
        (w("a", 0), 1, 10),
        (w("b", 2), 1, 12),
        (w("a", 11), 1, 15),  # the previous record's right window first, as Kafka
        (w("a", 5), 2, 15),
    ]


def test_late_records_are_dropped_and_counted() -> None:
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    records = [("a", "x", 100), ("a", "x", 84)]  # 84 + 10 < 100 - 5
    out, metrics = run_windowed(windows, lambda s: s.count(), records, Serdes.long())
    assert [start for (key, _, _) in out for start in [key.window.start]] == [90]
    assert metrics["dropped-records"] == 1


def test_sliding_windows_specification() -> None:
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    assert (windows.time_difference_ms, windows.grace_ms) == (10, 5)
    with pytest.raises(ValueError, match="time difference"):
        SlidingWindows.of_time_difference_and_grace(0, 5)
    with pytest.raises(ValueError, match="grace"):
        SlidingWindows.of_time_difference_and_grace(10, -1)


def test_retention_must_cover_two_time_differences_and_grace() -> None:
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
    )
    with pytest.raises(ValueError, match="25 ms"):
        windowed.count(Materialized.as_("s").with_retention(24))


# ---- emit strategy on_window_close: the same tests' final results ------------------------------

FINAL = EmitStrategy.on_window_close()


def test_final_aggregate_small_input() -> None:
    values_at = [("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22), ("7", 30)]
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    assert gathered(windows, aggregate, values_at, FINAL) == {
        0: {("0+1+2", 10)},
        4: {("0+1+2+3", 14)},
        5: {("0+1+2+3+4", 15)},
        10: {("0+1+2+3+4+5", 20)},
        11: {("0+3+4+5", 20)},
        12: {("0+3+4+5+6", 22)},
    }


def test_final_reduce_small_input() -> None:
    values_at = [("1", 10), ("2", 14), ("3", 15), ("4", 22), ("5", 26), ("6", 30)]
    windows = SlidingWindows.of_time_difference_and_grace(10, 5)
    assert gathered(windows, reduce, values_at, FINAL) == {
        0: {("1", 10)},
        4: {("1+2", 14)},
        5: {("1+2+3", 15)},
        11: {("2+3", 15)},
        12: {("2+3+4", 22)},
    }


def test_final_early_records() -> None:
    windows = SlidingWindows.of_time_difference_and_grace(50, 0)
    assert gathered(windows, aggregate, [*EARLY, ("7", 70)], FINAL) == {
        0: {("0+1+2+3+4+5+6", 13)},
        1: {("0+2+3+4+5+6", 13)},
        4: {("0+2+3+5+6", 13)},
        6: {("0+3+5+6", 13)},
        7: {("0+5+6", 13)},
        11: {("0+5", 13)},
    }


def test_final_early_records_repeated_input() -> None:
    values_at = [("1", 0), ("2", 2), ("3", 4), ("4", 0), ("5", 2), ("6", 2), ("7", 0), ("8", 7)]
    windows = SlidingWindows.of_time_difference_and_grace(5, 0)
    assert gathered(windows, aggregate, values_at, FINAL) == {
        0: {("0+1+2+3+4+5+6+7", 4)},
        1: {("0+2+3+5+6", 4)},
    }


def test_final_no_grace_period_small_input() -> None:
    values_at = [("1", 100), ("2", 105), ("3", 106), ("4", 103), ("5", 113), ("6", 110)]
    windows = SlidingWindows.of_time_difference_without_grace(50)
    assert gathered(windows, aggregate, values_at, FINAL) == {
        50: {("0+1", 100)},
        55: {("0+1+2", 105)},
        56: {("0+1+2+3+4", 106)},
    }
