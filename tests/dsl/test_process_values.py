"""``KStream.process_values`` (KIP-820): Kafka's KStreamImplTest case, the key check, and no
repartition after it."""

from __future__ import annotations

import pytest

from streamtide import Consumed, Grouped, Processor, Produced, Record, Stores, StreamsBuilder
from streamtide.dsl.process_values import KeyChangedError
from streamtide.errors import StreamsProcessingError
from streamtide.testing import TopologyTestDriver
from tests.dsl.table_support import INT, STRING, config


class Length(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(len(record.value)))


def test_should_process_values() -> None:
    """shouldProcessValues."""
    builder = StreamsBuilder()
    builder.stream("input").process_values(Length, named="fkp").to(
        "output", Produced.with_(STRING, INT)
    )
    topology = builder.build()
    assert "fkp" in topology.nodes and len(topology.subtopologies()) == 1
    with TopologyTestDriver(topology, config()) as driver:
        inp = driver.create_input_topic("input", STRING, STRING)
        for key, value, ts in [("A", "0", 5), ("B", "00", 100), ("C", "000", 0)]:
            inp.pipe_input(key, value, timestamp=ts)
        for key, value, ts in [("D", "0000", 0), ("A", "00000", 10), ("A", "000000", 8)]:
            inp.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("output", STRING, INT)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records()] == [
            ("A", 1, 5),
            ("B", 2, 100),
            ("C", 3, 0),
            ("D", 4, 0),
            ("A", 5, 10),
            ("A", 6, 8),
        ]


class Rekey(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record.with_key(record.key + "!"))


def test_changing_the_key_fails_the_record_with_a_clear_error() -> None:
    builder = StreamsBuilder()
    builder.stream("input").process_values(Rekey, named="rekey").to("output")
    with TopologyTestDriver(builder.build(), config()) as driver:
        inp = driver.create_input_topic("input", STRING, STRING)
        with pytest.raises(StreamsProcessingError) as failure:
            inp.pipe_input("k", "v", timestamp=1)
        cause = failure.value.__cause__ or failure.value
        assert isinstance(cause, KeyChangedError) or "process_values" in str(failure.value)
        assert "'k!'" in str(failure.value) and "'k'" in str(failure.value)
        assert driver.create_output_topic("output", STRING, STRING).read_records() == []


class CountingStore(Processor):
    def init(self, context) -> None:  # type: ignore[no-untyped-def]
        super().init(context)
        self.store = context.get_state_store("seen")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def test_no_repartition_follows_and_stores_can_be_used() -> None:
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), STRING, INT)
    )
    counted = builder.stream("input").process_values(CountingStore, "seen")
    assert not counted.repartition_required
    counted.group_by_key(Grouped.with_(STRING, INT)).reduce(lambda a, b: a + b).to_stream().to(
        "sums", Produced.with_(STRING, INT)
    )
    topology = builder.build()
    assert topology.internal_topics == set()
    with TopologyTestDriver(topology, config()) as driver:
        inp = driver.create_input_topic("input", STRING, STRING)
        for key in "aab":
            inp.pipe_input(key, "x", timestamp=1)
        out = driver.create_output_topic("sums", STRING, INT)
        assert [(r.key, r.value) for r in out.read_records()][-2:] == [("a", 3), ("b", 1)]
    process = StreamsBuilder().stream("input").process(CountingStore)
    assert process.repartition_required  # for contrast: process() may change keys


def test_the_key_serde_is_kept_and_the_value_serde_is_not() -> None:
    typed = StreamsBuilder().stream("in", Consumed.with_(STRING, STRING))
    processed = typed.process_values(Length)
    assert processed.key_serde is STRING and processed.value_serde is None
