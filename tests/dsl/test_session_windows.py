"""Session-windowed aggregation, through the TopologyTestDriver."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest

from streamtide import (
    Consumed,
    Grouped,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    Window,
    Windowed,
)
from streamtide.testing import TopologyTestDriver

GAP = 5_000
SEC = 1000


def sw(key, start_s: float, end_s: float) -> Windowed:
    return Windowed(key, Window(int(start_s * SEC), int(end_s * SEC)))


@contextmanager
def session_count(windows=None, materialized=None, cache=False, value_serde=None):
    """``in`` (str, str) -> group_by_key -> sessions -> count -> ``out``; yields the driver,
    the input topic and the output topic."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    windows = windows or SessionWindows.with_inactivity_gap(GAP)
    materialized = materialized or Materialized.as_("sessions")
    table = stream.group_by_key().windowed_by(windows).count(materialized)
    table.to_stream().to("out")
    with TopologyTestDriver(builder.build(), cache_enabled=cache) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.string()), Serdes.int())
        yield driver, inp, out


def pipe_seconds(inp, records: list[tuple[str | None, float]]) -> None:
    for key, second in records:
        inp.pipe_input(key, "v", timestamp=int(second * SEC))


# ---- session window acceptance cases (count, gap 5 s, retention 1 day, cache off) ----


def test_S1_merge_emits_tombstone_then_new_session():
    with session_count() as (_, inp, out):
        pipe_seconds(inp, [("a", 0), ("a", 3)])
        assert out.read_key_values() == [
            (sw("a", 0, 0), 1),
            (sw("a", 0, 0), None),
            (sw("a", 0, 3), 2),
        ]


def test_S2_records_beyond_the_gap_start_new_sessions():
    with session_count() as (_, inp, out):
        pipe_seconds(inp, [("a", 0), ("a", 20), ("a", 10)])
        assert out.read_key_values() == [
            (sw("a", 0, 0), 1),
            (sw("a", 20, 20), 1),
            (sw("a", 10, 10), 1),
        ]


def test_S3_bridging_record_merges_two_sessions_tombstones_by_end():
    with session_count() as (driver, inp, out):
        pipe_seconds(inp, [("a", 0), ("a", 10), ("a", 5)])
        assert out.read_key_values() == [
            (sw("a", 0, 0), 1),
            (sw("a", 10, 10), 1),
            (sw("a", 0, 0), None),
            (sw("a", 10, 10), None),
            (sw("a", 0, 10), 3),
        ]
        assert driver.get_session_store("sessions").fetch("a") == [(sw("a", 0, 10), 3)]


def test_S4_keys_have_separate_sessions():
    with session_count() as (_, inp, out):
        pipe_seconds(inp, [("a", 0), ("b", 2)])
        assert out.read_key_values() == [(sw("a", 0, 0), 1), (sw("b", 2, 2), 1)]


def test_S5_late_record_beyond_retention_is_emitted_not_stored():
    windows = SessionWindows.with_inactivity_gap(GAP).until(10_000)
    with session_count(windows) as (driver, inp, out):
        pipe_seconds(inp, [("a", 100), ("a", 50)])
        assert out.read_key_values() == [(sw("a", 100, 100), 1), (sw("a", 50, 50), 1)]
        assert driver.get_session_store("sessions").fetch("a") == [(sw("a", 100, 100), 1)]
        pipe_seconds(inp, [("a", 52)])  # 50 was not stored: nothing to merge with
        assert out.read_key_values() == [(sw("a", 52, 52), 1)]


# ---- further behaviour -------------------------------------------------------------------------


def test_record_inside_a_session_updates_it_without_tombstone():
    with session_count() as (_, inp, out):
        pipe_seconds(inp, [("a", 0), ("a", 10), ("a", 5)])
        out.read_key_values()
        pipe_seconds(inp, [("a", 7), ("a", 10)])
        assert out.read_key_values() == [(sw("a", 0, 10), 4), (sw("a", 0, 10), 5)]


