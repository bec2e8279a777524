"""Grouping, aggregation into KTables, repartitioning after key changes, KTable operators."""

from __future__ import annotations

from streamtide import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
)
from streamtide.testing import TopologyTestDriver


def words_topology(grouping) -> StreamsBuilder:
    builder = StreamsBuilder()
    lines = builder.stream("lines", Consumed.with_(Serdes.string(), Serdes.string()))
    table = grouping(lines.flat_map_values(str.split))
    table.to_stream().to("out", Produced.with_(Serdes.string(), Serdes.int()))
    return builder


def run(builder: StreamsBuilder, lines: list[tuple], app: str = "agg") -> tuple:
    config = StreamsConfig(
        application_id=app, default_key_serde=Serdes.string(), default_value_serde=Serdes.string()
    )
    driver = TopologyTestDriver(builder.build(), config)
    inp = driver.create_input_topic("lines", Serdes.string(), Serdes.string())
    for i, (key, value) in enumerate(lines):
        inp.pipe_input(key, value, timestamp=i)
    out = driver.create_output_topic("out", Serdes.string(), Serdes.int()).read_key_values()
    return driver, out


def test_count_by_key_without_repartition() -> None:
    builder = words_topology(lambda s: s.group_by_key().count(Materialized.as_("counts")))
    driver, out = run(builder, [("a", "x y"), ("a", "z"), ("b", "w")])
    assert out == [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
    assert len(builder.topology.subtopologies()) == 1
    assert driver.get_key_value_store("counts").get("a") == 3
    driver.close()


def test_group_by_repartitions_through_the_named_topic() -> None:
    builder = words_topology(
        lambda s: s.group_by(lambda k, v: v, Grouped.as_("words")).count(Materialized.as_("wc"))
    )
    driver, out = run(builder, [(None, "a b a")], app="wordcount")
    assert out == [("a", 1), ("b", 1), ("a", 2)]
    assert "wordcount-words-repartition" in driver.produced_topic_names()
    driver.close()


def test_key_change_then_group_by_key_repartitions_under_the_store_name() -> None:
    builder = words_topology(
        lambda s: s.select_key(lambda k, v: v).group_by_key().count(Materialized.as_("wc"))
    )
    driver, out = run(builder, [(None, "a b a")], app="app")
    assert out == [("a", 1), ("b", 1), ("a", 2)]
    assert "app-wc-repartition" in driver.produced_topic_names()
    driver.close()


def test_null_keys_are_dropped_before_the_repartition_and_counted() -> None:
    builder = words_topology(
        lambda s: s.select_key(lambda k, v: None if v == "skip" else v).group_by_key().count()
    )
    driver, out = run(builder, [(None, "a skip a")])
    assert out == [("a", 1), ("a", 2)]
    assert driver.metrics()["dropped-records"] == 1
    driver.close()


def test_reduce_and_aggregate() -> None:
    builder = StreamsBuilder()
    nums = builder.stream("nums", Consumed.with_(Serdes.string(), Serdes.int())).group_by_key()
    nums.reduce(max, Materialized.as_("max")).to_stream().to(
        "max", Produced.with_(Serdes.string(), Serdes.int())
    )
    nums.aggregate(
        lambda: [],
        lambda k, v, agg: [*agg, v],
        Materialized.as_("all").with_value_serde(Serdes.json()),
    ).to_stream().to("all", Produced.with_(Serdes.string(), Serdes.json()))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("nums", Serdes.string(), Serdes.int())
        inp.pipe_record_list([("k", 3, 0), ("k", 1, 1), ("k", 7, 2)])
        assert driver.create_output_topic("max", Serdes.string(), Serdes.int()).read_values() == [
            3,
            3,
            7,
        ]
        all_ = driver.create_output_topic("all", Serdes.string(), Serdes.json()).read_values()
        assert all_ == [[3], [3, 1], [3, 1, 7]]


def test_null_values_are_dropped_by_aggregations() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string())).group_by_key().count(
        Materialized.as_("c")
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        inp.pipe_input("k", None, 0)
        inp.pipe_input("k", "v", 1)
        assert driver.get_key_value_store("c").get("k") == 1
        assert driver.metrics()["dropped-records"] == 1


def test_ktable_filter_of_an_aggregation_sends_a_tombstone_only_for_a_key_that_passed() -> None:
    """The filter asks the aggregation for old values (Kafka's KTableFilter, KAFKA-10077): a
    count that fails and failed before forwards nothing; map_values keeps the tombstone."""
    builder = StreamsBuilder()
    table = (
        builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
        .group_by_key()
        .count()
    )
    table.filter(lambda k, n: n % 2 == 0).map_values(lambda n: n * 10).to_stream().to(
        "out", Produced.with_(Serdes.string(), Serdes.int())
    )
    table.filter_not(lambda k, n: n % 2 == 0).to_stream().to(
        "odd", Produced.with_(Serdes.string(), Serdes.int())
    )
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        for i in range(3):
            inp.pipe_input("k", "v", i)
        out = driver.create_output_topic("out", Serdes.string(), Serdes.int())
        assert out.read_key_values() == [("k", 20), ("k", None)]
        odd = driver.create_output_topic("odd", Serdes.string(), Serdes.int())
        assert odd.read_values() == [1, None, 3]


def test_cache_collapses_updates_per_commit_when_enabled() -> None:
    builder = words_topology(lambda s: s.group_by_key().count(Materialized.as_("counts")))
    with TopologyTestDriver(builder.build(), cache_enabled=True) as driver:
        inp = driver.create_input_topic("lines", Serdes.string(), Serdes.string())
        inp.pipe_record_list([("a", "x"), ("b", "y"), ("a", "z")])
        out = driver.create_output_topic("out", Serdes.string(), Serdes.int())
        assert out.read_key_values() == [("b", 1), ("a", 2)]
        inp.pipe_input("b", "again", 5)
        assert out.read_key_values() == [("b", 2)]


def test_caching_can_be_disabled_per_operator() -> None:
    builder = words_topology(
        lambda s: s.group_by_key().count(Materialized.as_("c").with_caching_disabled())
    )
    with TopologyTestDriver(builder.build(), cache_enabled=True) as driver:
        inp = driver.create_input_topic("lines", Serdes.string(), Serdes.string())
        inp.pipe_record_list([("a", "x"), ("a", "z")])
        out = driver.create_output_topic("out", Serdes.string(), Serdes.int())
        assert out.read_key_values() == [("a", 1), ("a", 2)]
