"""Timestamp extractors: the extracted timestamp is the record's, on both processing paths."""

from __future__ import annotations

import pytest

from streamtide import (
    Consumed,
    Processor,
    Record,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    StreamsProcessingError,
    Topology,
)
from streamtide.errors import InvalidTimestampError
from streamtide.log.api import LogRecord
from streamtide.runtime.stream_task import StreamTask
from streamtide.testing import TopologyTestDriver
from streamtide.timestamp_extractor import (
    ConsumerRecord,
    use_partition_time_on_invalid_timestamp,
)

STRING = Serdes.string()


def event_time(record: ConsumerRecord, partition_time: int) -> int:
    """The value is ``"<event time>|<text>"``."""
    return int(record.value.split("|")[0])


def driver_for(extractor=event_time, **config) -> TopologyTestDriver:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, STRING, timestamp_extractor=extractor)).to(
        "out", None
    )
    return TopologyTestDriver(
        builder.build(),
        StreamsConfig(application_id="extract", default_key_serde=STRING, **config),
    )


def test_the_extracted_timestamp_becomes_the_records_timestamp() -> None:
    with driver_for() as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", STRING, STRING)
        inp.pipe_input("k", "5000|a", timestamp=1)
        inp.pipe_input("k", "3000|b", timestamp=2)
        assert [(r.value, r.timestamp) for r in out.read_records()] == [
            ("5000|a", 5000),
            ("3000|b", 3000),
        ]
        assert driver.tasks[0].stream_time == 5000


def test_the_extractor_sees_the_consumed_record_and_the_partition_time() -> None:
    calls: list[tuple[ConsumerRecord, int]] = []

    def spy(record: ConsumerRecord, partition_time: int) -> int:
        calls.append((record, partition_time))
        return event_time(record, partition_time)

    with driver_for(spy) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        inp.pipe_input("k", "50|a", timestamp=7, headers=(("h", b"1"),))
        inp.pipe_input("k", "20|b", timestamp=8)
        inp.pipe_input("k", "90|c", timestamp=9)
        assert [partition_time for _, partition_time in calls] == [-1, 50, 50]
        first = calls[0][0]
        assert first == ConsumerRecord("in", 0, 0, "k", "50|a", 7, (("h", b"1"),))
        assert driver.committed_state("0_0").partition_times == {"in:0": 90}


def test_the_default_extractor_applies_to_sources_without_their_own() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, STRING)).to("out")
    config = StreamsConfig(
        application_id="extract",
        default_key_serde=STRING,
        default_value_serde=STRING,
        default_timestamp_extractor=event_time,
    )
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("in", STRING, STRING).pipe_input("k", "42|a", timestamp=1)
        out = driver.create_output_topic("out", STRING, STRING)
        assert out.read_record().timestamp == 42


def test_a_negative_extracted_timestamp_fails_naming_topic_partition_offset() -> None:
    with driver_for() as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        inp.pipe_input("k", "1|a", timestamp=1)
        with pytest.raises(InvalidTimestampError) as info:
            inp.pipe_input("k", "-3|b", timestamp=2)
        assert (info.value.topic, info.value.partition, info.value.offset) == ("in", 0, 1)
        assert "negative timestamp -3" in str(info.value)


def test_a_negative_extracted_timestamp_is_skipped_and_counted_with_log_and_skip() -> None:
    with driver_for(invalid_timestamp_handler="log_and_skip") as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", STRING, STRING)
        inp.pipe_input("k", "-3|a", timestamp=5)
        inp.pipe_input("k", "4|b", timestamp=6)
        assert [(r.value, r.timestamp) for r in out.read_records()] == [("4|b", 4)]
        assert driver.metrics()["dropped-records.invalid_timestamp"] == 1


def test_use_partition_time_on_invalid_timestamp() -> None:
    extractor = use_partition_time_on_invalid_timestamp
    with driver_for(extractor, invalid_timestamp_handler="log_and_skip") as driver:
        out = driver.create_output_topic("out", STRING, STRING)
        driver.pipe_raw("in", b"k", b"a", -1)  # no partition time yet: skipped
        driver.pipe_raw("in", b"k", b"b", 30)
        driver.pipe_raw("in", b"k", b"c", -1)  # takes the partition time
        assert [(r.value, r.timestamp) for r in out.read_records()] == [("b", 30), ("c", 30)]


