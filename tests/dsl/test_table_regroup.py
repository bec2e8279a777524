"""``KTable.group_by`` with ``count``, ``reduce``, ``aggregate``: Kafka's KTableAggregateTest
and KGroupedTableImplTest, through the test driver."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Grouped, Materialized, Serdes, StreamsBuilder, TopologyError
from streamtide.state.timestamped import ValueAndTimestamp as VT
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import STRING, capture, config

GROUPED = Grouped.with_(STRING, STRING)


def to_string_adder(_key, value, aggregate) -> str:
    return f"{aggregate}+{value}"


def to_string_remover(_key, value, aggregate) -> str:
    return f"{aggregate}-{value}"


def run(builder: StreamsBuilder, node: str, records: list[tuple]) -> list[tuple]:
    """Pipe ``records`` into ``topic1`` and return what ``node`` forwarded, new values only."""
    captured = capture(builder, node)
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        for key, value, ts in records:
            inp.pipe_input(key, value, timestamp=ts)
    return [(k, change.new, ts) for k, change, ts in captured.take()]


def to_string_aggregate(selector):
    """``topic1`` re-grouped by ``selector`` and aggregated as Kafka's tests do (strings)."""
    builder = StreamsBuilder()
    aggregated = (
        builder.table("topic1", Consumed.with_(STRING, STRING))
        .group_by(selector, GROUPED)
        .aggregate(
            lambda: "0",
            to_string_adder,
            to_string_remover,
            Materialized.as_("topic1-Canonized").with_value_serde(STRING),
        )
    )
    return builder, aggregated


