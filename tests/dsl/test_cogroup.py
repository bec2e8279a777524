"""``KGroupedStream.cogroup`` / ``CogroupedKStream.aggregate`` (KIP-150): Kafka's
CogroupedKStreamImplTest cases, through the test driver."""

from __future__ import annotations

from typing import Any

from streamtide import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
)
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, config

STRING_AGGREGATOR = lambda key, value, aggregate: aggregate + value  # noqa: E731
STRING_INITIALIZER = lambda: ""  # noqa: E731
STRING_SUM_AGGREGATOR = lambda key, value, aggregate: aggregate + int(value)  # noqa: E731
SUM_AGGREGATOR = lambda key, value, aggregate: aggregate + value  # noqa: E731
SUM_INITIALIZER = lambda: 0  # noqa: E731
TOSTRING_ADDER = lambda key, value, aggregate: f"{aggregate}+{value}"  # noqa: E731
TOSTRING_REMOVER = lambda key, value, aggregate: f"{aggregate}-{value}"  # noqa: E731
STRING_INIT = lambda: "0"  # noqa: E731


def run(
    builder: StreamsBuilder,
    inputs: list[tuple[str, Any, Any, int]],
    value_serde: Any = STRING,
    topic_serdes: dict[str, Any] | None = None,
) -> list[tuple[Any, Any, int]]:
    with TopologyTestDriver(builder.build(), config()) as driver:
        topics: dict[str, Any] = {}
        for topic, key, value, ts in inputs:
            if topic not in topics:
                serde = (topic_serdes or {}).get(topic, STRING)
                topics[topic] = driver.create_input_topic(topic, STRING, serde)
            topics[topic].pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("output", STRING, value_serde)
        return [(r.key, r.value, r.timestamp) for r in out.read_records()]


def streams(builder: StreamsBuilder, *names: str, consumed: Any = None) -> list[Any]:
    return [builder.stream(n, consumed or Consumed.with_(STRING, STRING)) for n in names]