def test_an_extractor_that_raises_names_the_record() -> None:
    with driver_for() as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        with pytest.raises(StreamsProcessingError, match="timestamp extractor failed") as info:
            inp.pipe_input("k", "not a number", timestamp=1)
        assert (info.value.topic, info.value.offset) == ("in", 0)


def test_a_record_that_cannot_be_deserialized_goes_to_the_handler_not_the_extractor() -> None:
    with driver_for(deserialization_exception_handler="log_and_continue") as driver:
        out = driver.create_output_topic("out", STRING, STRING)
        driver.pipe_raw("in", b"k", b"\xff", 1)  # not UTF-8
        driver.pipe_raw("in", b"k", b"8|ok", 2)
        assert [(r.value, r.timestamp) for r in out.read_records()] == [("8|ok", 8)]
        assert driver.metrics()["skipped-records"] == 1


class Spy(Processor):
    def __init__(self, seen: list) -> None:
        self.seen = seen

    def process(self, record: Record) -> None:
        self.seen.append((record.value, record.timestamp, self.context.current_stream_time_ms()))


def test_partitions_are_merged_by_the_extracted_timestamp() -> None:
    """SEMANTICS section 1: the head with the lowest timestamp goes first; with an
    extractor that is the extracted timestamp (as in Kafka Streams), not the stored one."""
    seen: list = []
    topology = (
        Topology()
        .add_source(
            "src",
            "a",
            "b",
            key_serde=STRING,
            value_serde=STRING,
            timestamp_extractor=event_time,
        )
        .add_processor("spy", lambda: Spy(seen), "src")
    )
    task = StreamTask(topology, 0, 0, _Collector()).initialize()
    # stored timestamps would order a0, a1, b0, b1; the extracted ones order b0, a0, b1, a1
    task.add_records("a", [LogRecord(b"k", b"5|a0", 1, (), 0), LogRecord(b"k", b"9|a1", 2, (), 1)])
    task.add_records("b", [LogRecord(b"k", b"3|b0", 3, (), 0), LogRecord(b"k", b"7|b1", 4, (), 1)])
    task.process()
    assert seen == [("3|b0", 3, 3), ("5|a0", 5, 5), ("7|b1", 7, 7), ("9|a1", 9, 9)]
    assert task.committed_state().partition_times == {"a:0": 9, "b:0": 7}


def test_the_partition_time_survives_a_restart() -> None:
    seen: list = []
    partition_times: list[int] = []

    def keep_partition_time(record: ConsumerRecord, partition_time: int) -> int:
        partition_times.append(partition_time)
        return event_time(record, partition_time)

    def task_from(committed=None) -> StreamTask:
        topology = (
            Topology()
            .add_source("src", "a", value_serde=STRING, timestamp_extractor=keep_partition_time)
            .add_processor("spy", lambda: Spy(seen), "src")
        )
        return StreamTask(topology, 0, 0, _Collector(), committed=committed).initialize()

    first = task_from()
    first.add_records("a", [LogRecord(b"k", b"40|x", 1, (), 0)])
    first.process()
    second = task_from(first.commit())
    second.add_records("a", [LogRecord(b"k", b"10|y", 2, (), 1)])
    second.process()
    assert partition_times == [-1, 40]


class _Collector:
    def partitions_for(self, topic: str) -> int:
        return 1

    def send(self, *args) -> None:
        raise AssertionError("nothing is sent")


def test_an_extractor_must_return_an_int() -> None:
    with driver_for(lambda record, partition_time: 1.5) as driver:
        inp = driver.create_input_topic("in", STRING, STRING)
        with pytest.raises(StreamsProcessingError, match=r"returned 1.5, not an int"):
            inp.pipe_input("k", "1|a", timestamp=1)


def test_the_record_type_is_exported() -> None:
    import streamtide

    assert streamtide.ConsumerRecord is ConsumerRecord
