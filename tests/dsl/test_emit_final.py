"""Emit strategy ``on_window_close()`` (KIP-825) through the TopologyTestDriver.

Inputs and expected outputs (timestamps included) are those of Apache Kafka's
TimeWindowedKStreamImplTest, KStreamWindowAggregateTest, SessionWindowedKStreamImplTest and
KStreamSessionWindowAggregateProcessorTest for ``EmitStrategy.onWindowClose()``.
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
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyError,
    Window,
    Windowed,
)
from streamtide.testing import TopologyTestDriver
from tests.dsl.windowed_support import run_windowed, string_init, to_string_adder

STRING = Serdes.string()
FINAL = EmitStrategy.on_window_close()


def w(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def run(
    windows: Any,
    operation: Callable[[Any], Any],
    records: list[tuple[str, str, int]],
    value_serde: Any = STRING,
    strategy: EmitStrategy = FINAL,
) -> list[tuple]:
    """The output of ``run_windowed``, emitting final results by default."""
    return run_windowed(windows, operation, records, value_serde, strategy)[0]


def string_merger(_key: Any, left: str, right: str) -> str:
    return f"{left}+{right}"


# ---- time windows: TimeWindowedKStreamImplTest ------------------------------------------------

WINDOWED_DATA = [
    ("1", "1", 10),
    ("1", "2", 15),
    ("1", "3", 500),
    ("2", "10", 550),
    ("2", "20", 500),
    ("2", "30", 1000),
]
HALF_SECOND = TimeWindows.of_size_with_no_grace(500)


def test_count_emits_each_closed_window_once() -> None:
    out = run(HALF_SECOND, lambda s: s.count(), WINDOWED_DATA, Serdes.long())
    assert out == [
        (w("1", 0, 500), 2, 15),
        (w("1", 500, 1000), 1, 500),
        (w("2", 500, 1000), 2, 550),
    ]


def test_reduce_emits_each_closed_window_once() -> None:
    out = run(HALF_SECOND, lambda s: s.reduce(lambda a, v: f"{a}+{v}"), WINDOWED_DATA)
    assert out == [
        (w("1", 0, 500), "1+2", 15),
        (w("1", 500, 1000), "3", 500),
        (w("2", 500, 1000), "10+20", 550),
    ]


def test_aggregate_emits_each_closed_window_once() -> None:
    out = run(
        HALF_SECOND,
        lambda s: s.aggregate(string_init, to_string_adder, Materialized.with_(STRING, STRING)),
        WINDOWED_DATA,
    )
    assert out == [
        (w("1", 0, 500), "0+1+2", 15),
        (w("1", 500, 1000), "0+3", 500),
        (w("2", 500, 1000), "0+10+20", 550),
    ]


def test_update_strategy_is_the_default_and_emits_every_update() -> None:
    out = run(
        HALF_SECOND,
        lambda s: s.count(),
        WINDOWED_DATA,
        Serdes.long(),
        EmitStrategy.on_window_update(),
    )
    assert out == [
        (w("1", 0, 500), 1, 10),
        (w("1", 0, 500), 2, 15),
        (w("1", 500, 1000), 1, 500),
        (w("2", 500, 1000), 1, 550),
        (w("2", 500, 1000), 2, 550),
        (w("2", 1000, 1500), 1, 1000),
    ]


# ---- time windows: KStreamWindowAggregateTest -------------------------------------------------

HOPPING = TimeWindows.of_size_and_grace(10, 5).advance_by(5)


def aggregate_strings(s: Any) -> Any:
    return s.aggregate(string_init, to_string_adder, Materialized.with_(STRING, STRING))


def test_nothing_is_emitted_while_every_window_is_within_grace() -> None:
    records = [
        ("A", "1", 0),
        ("B", "2", 1),
        ("C", "3", 2),
        ("D", "4", 3),
        ("A", "1", 4),
        ("A", "1", 5),
        ("B", "2", 6),
        ("D", "4", 7),
        ("B", "2", 8),
        ("C", "3", 9),
        ("A", "1", 10),
        ("B", "2", 11),
        ("D", "4", 12),
        ("B", "2", 13),
        ("C", "3", 14),
        ("B", "1", 3),
        ("B", "2", 2),
        ("B", "3", 9),
    ]
    windows = TimeWindows.of_size_and_grace(10, 100).advance_by(5)
    assert run(windows, aggregate_strings, records) == []


def test_no_final_result_until_stream_time_covers_a_new_window() -> None:
    first = [("A", "1", 0), ("B", "2", 5), ("C", "3", 15)]
    expected = [(w("A", 0, 10), "0+1", 0), (w("B", 0, 10), "0+2", 5)]
    assert run(HOPPING, aggregate_strings, first) == expected
    # stream time does not move (D@15), then not far enough to close [5, 15) (E@19)
    assert run(HOPPING, aggregate_strings, [*first, ("D", "4", 15), ("E", "5", 19)]) == expected


def test_windows_close_at_end_plus_grace_in_start_then_key_order() -> None:
    records = [("A", "1", 0), ("A", "1", 5), ("B", "2", 10), ("C", "3", 15), ("D", "4", 20)]
    assert run(HOPPING, aggregate_strings, records) == [
        (w("A", 0, 10), "0+1+1", 5),
        (w("A", 5, 15), "0+1", 5),
        (w("B", 5, 15), "0+2", 10),
    ]


def test_emission_continues_from_the_last_closed_window() -> None:
    records = [("A", "1", 0), ("B", "2", 5), ("C", "3", 15), ("D", "4", 25)]
    assert run(HOPPING, aggregate_strings, records) == [
        (w("A", 0, 10), "0+1", 0),
        (w("B", 0, 10), "0+2", 5),
        (w("B", 5, 15), "0+2", 5),
        (w("C", 10, 20), "0+3", 15),
    ]


def test_a_window_closes_when_stream_time_reaches_end_plus_grace() -> None:
    """SEMANTICS 4b: ``>=`` for time windows; the result carries the max record timestamp."""
    windows = TimeWindows.of_size_and_grace(10_000, 2_000)
    records = [("a", "x", 5_000), ("a", "x", 2_000), ("a", "x", 7_000), ("b", "x", 11_999)]
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == []
    records.append(("b", "x", 12_000))
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == [
        (w("a", 0, 10_000), 3, 7_000)
    ]


def test_late_records_are_dropped_and_never_reopen_a_closed_window() -> None:
    records = [("a", "x", 0), ("a", "x", 10), ("a", "x", 3), ("a", "x", 20)]
    count = lambda s: s.count()  # noqa: E731
    out, metrics = run_windowed(TimeWindows.of_size(10), count, records, Serdes.long(), FINAL)
    assert out == [(w("a", 0, 10), 1, 0), (w("a", 10, 20), 1, 10)]
    assert metrics["dropped-records"] == 1


def test_emit_final_bypasses_the_record_cache() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(TimeWindows.of_size(10))
        .emit_strategy(FINAL)
        .count()
        .to_stream()
        .to("out")
    )
    with TopologyTestDriver(builder.build(), cache_enabled=True) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", Serdes.windowed(STRING), Serdes.long())
        inp.pipe_input("a", "x", timestamp=1)
        inp.pipe_input("a", "x", timestamp=12)
        assert out.read_key_values() == [(w("a", 0, 10), 1)]  # before any commit


def test_distinct_rejects_emit_final() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key()
    for windows in (TimeWindows.of_size(10), SessionWindows.with_inactivity_gap(10)):
        with pytest.raises(TopologyError, match=r"distinct.*on_window_close"):
            grouped.windowed_by(windows).emit_strategy(FINAL).distinct()


def test_emit_strategy_needs_an_emit_strategy() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key()
    with pytest.raises(TypeError, match=r"EmitStrategy\.on_window_close"):
        grouped.windowed_by(TimeWindows.of_size(10)).emit_strategy("final")


def test_the_windowed_stream_is_not_changed_by_emit_strategy() -> None:
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(TimeWindows.of_size(10))
    )
    final = windowed.emit_strategy(FINAL)
    assert windowed.emit is EmitStrategy.ON_WINDOW_UPDATE
    assert final.emit is EmitStrategy.ON_WINDOW_CLOSE


# ---- sessions: SessionWindowedKStreamImplTest -------------------------------------------------

SESSION_DATA = [("1", "1", 10), ("1", "2", 15), ("1", "3", 600), ("2", "1", 600), ("2", "2", 599)]
HALF_SECOND_GAP = SessionWindows.of_inactivity_gap_with_no_grace(500)


def test_session_count_emits_each_closed_session_once() -> None:
    out = run(HALF_SECOND_GAP, lambda s: s.count(), SESSION_DATA, Serdes.long())
    assert out == [(w("1", 10, 15), 2, 15)]


def test_session_reduce_emits_each_closed_session_once() -> None:
    out = run(HALF_SECOND_GAP, lambda s: s.reduce(lambda a, v: f"{a}+{v}"), SESSION_DATA)
    assert out == [(w("1", 10, 15), "1+2", 15)]


def test_session_aggregate_emits_each_closed_session_once() -> None:
    out = run(
        HALF_SECOND_GAP,
        lambda s: s.aggregate(
            string_init, to_string_adder, string_merger, Materialized.with_(STRING, STRING)
        ),
        SESSION_DATA,
    )
    assert out == [(w("1", 10, 15), "0+0+1+2", 15)]


# ---- sessions: KStreamSessionWindowAggregateProcessorTest -------------------------------------

GAP = 5 * 60 * 1000
FIVE_MINUTES = SessionWindows.of_inactivity_gap_with_no_grace(GAP)


def test_sessions_apart_by_the_gap_close_one_after_another() -> None:
    now = GAP + 1
    records = [
        ("mel", "first", 0),
        ("mel", "second", now),
        ("mel", "second", now),
        ("mel", "third", 2 * now),
        ("mel", "third", 2 * now),
        ("mel", "third", 2 * now),
    ]
    out = run(FIVE_MINUTES, lambda s: s.count(), records, Serdes.long())
    assert out == [(w("mel", 0, 0), 1, 0), (w("mel", now, now), 2, now)]


def test_sessions_of_many_keys_close_in_end_then_key_order() -> None:
    half = GAP // 2
    records = [
        ("a", "1", 0),
        ("b", "1", 0),
        ("c", "1", 0),
        ("d", "1", 0),
        ("d", "2", half),
        ("a", "2", GAP + 1),
        ("b", "2", GAP + 1),
        ("a", "3", GAP + 1 + half),
        ("c", "3", GAP + 1 + half),
    ]
    out = run(FIVE_MINUTES, lambda s: s.count(), records, Serdes.long())
    assert out == [
        (w("a", 0, 0), 1, 0),
        (w("b", 0, 0), 1, 0),
        (w("c", 0, 0), 1, 0),
        (w("d", 0, half), 2, half),
    ]


@pytest.mark.parametrize(
    ("grace", "records"),
    [
        (0, [("dummy", "d", 0), ("OnTime1", "1", 0), ("dummy", "d", 11), ("Late1", "1", 0)]),
        (
            1,
            [
                ("dummy", "d", 0),
                ("OnTime1", "1", 0),
                ("dummy", "d", 11),
                ("OnTime2", "1", 0),
                ("dummy", "d", 12),
                ("Late1", "1", 0),
            ],
        ),
    ],
)
def test_a_record_for_a_closed_session_is_dropped(grace: int, records: list) -> None:
    windows = SessionWindows.of_inactivity_gap_and_grace(10, grace)
    out, metrics = run_windowed(windows, lambda s: s.count(), records, Serdes.long(), FINAL)
    assert metrics["dropped-records"] == 1
    assert all(key.key != "Late1" for key, _, _ in out)


def test_a_session_closes_strictly_past_end_plus_gap_plus_grace() -> None:
    """SEMANTICS 4b: a session [start, end] is final once stream time > end + gap + grace."""
    windows = SessionWindows.of_inactivity_gap_and_grace(5_000, 2_000)
    records = [("a", "x", 0), ("a", "x", 3_000), ("b", "x", 10_000)]  # 3000 + 7000
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == []
    records.append(("b", "x", 10_001))
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == [
        (w("a", 0, 3_000), 2, 3_000)
    ]


def test_until_sets_the_grace_to_retention_minus_gap() -> None:
    windows = SessionWindows.with_inactivity_gap(5_000).until(8_000)
    assert windows.grace_ms == 3_000
    records = [("a", "x", 0), ("b", "x", 8_000)]
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == []
    records.append(("b", "x", 8_001))
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == [(w("a", 0, 0), 1, 0)]


def test_merged_sessions_are_never_emitted() -> None:
    windows = SessionWindows.of_inactivity_gap_and_grace(5, 10)
    records = [("a", "x", 0), ("a", "x", 10), ("a", "x", 5), ("z", "x", 25)]
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == []
    records.append(("z", "x", 26))
    assert run(windows, lambda s: s.count(), records, Serdes.long()) == [(w("a", 0, 10), 3, 10)]


def test_session_retention_shorter_than_gap_plus_grace_is_rejected() -> None:
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in", Consumed.with_(STRING, STRING))
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 10))
        .emit_strategy(FINAL)
    )
    with pytest.raises(ValueError, match="gap plus grace"):
        windowed.count(Materialized.as_("s").with_retention(15))
