"""Which nodes hand rows on one at a time: the static cut analysis on the shapes it names."""

from __future__ import annotations

from streamtide import (
    Consumed,
    JoinWindows,
    Materialized,
    Processor,
    Produced,
    Record,
    Serdes,
    StreamsBuilder,
    Topology,
)
from streamtide.runtime.interleaving import depth_first_nodes
from streamtide.state.stores import Stores

STRING = Serdes.string()


def marked(topology: Topology) -> set[str]:
    found: set[str] = set()
    for sub in topology.subtopologies():
        found |= depth_first_nodes(sub, lambda topic: topic)
    return found


class Counter(Processor):
    def process(self, record: Record) -> None:
        store = self.context.get_state_store("counts")
        store.put(record.key, (store.get(record.key) or 0) + 1)
        self.context.forward(record)


def counts_store() -> object:
    return Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("counts"), STRING, Serdes.long()
    )


def test_a_tree_with_distinct_sinks_hands_whole_batches() -> None:
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, STRING))
    events.filter(lambda k, v: True, named="f").to("a")
    events.map_values(str.upper, named="m").to("b")
    events.group_by_key().count(Materialized.as_("counts")).to_stream().to("c")
    assert marked(builder.build()) == set()


def test_two_branches_writing_one_topic_are_cut_where_they_split() -> None:
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, STRING))
    branches = events.split(named="s-").branch(lambda k, v: v == "x", "x").default_branch("y")
    branches["s-x"].map_values(str.upper).to("out")
    branches["s-y"].to("out")
    topology = builder.build()
    (split,) = [n for n in topology.nodes if n.startswith("KSTREAM-BRANCH-")]
    assert marked(topology) == {split}


def test_paths_that_converge_are_cut_where_they_part() -> None:
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, STRING))
    upper = events.map_values(str.upper, named="upper")
    lower = events.map_values(str.lower, named="lower")
    upper.merge(lower, named="merged").to("out")
    topology = builder.build()
    (source,) = [n for n in topology.nodes if n.startswith("KSTREAM-SOURCE-")]
    assert marked(topology) == {source}


def test_a_self_join_is_cut_at_its_source() -> None:
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, STRING))
    events.join(events, lambda a, b: a + b, JoinWindows.of_time_difference_and_grace(1000, 0)).to(
        "out", Produced.with_(STRING, STRING)
    )
    topology = builder.build()
    (source,) = [n for n in topology.nodes if n.startswith("KSTREAM-SOURCE-")]
    assert source in marked(topology)


def test_a_stream_joined_with_a_table_is_not_cut_its_sources_never_share_a_batch() -> None:
    builder = StreamsBuilder()
    table = builder.table("users", Consumed.with_(STRING, STRING), Materialized.as_("users"))
    builder.stream("in", Consumed.with_(STRING, STRING)).join(table, lambda a, b: a + b).to("out")
    assert marked(builder.build()) == set()


def test_a_store_read_below_the_node_that_writes_it_cuts_above_the_writer() -> None:
    topology = (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("writer", Counter, "src")
        .add_processor("reader", Counter, "writer")
        .add_state_store(counts_store(), "writer", "reader")  # type: ignore[arg-type]
        .add_sink("out", "out", "reader")
    )
    assert marked(topology) == {"src", "writer"}


def test_two_sources_of_one_topology_cut_by_topic_not_by_node() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed.with_(STRING, STRING))
    right = builder.stream("right", Consumed.with_(STRING, STRING))
    left.merge(right).to("out")
    assert marked(builder.build()) == set()


def test_sinks_compare_physical_topics() -> None:
    topology = (
        Topology().add_source("src", "in").add_sink("a", "out", "src").add_sink("b", "other", "src")
    )
    assert marked(topology) == set()
    same = depth_first_nodes(topology.subtopologies()[0], lambda topic: "one-topic")
    assert same == {"src"}