def test_session_ending_exactly_at_stream_time_minus_retention_is_stored():
    windows = SessionWindows.with_inactivity_gap(GAP).until(10_000)
    with session_count(windows) as (driver, inp, _):
        pipe_seconds(inp, [("a", 100), ("a", 90), ("b", 89.999)])
        store = driver.get_session_store("sessions")
        assert store.fetch("a") == [(sw("a", 90, 90), 1), (sw("a", 100, 100), 1)]
        assert store.fetch("b") == []  # 1 ms older: late, not stored


def test_late_record_within_retention_merges_and_is_stored():
    windows = SessionWindows.with_inactivity_gap(GAP).until(10_000)
    with session_count(windows) as (driver, inp, out):
        pipe_seconds(inp, [("a", 88), ("a", 92), ("a", 100)])
        pipe_seconds(inp, [("a", 84)])  # older than 100 - 10, but [88/92] is still live
        assert out.read_key_values()[-2:] == [(sw("a", 88, 92), None), (sw("a", 84, 92), 3)]
        assert driver.get_session_store("sessions").fetch("a") == [
            (sw("a", 84, 92), 3),
            (sw("a", 100, 100), 1),
        ]


def test_none_keys_and_values_are_dropped_and_counted():
    with session_count() as (driver, inp, out):
        inp.pipe_input(None, "v", timestamp=0)
        inp.pipe_input("a", None, timestamp=0)
        assert out.read_key_values() == []
        assert driver.metrics()["dropped-records"] == 2


def test_expired_sessions_vanish_and_their_segments_are_dropped():
    windows = SessionWindows.with_inactivity_gap(GAP).until(10_000)  # 60 s segments
    with session_count(windows) as (driver, inp, _):
        store = driver.get_session_store("sessions")
        pipe_seconds(inp, [("a", 12), ("b", 20)])
        assert [s for s, _ in store.all()] == [sw("a", 12, 12), sw("b", 20, 20)]
        pipe_seconds(inp, [("c", 65)])  # live from 55 s: a and b expired, segment 0 kept
        assert [s for s, _ in store.all()] == [sw("c", 65, 65)]
        assert store.fetch("a") == []
        assert sum(1 for _ in store.inner.all()) == 3
        pipe_seconds(inp, [("d", 119)])  # live from 109 s: segment 0 is dropped whole
        assert sum(1 for _ in store.inner.all()) == 2  # c (expired) and d, in segment 1
        assert [s for s, _ in store.all()] == [sw("d", 119, 119)]


def test_aggregate_merges_with_the_session_merger_in_end_order():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    (
        stream.group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(GAP))
        .aggregate(
            lambda: "",
            lambda _k, v, agg: agg + v,
            lambda _k, a, b: f"({a}+{b})",
            Materialized.with_(value_serde=Serdes.string()),
        )
        .to_stream()
        .to("out")
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.string()), Serdes.string())
        for value, second in [("x", 0), ("y", 10), ("z", 5)]:
            inp.pipe_input("k", value, timestamp=second * SEC)
        assert out.read_key_values()[-1] == (sw("k", 0, 10), "((+x)+y)z")


def test_reduce_uses_the_reducer_to_merge():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int()))
    stream.group_by_key().windowed_by(SessionWindows.with_inactivity_gap(GAP)).reduce(
        lambda agg, v: agg * 10 + v
    ).to_stream().to("out")
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.string()), Serdes.int())
        for value, second in [(1, 0), (2, 10), (3, 5)]:
            inp.pipe_input("k", value, timestamp=second * SEC)
        assert out.read_key_values() == [
            (sw("k", 0, 0), 1),
            (sw("k", 10, 10), 2),
            (sw("k", 0, 0), None),
            (sw("k", 10, 10), None),
            (sw("k", 0, 10), 123),
        ]


def test_cache_on_collapses_updates_per_commit():
    with session_count(cache=True) as (_, inp, out):
        inp.pipe_record_list([("a", "v", 0), ("a", "v", 3000), ("a", "v", 4000), ("b", "v", 0)])
        assert out.read_key_values() == [(sw("a", 0, 4), 3), (sw("b", 0, 0), 1)]
        inp.pipe_record_list([("a", "v", 2000), ("a", "v", 1000)])
        assert out.read_key_values() == [(sw("a", 0, 4), 5)]
        inp.pipe_record_list([("a", "v", 8000)])  # widens a flushed session: its tombstone
        assert out.read_key_values() == [(sw("a", 0, 4), None), (sw("a", 0, 8), 6)]


