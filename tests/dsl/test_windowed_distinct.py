"""Windowed ``distinct()``, through the TopologyTestDriver."""

from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
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

SEC = 1000
#: Three bursts of variously ordered records, then late arrivals (seconds).
SECONDS = [4, 5, 6, 23, 22, 24, 34, 33, 32, 7, 22, 35]


def run_distinct(windows, seconds=SECONDS, cache=False, key="key"):
    """Pipe ``key@s`` with value ``s`` for each second; return emitted pairs and the driver's
    metrics and the store's contents."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int()))
    stream.group_by_key().windowed_by(windows).distinct(Materialized.as_("seen")).to_stream().to(
        "out"
    )
    with TopologyTestDriver(builder.build(), cache_enabled=cache) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.string()), Serdes.int())
        for second in seconds:
            inp.pipe_input(key, second, timestamp=second * SEC)
        store = driver.get_state_store("seen")
        return out.read_key_values(), driver.metrics(), store.all()


def wk(start: int, end: int, key: str = "key") -> Windowed:
    return Windowed(key, Window(start, end))


def test_W1_tumbling_emits_the_first_record_of_each_window():
    emitted, metrics, _ = run_distinct(TimeWindows.of_size(10 * SEC))
    assert emitted == [(wk(0, 10000), 4), (wk(20000, 30000), 23), (wk(30000, 40000), 34)]
    assert metrics["dropped-records"] == 2  # 7 and 22 arrive after their windows closed


def test_W2_session_gap_10s_glues_the_later_bursts_together():
    emitted, _, stored = run_distinct(SessionWindows.with_inactivity_gap(10 * SEC))
    assert emitted == [(wk(4000, 4000), 4), (wk(23000, 23000), 23)]
    assert stored == [(wk(4000, 7000), 4), (wk(22000, 35000), 23)]


def test_W3_session_gap_9s_keeps_three_sessions():
    emitted, _, stored = run_distinct(SessionWindows.with_inactivity_gap(9 * SEC))
    assert emitted == [(wk(4000, 4000), 4), (wk(23000, 23000), 23), (wk(34000, 34000), 34)]
    # 33 is within 9 s of both 24 and 34, so the last two sessions merged without emitting
    assert stored == [(wk(4000, 7000), 4), (wk(22000, 35000), 23)]


def test_distinct_with_grace_accepts_late_records_into_new_windows():
    emitted, metrics, _ = run_distinct(TimeWindows.of_size(10 * SEC).grace(25 * SEC))
    assert emitted == [
        (wk(0, 10000), 4),
        (wk(20000, 30000), 23),
        (wk(30000, 40000), 34),
    ]  # 7 and 22 fall into windows that already exist
    assert metrics.get("dropped-records", 0) == 0
    emitted, _, _ = run_distinct(TimeWindows.of_size(10 * SEC).grace(25 * SEC), [34, 15, 12])
    assert emitted == [(wk(30000, 40000), 34), (wk(10000, 20000), 15)]


@pytest.mark.parametrize("cache", [False, True])
def test_distinct_with_and_without_cache(cache):
    emitted, _, _ = run_distinct(SessionWindows.with_inactivity_gap(9 * SEC), cache=cache)
    assert [v for _, v in emitted] == [4, 23, 34]


def test_hopping_windows_are_rejected_with_the_reason():
    grouped = StreamsBuilder().stream("in").group_by_key()
    hopping = TimeWindows.of_size(10 * SEC).advance_by(5 * SEC)
    with pytest.raises(TopologyError, match="tumbling") as info:
        grouped.windowed_by(hopping).distinct()
    assert "several windows" in str(info.value)


def test_keys_are_compared_by_their_serialized_bytes():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.json(), Serdes.int()))
    stream.group_by_key().windowed_by(TimeWindows.of_size(10 * SEC)).distinct().to_stream().to(
        "out"
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.json(), Serdes.int())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.json()), Serdes.int())
        inp.pipe_input({"a": 1, "b": 2}, 1, timestamp=1000)
        inp.pipe_input({"b": 2, "a": 1}, 2, timestamp=2000)  # equal bytes: a duplicate
        inp.pipe_input({"a": 1}, 3, timestamp=3000)
        assert out.read_values() == [1, 3]


def test_none_keys_are_dropped_and_counted():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int()))
    stream.group_by_key().windowed_by(SessionWindows.with_inactivity_gap(SEC)).distinct()
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
        inp.pipe_input(None, 1, timestamp=0)
        assert driver.metrics()["dropped-records"] == 1


def test_late_session_beyond_retention_is_emitted_but_not_stored():
    windows = SessionWindows.with_inactivity_gap(5 * SEC).until(10 * SEC)
    emitted, _, stored = run_distinct(windows, [100, 50, 51])
    assert emitted == [(wk(100000, 100000), 100), (wk(50000, 50000), 50), (wk(51000, 51000), 51)]
    assert stored == [(wk(100000, 100000), 100)]


def test_describe_names_the_distinct_node_and_its_store():
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size(SEC)).distinct(
        Materialized.as_("seen")
    )
    assert "Processor: KSTREAM-DISTINCT-0000000001 (stores: [seen])" in str(
        builder.build().describe()
    )
