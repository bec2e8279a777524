"""Stream-stream joins: the window specification, options, topology and edge cases (Kafka's
JoinWindowsTest and the option and metric cases of KStreamKStreamJoinTest)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamtide import (
    Consumed,
    JoinWindows,
    Produced,
    Serdes,
    StreamJoined,
    StreamsBuilder,
    StreamsConfig,
    TopologyError,
)
from streamtide.state.join_stores import JoinWindowStore, OuterJoinStore
from streamtide.testing import TopologyTestDriver
from tests.dsl.stream_join_support import join_case

# ---- JoinWindows (Kafka's JoinWindowsTest) ------------------------------------------------------


def test_join_windows_before_and_after_may_be_negative_while_the_interval_is_not():
    windows = JoinWindows.of_time_difference_with_no_grace(456)
    assert (windows.before_ms, windows.after_ms, windows.grace_ms) == (456, 456, 0)
    for before in (123, 0, -123, -456):
        assert windows.before(before).before_ms == before
    for after in (123, 0, -123, -456):
        assert windows.after(after).after_ms == after
    with pytest.raises(ValueError, match=r"before \+ after\) must not be negative"):
        JoinWindows.of_time_difference_with_no_grace(123).after(-124)
    with pytest.raises(ValueError, match=r"before \+ after\) must not be negative"):
        JoinWindows.of_time_difference_with_no_grace(123).before(-124)


def test_join_windows_reject_a_negative_time_difference_or_grace():
    with pytest.raises(ValueError, match="must not be negative"):
        JoinWindows.of_time_difference_with_no_grace(-1)
    with pytest.raises(ValueError, match="must not be negative"):
        JoinWindows.of_time_difference_and_grace(-1, 1024)
    with pytest.raises(ValueError, match="grace period must not be negative"):
        JoinWindows.of_time_difference_and_grace(3, -1)
    with pytest.raises(TypeError, match="time difference must be a timedelta or int"):
        JoinWindows.of_time_difference_with_no_grace("10")


def test_join_windows_grace_sizes_and_equality():
    assert JoinWindows.of_time_difference_with_no_grace(3).grace_ms == 0
    assert JoinWindows.of_time_difference_and_grace(123, 1024).grace_ms == 1024
    windows = JoinWindows.of_time_difference_and_grace(timedelta(seconds=1), timedelta(seconds=2))
    assert windows.before(5).grace_ms == 2000 and windows.after(5).grace_ms == 2000
    assert (windows.size_ms, windows.retention_ms) == (2000, 4000)
    assert JoinWindows.of_time_difference_and_grace(3, 2).after(4) == (
        JoinWindows.of_time_difference_and_grace(3, 2).after(4)
    )
    assert hash(JoinWindows.of_time_difference_with_no_grace(3)) == hash(
        JoinWindows.of_time_difference_with_no_grace(3)
    )
    assert JoinWindows.of_time_difference_with_no_grace(9) != (
        JoinWindows.of_time_difference_with_no_grace(3)
    )
    assert JoinWindows.of_time_difference_and_grace(3, 9) != (
        JoinWindows.of_time_difference_and_grace(3, 2)
    )


# ---- options, stores and topology -----------------------------------------------------------


def _two_streams(left_values=None, right_values=None):
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed.with_(Serdes.string(), left_values or Serdes.integer()))
    right = builder.stream(
        "right", Consumed.with_(Serdes.string(), right_values or Serdes.integer())
    )
    return builder, left, right


def test_join_with_the_streams_consumed_serdes_sums_values():
    """Kafka's ``runJoin``: no StreamJoined, the stores use the streams' serdes."""
    builder, left, right = _two_streams()
    joined = left.join(right, lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(100))
    joined.to("out", Produced.with_(Serdes.string(), Serdes.integer()))
    with TopologyTestDriver(builder.build()) as driver:
        lefts = driver.create_input_topic("left", Serdes.string(), Serdes.integer())
        rights = driver.create_input_topic("right", Serdes.string(), Serdes.integer())
        lefts.pipe_input("A", 1, timestamp=1)
        lefts.pipe_input("B", 1, timestamp=2)
        rights.pipe_input("A", 1, timestamp=1)
        rights.pipe_input("B", 2, timestamp=2)
        out = driver.create_output_topic("out", Serdes.string(), Serdes.integer())
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [
            ("A", 2, 1),
            ("B", 3, 2),
        ]
        store = driver.get_state_store("KSTREAM-JOINTHIS-0000000003-store")
        assert isinstance(store, JoinWindowStore)
        assert store.fetch_values("A", 0, 10) == [(1, 1)]


def test_null_key_or_value_is_dropped_and_counted():
    builder, left, right = _two_streams()
    left.join(right, lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(100)).to(
        "out", Produced.with_(Serdes.string(), Serdes.integer())
    )
    with TopologyTestDriver(builder.build()) as driver:
        lefts = driver.create_input_topic("left", Serdes.string(), Serdes.integer())
        lefts.pipe_input("A", None, timestamp=0)
        lefts.pipe_input(None, 3, timestamp=0)
        assert driver.metrics()["dropped-records"] == 2
        assert driver.metrics()["dropped-records.null_key_or_value"] == 2
        assert driver.create_output_topic("out", Serdes.string(), Serdes.integer()).is_empty()


def test_left_and_outer_joins_emit_a_null_key_record_at_once():
    """KIP-962: a None key cannot join, so a left or outer join emits it unjoined at once; a
    None value is dropped."""
    windows = JoinWindows.of_time_difference_with_no_grace(100)
    with join_case("left_join", windows) as (pipe1, pipe2, check):
        pipe1(None, "A", 5)
        check((None, "A+null", 5))
        pipe2(None, "a", 6)  # the right side of a left join: dropped
        pipe1(1, None, 7)
        check()
    with join_case("outer_join", windows) as (pipe1, pipe2, check):
        pipe2(None, "a", 6)
        check((None, "null+a", 6))


def test_store_names_and_processor_names_from_stream_joined():
    builder, left, right = _two_streams()
    joined = StreamJoined.with_(Serdes.string(), Serdes.integer(), Serdes.integer())
    joined = joined.with_store_name("orders").with_name("match")
    left.outer_join(
        right, lambda a, b: (a, b), JoinWindows.of_time_difference_with_no_grace(10), joined
    )
    topology = builder.build()
    assert set(topology.store_builders) == {
        "orders-this-join-store",
        "orders-other-join-store",
        "orders-outer-shared-join-store",
    }
    assert {"match-this-join", "match-other-join", "match-merge"} <= set(topology.nodes)
    assert topology.copartition_groups == [
        (frozenset({"left", "right"}), "outer_join match-this-join")
    ]
    with TopologyTestDriver(topology) as driver:
        assert isinstance(driver.get_state_store("orders-outer-shared-join-store"), OuterJoinStore)


def test_inner_join_has_no_outer_store_and_logging_can_be_disabled():
    builder, left, right = _two_streams()
    left.join(
        right,
        lambda a, b: a,
        JoinWindows.of_time_difference_with_no_grace(10),
        StreamJoined.as_("s").with_logging_disabled(),
    )
    stores = builder.build().store_builders
    assert set(stores) == {"s-this-join-store", "s-other-join-store"}
    assert not any(store.logging_enabled for store in stores.values())


def test_join_arguments_are_checked():
    _, left, right = _two_streams()
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    with pytest.raises(TypeError, match="needs JoinWindows"):
        left.join(right, lambda a, b: a, None)
    with pytest.raises(TypeError, match="joiner must be callable"):
        left.join(right, "nope", windows)
    with pytest.raises(TypeError, match="must be a StreamJoined"):
        left.join(right, lambda a, b: a, windows, "x")
    with pytest.raises(TopologyError, match="same StreamsBuilder"):
        left.join(StreamsBuilder().stream("other"), lambda a, b: a, windows)


def test_key_changing_operation_repartitions_before_the_join():
    builder, left, right = _two_streams(Serdes.string(), Serdes.string())
    rekeyed = left.select_key(lambda k, v: v)
    joined = rekeyed.join(
        right, lambda a, b: f"{a}/{b}", JoinWindows.of_time_difference_with_no_grace(10)
    )
    joined.to("out", Produced.with_(Serdes.string(), Serdes.string()))
    topology = builder.build()
    assert topology.internal_topics == {"KSTREAM-JOIN-0000000003-left-repartition"}
    assert len(topology.subtopologies()) == 2
    ((group, _),) = topology.copartition_groups
    assert group == {"KSTREAM-JOIN-0000000003-left-repartition", "right"}
    config = StreamsConfig(application_id="rekey", default_key_serde=Serdes.string())
    with TopologyTestDriver(topology, config) as driver:
        driver.create_input_topic("left", Serdes.string(), Serdes.string()).pipe_input(
            "x", "k", timestamp=1
        )
        driver.create_input_topic("right", Serdes.string(), Serdes.string()).pipe_input(
            "k", "r", timestamp=2
        )
        out = driver.create_output_topic("out", Serdes.string(), Serdes.string())
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [("k", "k/r", 2)]


def test_outer_join_forwards_the_current_records_headers():
    """Kafka's testShouldForwardCurrentHeaders: results carry the headers of the record being
    processed, also non-joined results emitted when a later record closes their window."""
    builder, left, right = _two_streams(Serdes.string(), Serdes.long())
    left.outer_join(
        right,
        lambda a, b: f"{'null' if a is None else a}+{'null' if b is None else b}",
        JoinWindows.of_time_difference_and_grace(100, 10),
    ).to("out", Produced.with_(Serdes.string(), Serdes.string()))
    with TopologyTestDriver(builder.build()) as driver:
        lefts = driver.create_input_topic("left", Serdes.string(), Serdes.string())
        rights = driver.create_input_topic("right", Serdes.string(), Serdes.long())
        out = driver.create_output_topic("out", Serdes.string(), Serdes.string())
        lefts.pipe_input("0", "A0", timestamp=0, headers=[("h", b"\x01")])
        rights.pipe_input("1", 10, timestamp=0, headers=[("h", b"\x02")])
        rights.pipe_input("3", 100, timestamp=211, headers=[("h", b"\x03")])
        got = [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in out.read_records()]
        assert got == [
            ("1", "null+10", 0, (("h", b"\x03"),)),
            ("0", "A0+null", 0, (("h", b"\x03"),)),
        ]
        lefts.pipe_input("2", "A2", timestamp=200, headers=[("h", b"\x04")])
        rights.pipe_input("2", 12, timestamp=200, headers=[("h", b"\x05")])
        got = [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in out.read_records()]
        assert got == [("2", "A2+12", 200, (("h", b"\x05"),))]


def test_self_join_joins_each_record_with_itself():
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
    stream.join(stream, lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(10)).to(
        "out", Produced.with_(Serdes.string(), Serdes.string())
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        inp.pipe_input("k", "a", timestamp=1)
        inp.pipe_input("k", "b", timestamp=2)
        out = driver.create_output_topic("out", Serdes.string(), Serdes.string())
        assert out.read_key_values() == [("k", "aa"), ("k", "ba"), ("k", "ab"), ("k", "bb")]