def test_should_cogroup_and_aggregate_single_kstreams() -> None:
    builder = StreamsBuilder()
    (one,) = streams(builder, "one")
    one.group_by_key().cogroup(STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).to_stream().to(
        "output"
    )
    inputs = [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", "B", 0)]
    assert run(builder, [*inputs, ("one", "k1", "A", 0)]) == [
        ("k1", "A", 0),
        ("k2", "B", 0),
        ("k2", "BB", 0),
        ("k1", "AA", 0),
    ]


def test_cogroup_handle_null_values() -> None:
    builder = StreamsBuilder()
    (one,) = streams(builder, "one")
    one.group_by_key().cogroup(STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).to_stream().to(
        "output"
    )
    inputs = [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", None, 0)]
    assert run(builder, [*inputs, ("one", "k2", "B", 0), ("one", "k1", "A", 0)]) == [
        ("k1", "A", 0),
        ("k2", "B", 0),
        ("k2", "BB", 0),
        ("k1", "AA", 0),
    ]


def two_string_cogroup(builder: StreamsBuilder) -> None:
    one, two = streams(builder, "one", "two")
    one.group_by_key().cogroup(STRING_AGGREGATOR).cogroup(
        two.group_by_key(), STRING_AGGREGATOR
    ).aggregate(STRING_INITIALIZER).to_stream().to("output")


def test_should_cogroup_and_aggregate_two_kstreams_with_distinct_keys() -> None:
    builder = StreamsBuilder()
    two_string_cogroup(builder)
    inputs = [("one", "k1", "A", t) for t in (0, 1, 10, 100)]
    inputs += [("two", "k2", "B", t) for t in (100, 200, 1, 500, 500, 100)]
    assert run(builder, inputs) == [
        ("k1", "A", 0),
        ("k1", "AA", 1),
        ("k1", "AAA", 10),
        ("k1", "AAAA", 100),
        ("k2", "B", 100),
        ("k2", "BB", 200),
        ("k2", "BBB", 200),
        ("k2", "BBBB", 500),
        ("k2", "BBBBB", 500),
        ("k2", "BBBBBB", 500),
    ]


SHARED = [("one", "k1", 0), ("one", "k2", 1), ("one", "k1", 10), ("one", "k2", 100)]
SHARED += [("two", "k2", 100), ("two", "k2", 200), ("two", "k1", 1), ("two", "k2", 500)]
SHARED += [("two", "k1", 500), ("two", "k2", 500), ("two", "k3", 500), ("two", "k2", 100)]


def test_should_cogroup_and_aggregate_two_kstreams_with_shared_keys() -> None:
    builder = StreamsBuilder()
    two_string_cogroup(builder)
    inputs = [(t, k, "A" if t == "one" else "B", ts) for t, k, ts in SHARED]
    assert run(builder, inputs)[:10] == [  # Kafka's test reads the first ten
        ("k1", "A", 0),
        ("k2", "A", 1),
        ("k1", "AA", 10),
        ("k2", "AA", 100),
        ("k2", "AAB", 100),
        ("k2", "AABB", 200),
        ("k1", "AAB", 10),
        ("k2", "AABBB", 500),
        ("k1", "AABB", 500),
        ("k2", "AABBBB", 500),
    ]


SUMS = [("k1", 1, 0), ("k2", 1, 1), ("k1", 2, 10), ("k2", 2, 100), ("k2", 4, 100)]
SUMS += [("k2", 6, 200), ("k1", 4, 10), ("k2", 8, 500), ("k1", 6, 500), ("k2", 11, 500)]


def sum_inputs() -> list[tuple[str, Any, Any, int]]:
    values = ["1", "1", "1", "1", "2", "2", "2", "2", "2", "3", "2", "2"]
    return [(t, k, v, ts) for (t, k, ts), v in zip(SHARED, values, strict=True)]


def test_should_allow_different_output_type_in_co_group() -> None:
    builder = StreamsBuilder()
    one, two = streams(builder, "one", "two")
    one.group_by_key().cogroup(STRING_SUM_AGGREGATOR).cogroup(
        two.group_by_key(), STRING_SUM_AGGREGATOR
    ).aggregate(
        SUM_INITIALIZER, materialized=Materialized.as_("store1").with_value_serde(INT)
    ).to_stream().to("output", Produced.with_(STRING, INT))
    assert run(builder, sum_inputs(), INT)[:10] == SUMS


def test_should_co_group_streams_with_different_input_types() -> None:
    builder = StreamsBuilder()
    (one,) = streams(builder, "one")
    (two,) = streams(builder, "two", consumed=Consumed.with_(STRING, INT))
    one.group_by_key().cogroup(STRING_SUM_AGGREGATOR).cogroup(
        two.group_by_key(), SUM_AGGREGATOR
    ).aggregate(
        SUM_INITIALIZER, materialized=Materialized.as_("store1").with_value_serde(INT)
    ).to_stream().to("output", Produced.with_(STRING, INT))
    inputs = [(t, k, v if t == "one" else int(v), ts) for t, k, v, ts in sum_inputs()]
    found = run(builder, inputs, INT, {"two": INT})
    assert found[:11] == [*SUMS, ("k3", 2, 500)]


def test_cogroup_key_mixed_aggregators() -> None:
    builder = StreamsBuilder()
    one, two = streams(builder, "one", "two")
    one.group_by_key().cogroup(TOSTRING_REMOVER).cogroup(
        two.group_by_key(), TOSTRING_ADDER
    ).aggregate(
        STRING_INIT, materialized=Materialized.as_("store1").with_value_serde(STRING)
    ).to_stream().to("output")
    inputs = [("one", "k1", "1", 0), ("one", "k2", "1", 1), ("one", "k1", "1", 10)]
    inputs += [("one", "k2", "1", 100), ("two", "k1", "2", 500), ("two", "k2", "2", 500)]
    inputs += [("two", "k1", "2", 500), ("two", "k2", "2", 100)]
    assert run(builder, inputs) == [
        ("k1", "0-1", 0),
        ("k2", "0-1", 1),
        ("k1", "0-1-1", 10),
        ("k2", "0-1-1", 100),
        ("k1", "0-1-1+2", 500),
        ("k2", "0-1-1+2", 500),
        ("k1", "0-1-1+2+2", 500),
        ("k2", "0-1-1+2+2", 500),
    ]


def test_cogroup_with_three_grouped_streams() -> None:
    builder = StreamsBuilder()
    one, two, three = streams(builder, "one", "two", "three")
    one.group_by_key().cogroup(STRING_AGGREGATOR).cogroup(
        two.group_by_key(), STRING_AGGREGATOR
    ).cogroup(three.group_by_key(), STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).to_stream().to(
        "output"
    )
    inputs = [("one", "k1", "A", 0), ("one", "k2", "A", 1), ("one", "k1", "A", 10)]
    inputs += [("one", "k2", "A", 100), ("two", "k2", "B", 100), ("two", "k2", "B", 200)]
    inputs += [("two", "k1", "B", 1), ("two", "k2", "B", 500), ("three", "k1", "B", 500)]
    inputs += [("three", "k2", "B", 500), ("three", "k3", "B", 500), ("three", "k2", "B", 100)]
    assert run(builder, inputs)[:11] == [
        ("k1", "A", 0),
        ("k2", "A", 1),
        ("k1", "AA", 10),
        ("k2", "AA", 100),
        ("k2", "AAB", 100),
        ("k2", "AABB", 200),
        ("k1", "AAB", 10),
        ("k2", "AABBB", 500),
        ("k1", "AABB", 500),
        ("k2", "AABBBB", 500),
        ("k3", "B", 500),
    ]


def test_should_insert_repartitions_topic_for_upstream_key_modification() -> None:
    """The key-changed stream goes through ``store-repartition``; the nodes are named
    ``test-cogroup-agg-<i>`` and ``test-cogroup-merge``."""
    builder = StreamsBuilder()
    one, two = streams(builder, "one", "two")
    grouped_one = one.map(lambda k, v: (v, k)).group_by_key(Grouped.with_(STRING, STRING))
    grouped_one.cogroup(STRING_AGGREGATOR).cogroup(two.group_by_key(), STRING_AGGREGATOR).aggregate(
        STRING_INITIALIZER, "test", Materialized.as_("store")
    ).to_stream().to("output")
    topology = builder.build()
    assert topology.internal_topics == {"store-repartition"}
    nodes = topology.nodes
    assert set(nodes["test-cogroup-merge"].parents) == {"test-cogroup-agg-0", "test-cogroup-agg-1"}
    assert nodes["test-cogroup-merge"].stores == ["store"]
    assert run(builder, [("one", "k", "a", 1), ("two", "a", "b", 2), ("one", "j", "a", 3)]) == [
        ("a", "k", 1),
        ("a", "kb", 2),
        ("a", "kbj", 3),
    ]


def windowed_cogroup(builder: StreamsBuilder, windows: Any) -> Any:
    one, two = streams(builder, "topic", "topic2")
    grouped = one.group_by_key(Grouped.with_(STRING, STRING))
    grouped2 = two.group_by_key(Grouped.with_(STRING, STRING))
    cogrouped = grouped.cogroup(TOSTRING_ADDER).cogroup(grouped2, TOSTRING_REMOVER)
    return cogrouped.windowed_by(windows)


def windowed_outputs(
    builder: StreamsBuilder, inputs: list[tuple[str, str, str, int]], key_serde: Any
) -> list:
    with TopologyTestDriver(builder.build(), config()) as driver:
        topics = {t: driver.create_input_topic(t, STRING, STRING) for t in ("topic", "topic2")}
        for topic, key, value, ts in inputs:
            topics[topic].pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("output", key_serde, STRING)
        return [(r.key.key, r.value, r.timestamp) for r in out.read_records()]


MIXED = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1)]
MIXED += [("topic", "k1", "A", 2), ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 3)]


