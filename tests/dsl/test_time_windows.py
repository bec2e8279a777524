"""Time-windowed aggregation, through the TopologyTestDriver."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest

from streamtide import (
    Consumed,
    Materialized,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Window,
    Windowed,
)
from streamtide.testing import TopologyTestDriver

SEC = 1000
TEN = TimeWindows.of_size(10 * SEC)


def tw(key, start_s: float, end_s: float) -> Windowed:
    return Windowed(key, Window(int(start_s * SEC), int(end_s * SEC)))


@contextmanager
def window_count(windows=TEN, materialized=None, cache=False):
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    materialized = materialized or Materialized.as_("windows")
    stream.group_by_key().windowed_by(windows).count(materialized).to_stream().to("out")
    with TopologyTestDriver(builder.build(), cache_enabled=cache) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.string()), Serdes.int())
        yield driver, inp, out


def pipe_seconds(inp, records: list[tuple[str | None, float]]) -> None:
    for key, second in records:
        inp.pipe_input(key, "v", timestamp=int(second * SEC))


# ---- the window specification ------------------------------------------------------------------


def test_time_windows_specification():
    tumbling = TimeWindows.of_size(timedelta(seconds=10))
    assert (tumbling.size_ms, tumbling.advance_ms, tumbling.grace_ms) == (10_000, 10_000, 0)
    assert tumbling.is_tumbling
    assert tumbling.windows_for(0) == [Window(0, 10_000)]
    assert tumbling.windows_for(9_999) == [Window(0, 10_000)]
    assert tumbling.windows_for(10_000) == [Window(10_000, 20_000)]
    hopping = tumbling.advance_by(timedelta(seconds=3)).grace(500)
    assert not hopping.is_tumbling and hopping.grace_ms == 500
    assert hopping.windows_for(11_000) == [
        Window(3_000, 13_000),
        Window(6_000, 16_000),
        Window(9_000, 19_000),
    ]
    assert hopping.windows_for(1_000) == [Window(0, 10_000)]  # no window starts before 0
    assert tumbling.advance_by(10_000) == tumbling
    assert tumbling.grace_ms == 0  # the specification is immutable


@pytest.mark.parametrize("size", [0, -1, timedelta(0)])
def test_non_positive_size_is_rejected(size):
    with pytest.raises(ValueError, match="window size must be positive"):
        TimeWindows.of_size(size)


@pytest.mark.parametrize("advance", [0, -5, 10_001])
def test_advance_must_be_positive_and_at_most_the_size(advance):
    with pytest.raises(ValueError, match="at most the window size"):
        TEN.advance_by(advance)


def test_negative_grace_is_rejected():
    with pytest.raises(ValueError, match="grace period must not be negative"):
        TEN.grace(-1)


# ---- aggregation ------------------------------------------------------------------------------


def test_tumbling_count_per_key_and_window():
    with window_count() as (driver, inp, out):
        pipe_seconds(inp, [("a", 1), ("a", 2), ("b", 5), ("a", 11)])
        assert out.read_key_values() == [
            (tw("a", 0, 10), 1),
            (tw("a", 0, 10), 2),
            (tw("b", 0, 10), 1),
            (tw("a", 10, 20), 1),
        ]
        store = driver.get_window_store("windows")
        assert store.get("a", 0) == 2
        assert store.fetch("a", 0, 20_000) == [(tw("a", 0, 10), 2), (tw("a", 10, 20), 1)]


def test_hopping_count_updates_every_window_by_start():
    windows = TEN.advance_by(5 * SEC)
    with window_count(windows) as (_, inp, out):
        pipe_seconds(inp, [("a", 7), ("a", 12)])
        assert out.read_key_values() == [
            (tw("a", 0, 10), 1),
            (tw("a", 5, 15), 1),
            (tw("a", 5, 15), 2),
            (tw("a", 10, 20), 1),
        ]


def test_tumbling_grace_accepts_then_drops_late_records():
    windows = TEN.grace(5 * SEC)
    with window_count(windows) as (driver, inp, out):
        pipe_seconds(inp, [("a", 1), ("a", 12)])
        pipe_seconds(inp, [("a", 4)])  # [0, 10) ends after 12 - 5: accepted
        assert out.read_key_values()[-1] == (tw("a", 0, 10), 2)
        pipe_seconds(inp, [("a", 15)])  # stream time 15: [0, 10) now ends at 15 - 5
        pipe_seconds(inp, [("a", 8)])
        assert out.read_key_values() == [(tw("a", 10, 20), 2)]
        assert driver.metrics()["dropped-records"] == 1
        assert driver.get_window_store("windows").get("a", 0) == 2


def test_without_grace_a_window_closes_at_its_end():
    with window_count() as (driver, inp, out):
        pipe_seconds(inp, [("a", 10), ("a", 9.999)])
        assert out.read_key_values() == [(tw("a", 10, 20), 1)]
        assert driver.metrics()["dropped-records"] == 1


def test_hopping_grace_drops_a_record_only_for_closed_windows():
    windows = TEN.advance_by(5 * SEC).grace(2 * SEC)
    with window_count(windows) as (driver, inp, out):
        pipe_seconds(inp, [("a", 16)])  # windows [10, 20) and [15, 25)
        out.read_key_values()
        pipe_seconds(inp, [("a", 9)])  # [0, 10) closed (10 <= 16 - 2); [5, 15) still open
        assert out.read_key_values() == [(tw("a", 5, 15), 1)]
        assert driver.metrics()["dropped-records"] == 1
        pipe_seconds(inp, [("a", 30), ("a", 7)])  # both of 7's windows are closed
        assert driver.metrics()["dropped-records"] == 3


def test_windows_expire_after_retention_and_segments_are_dropped():
    materialized = Materialized.as_("windows").with_retention(60 * SEC)  # 60 s segments
    with window_count(materialized=materialized) as (driver, inp, _):
        store = driver.get_window_store("windows")
        assert store.retention_ms == 60_000 and store.segment_interval == 60_000
        pipe_seconds(inp, [("a", 5), ("a", 65)])
        assert [w for w, _ in store.fetch("a")] == [tw("a", 0, 10), tw("a", 60, 70)]
        pipe_seconds(inp, [("b", 70.001)])  # [0, 10) ended before 70.001 - 60
        assert [w for w, _ in store.fetch("a")] == [tw("a", 60, 70)]
        assert sum(1 for _ in store.inner.all()) == 3  # expired, but its segment is live
        pipe_seconds(inp, [("b", 130)])  # windows starting before 60 s: segment 0 dropped
        assert sum(1 for _ in store.inner.all()) == 3
        assert [(w.key, w.window.start) for w, _ in store.fetch_all()] == [
            ("a", 60_000),
            ("b", 70_000),
            ("b", 130_000),
        ]


def test_retention_is_never_shorter_than_size_or_default_grace():
    def retention(windows, materialized=None) -> int:
        with window_count(windows, materialized) as (driver, _, _):
            return driver.get_window_store("windows").retention_ms

    assert retention(TEN) == 86_400_000
    assert retention(TimeWindows.of_size(2 * 86_400_000)) == 2 * 86_400_000
    assert retention(TEN.grace(3 * 86_400_000)) == 3 * 86_400_000
    assert retention(TEN, Materialized.as_("windows").with_retention(1000)) == 10_000
    with pytest.raises(ValueError, match="at least the grace period"):
        retention(TEN.grace(5000), Materialized.as_("windows").with_retention(4000))


def test_aggregate_and_reduce():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int()))
    grouped = stream.group_by_key().windowed_by(TEN)
    grouped.reduce(max).to_stream().to("max")
    grouped.aggregate(
        lambda: [], lambda _k, v, agg: [*agg, v], Materialized.with_(value_serde=Serdes.json())
    ).to_stream().to("all")
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
        maxima = driver.create_output_topic("max", Serdes.windowed(Serdes.string()), Serdes.int())
        lists = driver.create_output_topic("all", Serdes.windowed(Serdes.string()), Serdes.json())
        for value, second in [(3, 1), (7, 2), (5, 3), (1, 12)]:
            inp.pipe_input("k", value, timestamp=second * SEC)
        assert maxima.read_values() == [3, 7, 7, 1]
        assert lists.read_key_values_to_map() == {tw("k", 0, 10): [3, 7, 5], tw("k", 10, 20): [1]}


def test_none_keys_and_values_are_dropped_and_counted():
    with window_count() as (driver, inp, out):
        inp.pipe_input(None, "v", timestamp=0)
        inp.pipe_input("a", None, timestamp=0)
        assert out.read_key_values() == []
        assert driver.metrics()["dropped-records"] == 2


def test_cache_on_collapses_updates_per_commit():
    with window_count(TEN.advance_by(5 * SEC), cache=True) as (_, inp, out):
        inp.pipe_record_list([("a", "v", 1000), ("a", "v", 6000), ("a", "v", 7000)])
        assert out.read_key_values() == [(tw("a", 0, 10), 3), (tw("a", 5, 15), 2)]


def test_caching_disabled_by_materialized_emits_every_update():
    materialized = Materialized.as_("windows").with_caching_disabled()
    with window_count(materialized=materialized, cache=True) as (_, inp, out):
        inp.pipe_record_list([("a", "v", 1000), ("a", "v", 2000)])
        assert out.read_key_values() == [(tw("a", 0, 10), 1), (tw("a", 0, 10), 2)]


def test_describe_shows_the_windowed_aggregate_and_its_store():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    stream.group_by_key().windowed_by(TEN).count().to_stream().to("out")
    text = str(builder.build().describe())
    assert (
        "Processor: KSTREAM-AGGREGATE-0000000002 "
        "(stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])"
    ) in text
