"""Topology building, sub-topology grouping, describe() and bad input."""

from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
    Materialized,
    Processor,
    Produced,
    Serdes,
    Stores,
    StreamsBuilder,
    Topology,
    TopologyError,
)


class Noop(Processor):
    def process(self, record) -> None:
        pass


GOLDEN = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [clicks])
      --> KSTREAM-FILTER-0000000001
    Processor: KSTREAM-FILTER-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> by-page-repartition-filter
      <-- KSTREAM-FILTER-0000000001
    Processor: by-page-repartition-filter (stores: [])
      --> by-page-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: by-page-repartition-sink (topic: by-page-repartition)
      <-- by-page-repartition-filter
   Sub-topology: 1
    Source: by-page-repartition-source (topics: [by-page-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [page-counts])
      --> KTABLE-TOSTREAM-0000000004
      <-- by-page-repartition-source
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000005 (topic: page-counts)
      <-- KTABLE-TOSTREAM-0000000004
"""


def test_describe_golden() -> None:
    from streamtide import Grouped

    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(Serdes.string(), Serdes.json()))
        .filter(lambda k, v: v.get("page") is not None)
        .select_key(lambda k, v: v["page"])
        .group_by_key(Grouped.as_("by-page"))
        .count(Materialized.as_("page-counts"))
        .to_stream()
        .to("page-counts", Produced.with_(Serdes.string(), Serdes.int()))
    )
    assert str(builder.build().describe()) == GOLDEN


def test_processors_sharing_a_store_form_one_subtopology() -> None:
    topology = (
        Topology()
        .add_source("s1", "a")
        .add_source("s2", "b")
        .add_processor("p1", Noop, "s1")
        .add_processor("p2", Noop, "s2")
        .add_state_store(
            Stores.key_value_store_builder(Stores.in_memory_key_value_store("shared")), "p1", "p2"
        )
        .add_source("s3", "c")
        .add_processor("p3", Noop, "s3")
    )
    groups = topology.subtopologies()
    assert [sorted(n.name for n in g.nodes) for g in groups] == [
        ["p1", "p2", "s1", "s2"],
        ["p3", "s3"],
    ]
    assert groups[0].source_topics == ["a", "b"] and groups[0].stores == ["shared"]


def test_internal_topics_get_the_application_id_prefix() -> None:
    topology = Topology().add_source("s", "x-repartition").add_internal_topic("x-repartition")
    assert topology.resolve_topic("x-repartition", "app") == "app-x-repartition"
    assert topology.resolve_topic("plain", "app") == "plain"
    assert topology.changelog_topic("counts", "app") == "app-counts-changelog"


def test_duplicate_node_names_are_rejected() -> None:
    topology = Topology().add_source("dup", "a")
    with pytest.raises(TopologyError, match="'dup' already exists"):
        topology.add_processor("dup", Noop, "dup")


def test_a_topology_without_sources_is_rejected() -> None:
    with pytest.raises(TopologyError, match="no source node"):
        Topology().subtopologies()
    with pytest.raises(TopologyError, match="no source node"):
        StreamsBuilder().build()


def test_unknown_store_names_are_rejected() -> None:
    topology = Topology().add_source("s", "a").add_processor("p", Noop, "s")
    with pytest.raises(TopologyError, match="unknown state store 'missing'"):
        topology.connect_processor_and_state_stores("p", "missing")
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="unknown state store 'nope'"):
        builder.stream("a").process(Noop, "nope")


def test_unconnected_store_is_rejected_at_build() -> None:
    builder = StreamsBuilder()
    builder.stream("a").foreach(lambda k, v: None)
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("lonely"))
    )
    with pytest.raises(TopologyError, match="'lonely' is not connected"):
        builder.build()


def test_sink_needs_a_topic_name() -> None:
    topology = Topology().add_source("s", "a")
    with pytest.raises(TopologyError, match="needs a topic name"):
        topology.add_sink("out", "", "s")
    with pytest.raises(TopologyError, match="needs a topic name"):
        StreamsBuilder().stream("a").to(None)  # type: ignore[arg-type]


def test_unknown_parent_and_sink_parent_are_rejected() -> None:
    topology = Topology().add_source("s", "a").add_sink("k", "out", "s")
    with pytest.raises(TopologyError, match="parent 'ghost' does not exist"):
        topology.add_processor("p", Noop, "ghost")
    with pytest.raises(TopologyError, match="is a sink"):
        topology.add_processor("p", Noop, "k")


def test_a_topic_can_be_read_by_one_source_only() -> None:
    builder = StreamsBuilder()
    builder.stream("a")
    with pytest.raises(TopologyError, match="already read by source"):
        builder.stream(["b", "a"])


def test_non_callable_supplier_is_rejected() -> None:
    with pytest.raises(TopologyError, match="supplier must be callable"):
        Topology().add_source("s", "a").add_processor("p", Noop(), "s")  # type: ignore[arg-type]