def test_aggregate_subtracts_the_old_value_and_adds_the_new_one() -> None:
    """testAggBasic: an update that stays in its group is one update."""
    builder, aggregated = to_string_aggregate(lambda k, v: (k, v))
    records = [
        ("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18),
        ("C", "5", 5), ("D", "6", 25), ("B", "7", 15), ("C", "8", 10),
    ]  # fmt: skip
    assert run(builder, aggregated.node, records) == [
        ("A", "0+1", 10),
        ("B", "0+2", 15),
        ("A", "0+1-1+3", 20),
        ("B", "0+2-2+4", 18),
        ("C", "0+5", 5),
        ("D", "0+6", 25),
        ("B", "0+2-2+4-4+7", 18),
        ("C", "0+5-5+8", 10),
    ]


def select_value_unless_special(key, value):
    if key == "null":
        return (None, value)
    if key == "NULL":
        return None
    return (value, value)


def test_aggregate_moves_values_between_groups() -> None:
    """testAggRepartition: a None selection or a None group key drops the update."""
    builder, aggregated = to_string_aggregate(select_value_unless_special)
    records = [
        ("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20),
        ("null", "3", 25), ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22),
    ]  # fmt: skip
    assert run(builder, aggregated.node, records) == [
        ("1", "0+1", 10),
        ("1", "0+1-1", 15),
        ("1", "0+1-1+1", 15),
        ("2", "0+2", 20),
        ("2", "0+2-2", 23),
        ("4", "0+4", 23),
        ("4", "0+4-4", 23),
        ("7", "0+7", 22),
    ]


@pytest.mark.parametrize("materialized", [Materialized.as_("count"), None])
def test_count(materialized) -> None:
    """testCount / testCountWithInternalStore."""
    builder = StreamsBuilder()
    counted = (
        builder.table("topic1", Consumed.with_(STRING, STRING))
        .group_by(lambda k, v: (v, v), GROUPED)
        .count(materialized)
    )
    records = [
        ("A", "green", 10), ("B", "green", 9), ("A", "blue", 12),
        ("C", "yellow", 15), ("D", "green", 11),
    ]  # fmt: skip
    assert run(builder, counted.node, records) == [
        ("green", 1, 10),
        ("green", 2, 10),
        ("green", 1, 12),
        ("blue", 1, 12),
        ("yellow", 1, 15),
        ("green", 2, 12),
    ]


def test_the_old_value_is_removed_before_the_new_one_is_added() -> None:
    """testRemoveOldBeforeAddNew."""
    builder = StreamsBuilder()
    aggregated = (
        builder.table("topic1", Consumed.with_(STRING, STRING))
        .group_by(lambda k, v: (k[0], k[1]), GROUPED)
        .aggregate(
            lambda: "",
            lambda _k, value, aggregate: aggregate + value,
            lambda _k, value, aggregate: aggregate.replace(value, ""),
            Materialized.as_("someStore").with_value_serde(STRING),
        )
    )
    records = [("11", "A", 10), ("12", "B", 8), ("11", None, 12), ("12", "C", 6)]
    assert run(builder, aggregated.node, records) == [
        ("1", "1", 10),
        ("1", "12", 10),
        ("1", "2", 12),
        ("1", "2", 12),
    ]


def test_an_update_in_the_same_group_sends_no_transient_state() -> None:
    """testShouldNotSendTransientStateIfNotUpgrading."""
    builder = StreamsBuilder()
    counted = (
        builder.table("topic1", Consumed.with_(STRING, STRING))
        .group_by(lambda k, v: (k, v), GROUPED)
        .count()
    )
    assert run(builder, counted.node, [("1", "", 8), ("1", "", 9)]) == [("1", 1, 8), ("1", 1, 9)]


PROCESS_DATA = [("A", "1", 10), ("B", "1", 50), ("C", "1", 30), ("D", "2", 40), ("E", "2", 60)]


def _materialized_results(make_table) -> object:
    builder = StreamsBuilder()
    make_table(builder.table("input", Consumed.with_(STRING, STRING)).group_by(lambda k, v: (v, v)))
    driver = TopologyTestDriver(builder.build(), config())
    inp = driver.create_input_topic("input", STRING, STRING)
    for key, value, ts in PROCESS_DATA:
        inp.pipe_input(key, value, timestamp=ts)
    return driver


def test_count_and_materialize_results() -> None:
    """shouldCountAndMaterializeResults."""
    with _materialized_results(lambda g: g.count(Materialized.as_("count"))) as driver:
        counts = driver.get_key_value_store("count")
        assert (counts.get("1"), counts.get("2")) == (3, 2)
        assert counts.get_with_timestamp("1") == VT(3, 50)
        assert counts.get_with_timestamp("2") == VT(2, 60)


def test_aggregate_and_materialize_results() -> None:
    """shouldAggregateAndMaterializeResults."""
    materialized = Materialized.as_("aggregate").with_value_serde(STRING)

    def aggregate(grouped):
        return grouped.aggregate(lambda: "0", to_string_adder, to_string_remover, materialized)

    with _materialized_results(aggregate) as driver:
        store = driver.get_key_value_store("aggregate")
        assert store.get_with_timestamp("1") == VT("0+1+1+1", 50)
        assert store.get_with_timestamp("2") == VT("0+2+2", 60)


def test_reduce_with_adder_and_subtractor() -> None:
    """shouldReduce / shouldReduceAndMaterializeResults: doubles projected to ints."""
    builder = StreamsBuilder()
    reduced = (
        builder.table(
            "input",
            Consumed.with_(STRING, Serdes.double()),
            Materialized.as_("store").with_key_serde(STRING).with_value_serde(Serdes.double()),
        )
        .group_by(lambda k, v: (k, int(v)), Grouped.with_(STRING, Serdes.int()))
        .reduce(lambda agg, v: agg + v, lambda agg, v: agg - v, Materialized.as_("reduced"))
    )
    assert reduced.store_name == "reduced"
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("input", STRING, Serdes.double())
        store = driver.get_key_value_store("reduced")
        inp.pipe_input("A", 1.1, timestamp=10)
        inp.pipe_input("B", 2.2, timestamp=11)
        assert (store.get_with_timestamp("A"), store.get_with_timestamp("B")) == (
            VT(1, 10),
            VT(2, 11),
        )
        for key, value, ts in [("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)]:
            inp.pipe_input(key, value, timestamp=ts)
        assert (store.get_with_timestamp("A"), store.get_with_timestamp("B")) == (
            VT(5, 50),
            VT(6, 30),
        )


def test_the_regrouping_goes_through_a_repartition_topic_named_after_the_store() -> None:
    builder = StreamsBuilder()
    builder.table("input", Consumed.with_(STRING, STRING)).group_by(lambda k, v: (v, k)).count(
        Materialized.as_("by-value")
    )
    topology = builder.build()
    assert "by-value-repartition" in topology.internal_topics
    assert len(topology.subtopologies()) == 2


def test_a_selector_must_return_a_pair_or_none() -> None:
    builder = StreamsBuilder()
    builder.table("topic1", Consumed.with_(STRING, STRING)).group_by(lambda k, v: v).count()
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic1", STRING, STRING)
        with pytest.raises(Exception, match=r"must return a \(key, value\) pair or None"):
            inp.pipe_input("a", "xyz", timestamp=1)


def test_regrouping_a_stream_aggregation_is_refused_at_build_time() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key().count()
    with pytest.raises(TopologyError, match="carry old values"):
        counts.group_by(lambda k, n: (n, k))


def test_regrouping_a_joined_table_moves_rows_between_groups() -> None:
    """A join's updates carry old values once a re-grouping needs them: a row that changes
    group leaves the old one."""
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, STRING))
    cities = builder.table("cities", Consumed.with_(STRING, STRING))
    counted = (
        users.join(cities, lambda name, city: city)
        .group_by(lambda user, city: (city, user), GROUPED)
        .count()
    )
    captured = capture(builder, counted.node)
    with TopologyTestDriver(builder.build(), config()) as driver:
        u = driver.create_input_topic("users", STRING, STRING)
        c = driver.create_input_topic("cities", STRING, STRING)
        u.pipe_input("ann", "Ann", timestamp=1)
        c.pipe_input("ann", "Oslo", timestamp=2)
        u.pipe_input("bob", "Bob", timestamp=3)
        c.pipe_input("bob", "Oslo", timestamp=4)
        c.pipe_input("ann", "Rome", timestamp=5)
        u.pipe_input("bob", None, timestamp=6)
    assert [(k, change.new, ts) for k, change, ts in captured.take()] == [
        ("Oslo", 1, 2),
        ("Oslo", 2, 4),
        ("Oslo", 1, 5),
        ("Rome", 1, 5),
        ("Oslo", 0, 6),
    ]