def test_cache_on_no_tombstone_for_a_session_never_emitted():
    """SEMANTICS 5 (cache on, gap 5 s, one flush at the end): a@0, a@10, a@5 emit exactly
    [0/10]=3."""
    with session_count(cache=True) as (_, inp, out):
        inp.pipe_record_list([("a", "v", 0), ("a", "v", 10_000), ("a", "v", 5_000)])
        assert out.read_key_values() == [(sw("a", 0, 10), 3)]


def test_cache_off_emits_every_update_even_when_the_task_caches():
    materialized = Materialized.as_("sessions").with_caching_disabled()
    with session_count(materialized=materialized, cache=True) as (_, inp, out):
        inp.pipe_record_list([("a", "v", 0), ("a", "v", 3000)])
        assert out.read_key_values() == [
            (sw("a", 0, 0), 1),
            (sw("a", 0, 0), None),
            (sw("a", 0, 3), 2),
        ]


def test_key_changing_operation_repartitions_before_the_window():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    (
        stream.select_key(lambda _k, v: v)
        .group_by_key(Grouped.with_(Serdes.string(), Serdes.string()))
        .windowed_by(SessionWindows.with_inactivity_gap(GAP))
        .count(Materialized.as_("by-value"))
        .to_stream()
        .to("out")
    )
    topology = builder.build()
    assert "by-value-repartition" in topology.internal_topics
    with TopologyTestDriver(topology) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out", Serdes.windowed(Serdes.string()), Serdes.int())
        inp.pipe_input("k1", "x", timestamp=0)
        inp.pipe_input("k2", "x", timestamp=1000)
        assert out.read_key_values()[-1] == (sw("x", 0, 1), 2)


def test_describe_shows_the_windowed_aggregate_and_its_store():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    stream.group_by_key().windowed_by(SessionWindows.with_inactivity_gap(GAP)).count(
        Materialized.as_("sessions")
    ).to_stream().to("out")
    text = str(builder.build().describe())
    assert "Processor: KSTREAM-AGGREGATE-0000000001 (stores: [sessions])" in text
    assert "Sink: KSTREAM-SINK-0000000003 (topic: out)" in text


def test_default_serdes_from_the_config():
    builder = StreamsBuilder()
    stream = builder.stream("in")
    stream.group_by_key().windowed_by(SessionWindows.with_inactivity_gap(GAP)).count(
        Materialized.as_("sessions")
    )
    config = StreamsConfig(application_id="sessions", default_key_serde=Serdes.string())
    with TopologyTestDriver(builder.build(), config) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.bytes())
        inp.pipe_input("a", b"v", timestamp=0)
        assert driver.get_session_store("sessions").fetch("a") == [(sw("a", 0, 0), 1)]


def test_session_windows_validation():
    assert SessionWindows.with_inactivity_gap(timedelta(minutes=5)).gap_ms == 300_000
    assert SessionWindows.with_inactivity_gap(5).retention_ms == 86_400_000
    assert SessionWindows.with_inactivity_gap(5).until(timedelta(seconds=1)).retention_ms == 1000
    assert SessionWindows.with_inactivity_gap(2 * 86_400_000).retention_ms == 2 * 86_400_000
    for gap in (0, -1, timedelta(0)):
        with pytest.raises(ValueError, match="inactivity gap must be positive"):
            SessionWindows.with_inactivity_gap(gap)
    with pytest.raises(ValueError, match="at least the inactivity gap"):
        SessionWindows.with_inactivity_gap(5000).until(4999)
    with pytest.raises(TypeError):
        SessionWindows.with_inactivity_gap(1.5)
    grouped = StreamsBuilder().stream("in").group_by_key()
    with pytest.raises(ValueError, match="at least the inactivity gap"):
        grouped.windowed_by(SessionWindows.with_inactivity_gap(5000)).count(
            Materialized.as_("s").with_retention(1000)
        )
    with pytest.raises(TypeError, match="TimeWindows, SessionWindows or SlidingWindows"):
        grouped.windowed_by(5000)
