"""Result timestamps of aggregations (SEMANTICS 4b), through the test driver on both paths.

A time window's result carries the largest record timestamp seen in that window; a
non-windowed aggregate's result the larger of the record's and the previous result's; a
session's result its end. The timestamps live in the stores, next to the aggregates, while
the store APIs keep returning plain values.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from streamtide import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    Window,
    Windowed,
)
from streamtide.testing import TopologyTestDriver

SEC = 1000
TEN = TimeWindows.of_size(10 * SEC)
STRING, LONG = Serdes.string(), Serdes.long()


def tw(start_s: int, end_s: int, key: str = "a") -> Windowed:
    return Windowed(key, Window(start_s * SEC, end_s * SEC))


def emitted(out) -> list[tuple]:  # type: ignore[no-untyped-def]
    """(key, value, timestamp in s) of every unread output record."""
    return [(r.key, r.value, r.timestamp / SEC) for r in out.read_records()]


def pipe(inp, records: list[tuple[str, float]]) -> None:  # type: ignore[no-untyped-def]
    for key, second in records:
        inp.pipe_input(key, "v", timestamp=int(second * SEC))


@contextmanager
def window_count(windows: TimeWindows) -> Iterator[tuple]:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, STRING))
    stream.group_by_key().windowed_by(windows).count(Materialized.as_("windows")).to_stream().to(
        "out"
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", Serdes.windowed(STRING), LONG)
        yield driver, inp, out


def test_4b_result_timestamp_is_the_largest_record_timestamp() -> None:
    with window_count(TEN) as (driver, inp, out):
        pipe(inp, [("a", 5), ("a", 2), ("a", 7)])
        assert emitted(out) == [
            (tw(0, 10), 1, 5),
            (tw(0, 10), 2, 5),
            (tw(0, 10), 3, 7),
        ]
        store = driver.get_window_store("windows")
        assert store.get("a", 0) == 3  # users read the plain aggregate
        assert store.fetch("a") == [(tw(0, 10), 3)]
        assert store.get_with_timestamp("a", 0) == (3, 7 * SEC)


def test_4b_non_windowed_results_carry_the_max_of_record_and_previous_result() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, Serdes.int())).group_by_key()
    grouped.count(Materialized.as_("counts")).to_stream().to("count")
    grouped.reduce(lambda agg, v: agg + v, Materialized.as_("sums")).to_stream().to("reduce")
    grouped.aggregate(
        list,
        lambda _k, v, agg: [*agg, v],
        Materialized.as_("lists").with_value_serde(Serdes.json()),
    ).to_stream().to("aggregate")
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, Serdes.int())
        for value, second in [(1, 5), (2, 2), (3, 7), (4, 1)]:
            inp.pipe_input("a", value, timestamp=second * SEC)
        inp.pipe_input("b", 9, timestamp=3 * SEC)
        times = [5, 5, 7, 7, 3]
        counts = driver.create_output_topic("count", STRING, LONG)
        assert emitted(counts) == [
            (k, v, t) for (k, v), t in zip([*(("a", n) for n in (1, 2, 3, 4)), ("b", 1)], times)
        ]
        sums = driver.create_output_topic("reduce", STRING, Serdes.int())
        assert [r[2] for r in emitted(sums)] == times
        lists = driver.create_output_topic("aggregate", STRING, Serdes.json())
        assert emitted(lists)[3] == ("a", [1, 2, 3, 4], 7)
        assert driver.get_key_value_store("counts").get("a") == 4
        assert dict(driver.get_key_value_store("lists").all()) == {"a": [1, 2, 3, 4], "b": [9]}
        assert driver.get_key_value_store("sums").get_with_timestamp("a") == (10, 7 * SEC)


def test_4b_hopping_windows_each_keep_their_own_largest_timestamp() -> None:
    with window_count(TEN.advance_by(5 * SEC)) as (driver, inp, out):
        pipe(inp, [("a", 7), ("a", 3), ("a", 12), ("a", 6)])
        assert emitted(out) == [
            (tw(0, 10), 1, 7),
            (tw(5, 15), 1, 7),
            (tw(0, 10), 2, 7),  # 3 s does not move [0, 10) back
            (tw(5, 15), 2, 12),
            (tw(10, 20), 1, 12),
            (tw(5, 15), 3, 12),  # 6 s: [0, 10) closed at stream time 12, [5, 15) keeps 12 s
        ]
        assert driver.metrics()["dropped-records"] == 1


def test_4b_grace_accepted_and_dropped_late_records_never_move_a_timestamp() -> None:
    with window_count(TEN.grace(5 * SEC)) as (driver, inp, out):
        pipe(inp, [("a", 8), ("a", 14), ("a", 3)])  # 3 s is late but within the grace
        assert emitted(out) == [(tw(0, 10), 1, 8), (tw(10, 20), 1, 14), (tw(0, 10), 2, 8)]
        pipe(inp, [("a", 16), ("a", 9.5)])  # [0, 10) closed at 15 s: 9.5 s is dropped
        assert emitted(out) == [(tw(10, 20), 2, 16)]
        assert driver.metrics()["dropped-records"] == 1
        assert driver.get_window_store("windows").get_with_timestamp("a", 0) == (2, 8 * SEC)


def test_4b_cache_on_emits_the_largest_timestamp_at_commit() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, STRING))
    stream.group_by_key().windowed_by(TEN).count().to_stream().to("out")
    with TopologyTestDriver(builder.build(), cache_enabled=True) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", Serdes.windowed(STRING), LONG)
        inp.pipe_record_list([("a", "v", 5 * SEC), ("a", "v", 7 * SEC), ("a", "v", 2 * SEC)])
        assert emitted(out) == [(tw(0, 10), 3, 7)]


def test_4b_a_session_result_carries_the_session_end() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, STRING))
    sessions = SessionWindows.with_inactivity_gap(5 * SEC)
    stream.group_by_key().windowed_by(sessions).count().to_stream().to("out")
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", Serdes.windowed(STRING), LONG)
        pipe(inp, [("a", 0), ("a", 4), ("a", 1)])
        assert emitted(out) == [
            (tw(0, 0), 1, 0),
            (tw(0, 0), None, 0),
            (tw(0, 4), 2, 4),
            (tw(0, 4), 3, 4),  # 1 s falls inside [0, 4]: the result keeps the end, 4 s
        ]


def test_windowed_distinct_emits_each_window_once_with_its_first_record_time() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(STRING, STRING))
    stream.group_by_key().windowed_by(TEN).distinct().to_stream().to("out")
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", Serdes.windowed(STRING), STRING)
        pipe(inp, [("a", 5), ("a", 2), ("a", 7)])
        assert emitted(out) == [(tw(0, 10), "v", 5)]
