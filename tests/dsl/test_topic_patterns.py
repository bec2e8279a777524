"""``StreamsBuilder.stream(re.Pattern)`` on the test driver and in the topology: the topics a
pattern matches in full are read, as they appear; overlaps and bad patterns are refused."""

from __future__ import annotations

import re

import pytest

from streamtide import Consumed, Produced, Serdes, StreamsBuilder, StreamsConfig
from streamtide.engine.plan import make_plan
from streamtide.errors import TopologyError, UnknownTopicError
from streamtide.log import open_log
from streamtide.testing import TopologyTestDriver

STRING = Serdes.string()


def upper_of(pattern: re.Pattern[str]) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream(pattern, Consumed.with_(STRING, STRING)).map_values(str.upper).to(
        "out", Produced.with_(STRING, STRING)
    )
    return builder


def test_records_of_every_matching_topic_flow_in_the_order_they_are_piped() -> None:
    with TopologyTestDriver(upper_of(re.compile(r"clicks-\d+")).build()) as driver:
        first = driver.create_input_topic("clicks-1", STRING, STRING)
        second = driver.create_input_topic("clicks-22", STRING, STRING)
        out = driver.create_output_topic("out", STRING, STRING)
        first.pipe_input("a", "x", 1)
        second.pipe_input("b", "y", 2)
        first.pipe_input("c", "z", 3)
        assert out.read_key_values() == [("a", "X"), ("b", "Y"), ("c", "Z")]


def test_a_name_matched_only_in_part_is_not_read() -> None:
    with TopologyTestDriver(upper_of(re.compile(r"clicks-\d+")).build()) as driver:
        for name in ("clicks-1x", "xclicks-1", "views-1"):
            with pytest.raises(UnknownTopicError, match=r"pattern of .*'clicks-\\\\d\+'"):
                driver.create_input_topic(name, STRING, STRING)


def test_the_description_shows_the_pattern_as_kafka_prints_it() -> None:
    text = str(upper_of(re.compile("clicks-.*")).build().describe())
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: clicks-.*)" in text


def test_a_topic_two_sources_would_read_is_refused_when_it_appears() -> None:
    builder = upper_of(re.compile("clicks-.*"))
    builder.stream("clicks-1", Consumed.with_(STRING, STRING)).to("copy")
    topology = builder.build()
    with pytest.raises(
        TopologyError, match=re.escape("'clicks-1' matches the pattern 'clicks-.*'")
    ):
        topology.match_topics(["clicks-1", "clicks-2"], "app")


def test_topics_and_a_pattern_together_or_a_bad_pattern_are_refused() -> None:
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="invalid topic pattern"):
        builder.topology.add_source("s", pattern="clicks-(")
    with pytest.raises(TopologyError, match="not both"):
        builder.topology.add_source("t", "a", pattern="b.*")


def test_the_application_s_own_internal_topics_never_match() -> None:
    topology = upper_of(re.compile(".*")).build()
    found = topology.matching_topics(
        ["app-store-changelog", "app-x-repartition", "clicks", "out"], "app"
    )
    assert found == {"KSTREAM-SOURCE-0000000000": ["clicks", "out"]}


def test_the_copartition_check_covers_the_topics_a_pattern_matches(tmp_path) -> None:
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, STRING))
    clicks = builder.stream(re.compile(r"clicks-\d+"), Consumed.with_(STRING, STRING))
    clicks.join(users, lambda c, u: f"{c}/{u}").to("joined", Produced.with_(STRING, STRING))
    log = open_log(f"file://{tmp_path / 'log'}")
    log.create_topic("users", 2)
    log.create_topic("clicks-1", 2)
    config = StreamsConfig(application_id="app", log=log.url)
    make_plan(builder.build(), config, log)  # co-partitioned: fine
    log.create_topic("clicks-2", 3)
    topology = builder.build()
    with pytest.raises(TopologyError, match=r"not co-partitioned.*'clicks-2' has 3"):
        make_plan(topology, config, log)
