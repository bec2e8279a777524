"""Stateless KStream operators through the test driver."""

from __future__ import annotations

import pytest

from streamtide import Named, Record, Serdes, StreamsBuilder, TopologyError

RECORDS = [("a", "1"), ("b", "22"), ("c", "333")]


def test_filter_and_filter_not(run_stream) -> None:
    assert run_stream(lambda s: s.filter(lambda k, v: len(v) > 1), RECORDS) == RECORDS[1:]
    assert run_stream(lambda s: s.filter_not(lambda k, v: len(v) > 1), RECORDS) == RECORDS[:1]


def test_map_changes_key_and_value(run_stream) -> None:
    out = run_stream(lambda s: s.map(lambda k, v: (v, k)), RECORDS)
    assert out == [("1", "a"), ("22", "b"), ("333", "c")]


def test_map_must_return_a_pair(run_stream) -> None:
    with pytest.raises(Exception, match=r"map\(\) must return a \(key, value\) pair"):
        run_stream(lambda s: s.map(lambda k, v: v), RECORDS)


def test_map_values_and_flat_map_values(run_stream) -> None:
    assert run_stream(lambda s: s.map_values(str.upper), [("a", "x")]) == [("a", "X")]
    out = run_stream(lambda s: s.flat_map_values(list), [("a", "xy"), ("b", "")])
    assert out == [("a", "x"), ("a", "y")]


def test_flat_map_emits_many_pairs(run_stream) -> None:
    out = run_stream(lambda s: s.flat_map(lambda k, v: [(k + c, c) for c in v]), [("a", "xy")])
    assert out == [("ax", "x"), ("ay", "y")]


def test_select_key(run_stream) -> None:
    assert run_stream(lambda s: s.select_key(lambda k, v: v + k), [("a", "x")]) == [("xa", "x")]


def test_peek_and_foreach_see_every_record(run_stream) -> None:
    peeked: list = []
    assert run_stream(lambda s: s.peek(lambda k, v: peeked.append(k)), RECORDS) == RECORDS
    assert peeked == ["a", "b", "c"]
    seen: list = []
    assert run_stream(lambda s: s.foreach(lambda k, v: seen.append(v)), RECORDS) == []
    assert seen == ["1", "22", "333"]


def test_split_routes_to_the_first_matching_branch_and_the_default() -> None:
    from streamtide import Consumed, Produced
    from streamtide.testing import TopologyTestDriver

    builder = StreamsBuilder()
    branches = (
        builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int()))
        .split(Named.as_("size-"))
        .branch(lambda k, v: v < 10, name="small")
        .branch(lambda k, v: v < 100, name="medium")
        .default_branch(name="large")
    )
    assert sorted(branches) == ["size-large", "size-medium", "size-small"]
    for name, stream in branches.items():
        stream.to(name, Produced.with_(Serdes.string(), Serdes.int()))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
        for value in (5, 50, 500, 7):
            inp.pipe_input("k", value, timestamp=0)
        read = {
            n: driver.create_output_topic(n, Serdes.string(), Serdes.int()).read_values()
            for n in branches
        }
    assert read == {"size-small": [5, 7], "size-medium": [50], "size-large": [500]}


def test_split_without_default_drops_unmatched_and_numbers_branches() -> None:
    builder = StreamsBuilder()
    branches = builder.stream("in").split().branch(lambda k, v: True).no_default_branch()
    assert list(branches) == ["1"]
    splitter = builder.stream("in2").split().branch(lambda k, v: True, name="x")
    with pytest.raises(TopologyError, match="already has a branch"):
        splitter.branch(lambda k, v: False, name="x")


def test_merge_combines_two_streams() -> None:
    from streamtide import Consumed, Produced
    from streamtide.testing import TopologyTestDriver

    builder = StreamsBuilder()
    serdes = Consumed.with_(Serdes.string(), Serdes.string())
    left = builder.stream("left", serdes)
    right = builder.stream("right", serdes)
    left.merge(right).to("out", Produced.with_(Serdes.string(), Serdes.string()))
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("left", Serdes.string(), Serdes.string()).pipe_input("l", "1", 1)
        driver.create_input_topic("right", Serdes.string(), Serdes.string()).pipe_input("r", "2", 2)
        out = driver.create_output_topic("out", Serdes.string(), Serdes.string())
        assert out.read_key_values() == [("l", "1"), ("r", "2")]


def test_process_attaches_a_processor_with_a_store() -> None:
    from streamtide import Consumed, Processor, Produced, Stores
    from streamtide.testing import TopologyTestDriver

    class Totals(Processor):
        def init(self, context) -> None:
            super().init(context)
            self.store = context.get_state_store("totals")

        def process(self, record: Record) -> None:
            total = (self.store.get(record.key) or 0) + record.value
            self.store.put(record.key, total)
            self.context.forward(record.with_value(total))

    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.in_memory_key_value_store("totals"), Serdes.string(), Serdes.int()
        )
    )
    builder.stream("in", Consumed.with_(Serdes.string(), Serdes.int())).process(
        Totals, "totals"
    ).to("out", Produced.with_(Serdes.string(), Serdes.int()))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", Serdes.string(), Serdes.int())
        inp.pipe_record_list([("a", 1, 0), ("a", 2, 1), ("b", 5, 2)])
        out = driver.create_output_topic("out", Serdes.string(), Serdes.int())
        assert out.read_key_values() == [("a", 1), ("a", 3), ("b", 5)]
        assert driver.get_key_value_store("totals").get("a") == 3


def test_repartition_sends_records_through_an_internal_topic() -> None:
    from streamtide import Consumed, Produced, Repartitioned, StreamsConfig
    from streamtide.testing import TopologyTestDriver

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string()))
        .select_key(lambda k, v: v)
        .repartition(Repartitioned.with_(Serdes.string(), Serdes.string()).with_name("by-value"))
        .to("out", Produced.with_(Serdes.string(), Serdes.string()))
    )
    topology = builder.build()
    assert len(topology.subtopologies()) == 2
    with TopologyTestDriver(topology, StreamsConfig(application_id="rp")) as driver:
        driver.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_input("k", "v", 3)
        assert "rp-by-value-repartition" in driver.produced_topic_names()
        out = driver.create_output_topic("out", Serdes.string(), Serdes.string())
        assert out.read_key_values() == [("v", "v")]


def test_non_callable_arguments_are_rejected() -> None:
    stream = StreamsBuilder().stream("in")
    for op in (
        "filter",
        "filter_not",
        "map",
        "map_values",
        "flat_map",
        "flat_map_values",
        "select_key",
        "peek",
        "foreach",
    ):
        with pytest.raises(TypeError, match="must be callable"):
            getattr(stream, op)("nope")
