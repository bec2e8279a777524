"""``to(TopicNameExtractor)``: the output topic chosen per record (Kafka's KStreamImplTest
and TopologyTest cases), on the test driver and on the engine's batch loop."""

from __future__ import annotations

from typing import Any

import pytest

from streamtide import (
    Consumed,
    Produced,
    RecordContext,
    StreamsBuilder,
    StreamsProcessingError,
    TopicNameExtractor,
)
from streamtide.errors import TopologyError
from streamtide.log import LogRecord, open_log
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import STRING, config
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import engine_config


def test_should_send_data_to_dynamic_topics() -> None:
    """shouldSendDataToDynamicTopics: the extractor sees the input record's context."""
    builder = StreamsBuilder()
    consumed = Consumed.with_(STRING, STRING)
    builder.stream("topic", consumed).to(
        lambda key, value, context: f"{context.topic}-{key}-{value[0]}",
        Produced.with_(STRING, STRING),
    )
    seen: list[tuple[str, Any, Any, int]] = []
    for topic in ("topic-a-v", "topic-b-v"):
        builder.stream(topic, consumed).foreach(
            lambda k, v, topic=topic: seen.append((topic, k, v))
        )
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("topic", STRING, STRING)
        inp.pipe_input("a", "v1", timestamp=0)
        inp.pipe_input("a", "v2", timestamp=0)
        inp.pipe_input("b", "v1", timestamp=0)
    assert seen == [("topic-a-v", "a", "v1"), ("topic-a-v", "a", "v2"), ("topic-b-v", "b", "v1")]


class ByRegion(TopicNameExtractor):
    def extract(self, key: Any, value: Any, record_context: RecordContext) -> str:
        return f"orders-{value.split(':')[0]}"


def test_topology_with_dynamic_routing_should_describe_extractor_class() -> None:
    """topologyWithDynamicRoutingShouldDescribeExtractorClass."""
    builder = StreamsBuilder()
    builder.stream("orders").to(ByRegion())
    description = str(builder.build().describe())
    assert "Sink: KSTREAM-SINK-0000000001 (extractor: ByRegion)" in description


def test_an_extractor_that_names_no_topic_fails_the_record() -> None:
    builder = StreamsBuilder()
    builder.stream("in").to(lambda k, v, c: None)
    expected = "returned None for the record with key"
    with (
        TopologyTestDriver(builder.build(), config()) as driver,
        pytest.raises(StreamsProcessingError, match=expected),
    ):
        driver.create_input_topic("in", STRING, STRING).pipe_input("k", "v", timestamp=3)


def test_to_refuses_what_is_neither_a_topic_nor_an_extractor() -> None:
    stream = StreamsBuilder().stream("in")
    with pytest.raises(TopologyError, match="TopicNameExtractor"):
        stream.to(42)  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="topic name"):
        stream.to("")


@pytest.fixture
def engine(tmp_path):
    log_url = f"file://{tmp_path / 'log'}"
    log = open_log(log_url)
    log.create_topic("orders", 4)
    for region in ("eu", "us"):
        log.create_topic(f"orders-{region}", 4)
    yield log, engine_config(log_url, str(tmp_path / "state"), app="routing")
    log.close()


def routing_topology() -> Any:
    builder = StreamsBuilder()
    builder.stream("orders", Consumed.with_(STRING, STRING)).to(
        ByRegion(), Produced.with_(STRING, STRING)
    )
    return builder.build()


def append(log: Any, records: list[tuple[str, str, int]]) -> None:
    for partition in range(4):
        rows = [r for i, r in enumerate(records) if i % 4 == partition]
        log.append(
            "orders",
            partition,
            [LogRecord(STRING.serialize(k), STRING.serialize(v), ts) for k, v, ts in rows],
        )


def read_all(log: Any, topic: str) -> list[tuple[str, str, int]]:
    found = []
    for partition in range(4):
        for r in log.read(topic, partition):
            found.append((STRING.deserialize(r.key), STRING.deserialize(r.value), r.timestamp))
    return sorted(found, key=lambda r: r[2])


def test_on_the_engine_each_record_goes_to_its_topic(engine) -> None:
    log, cfg = engine
    records = [(f"k{i}", f"{'eu' if i % 3 else 'us'}:{i}", i) for i in range(40)]
    append(log, records)
    LocalDriver(routing_topology(), cfg).run_until_caught_up()
    assert read_all(log, "orders-eu") == [r for r in records if r[1].startswith("eu")]
    assert read_all(log, "orders-us") == [r for r in records if r[1].startswith("us")]


def test_on_the_engine_a_topic_that_does_not_exist_fails_naming_record_and_topic(engine) -> None:
    log, cfg = engine
    append(log, [("k1", "eu:1", 1), ("k2", "mars:2", 2)])
    driver = LocalDriver(routing_topology(), cfg)
    with pytest.raises(Exception, match=r"topic 'orders-mars'.*key 'k2'.*does not exist"):
        driver.run_until_caught_up()
    assert read_all(log, "orders-eu") == []  # nothing of the failed batch was committed
    log.create_topic("orders-mars", 4)
    LocalDriver(routing_topology(), cfg).run_until_caught_up()  # nothing was lost
    assert read_all(log, "orders-eu") == [("k1", "eu:1", 1)]
    assert read_all(log, "orders-mars") == [("k2", "mars:2", 2)]