def test_time_window_mix_aggregators_test() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsTest."""
    builder = StreamsBuilder()
    windowed_cogroup(builder, TimeWindows.of_size_with_no_grace(500)).aggregate(
        STRING_INIT, Materialized.with_(STRING, STRING)
    ).to_stream().to("output", Produced.with_(Serdes.time_windowed(STRING, 500), STRING))
    inputs = [*MIXED, ("topic2", "k2", "B", 4), ("topic2", "k1", "B", 4)]
    assert windowed_outputs(builder, inputs, Serdes.time_windowed(STRING, 500)) == [
        ("k1", "0+A", 0),
        ("k2", "0+A", 0),
        ("k2", "0+A+A", 1),
        ("k1", "0+A+A", 2),
        ("k1", "0+A+A-B", 3),
        ("k2", "0+A+A-B", 3),
        ("k2", "0+A+A-B-B", 4),
        ("k1", "0+A+A-B-B", 4),
    ]


def test_session_window_mix_aggregators_test() -> None:
    """SessionWindowedCogroupedKStreamImplTest.sessionWindowMixAggregatorsTest (every merge
    here changes the window, so the tombstones are Kafka's too)."""
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(100, 86_400_000)
    windowed_cogroup(builder, windows).aggregate(
        STRING_INIT, lambda key, a, b: f"{a}+{b}", Materialized.with_(STRING, STRING)
    ).to_stream().to("output", Produced.with_(Serdes.session_windowed(STRING), STRING))
    inputs = [*MIXED, ("topic2", "k2", "B", 444), ("topic2", "k1", "B", 444)]
    assert windowed_outputs(builder, inputs, Serdes.session_windowed(STRING)) == [
        ("k1", "0+A", 0),
        ("k2", "0+A", 0),
        ("k2", None, 0),
        ("k2", "0+0+A+A", 1),
        ("k1", None, 0),
        ("k1", "0+0+A+A", 2),
        ("k1", None, 2),
        ("k1", "0+0+0+A+A-B", 3),
        ("k2", None, 1),
        ("k2", "0+0+0+A+A-B", 3),
        ("k2", "0-B", 444),
        ("k1", "0-B", 444),
    ]
