"""The Processor API adapter and failures inside a batch: what record-at-a-time processing
gives, with a whole batch processed at once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from streamtide import Processor, PunctuationType, Record, Serdes, StreamsProcessingError, Topology
from streamtide.dsl.processors import FilterOperator, MapValuesOperator
from streamtide.log.api import LogRecord
from streamtide.runtime.stream_task import StreamTask
from streamtide.state.stores import Stores

STRING = Serdes.string()


class ListCollector:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def partitions_for(self, topic: str) -> int:
        return 1

    def send(self, topic, partition, key, value, timestamp, headers) -> None:
        self.sent.append((topic, key, value, timestamp))

    def values(self, topic: str) -> list[str]:
        return [value.decode() for t, _, value, _ in self.sent if t == topic]


def records(*pairs: tuple[str, int]) -> list[LogRecord]:
    return [LogRecord(b"k", v.encode(), ts, (), offset) for offset, (v, ts) in enumerate(pairs)]


def run(topology: Topology, inputs: list[LogRecord], **options: Any) -> tuple[StreamTask, Any]:
    collector = ListCollector()
    task = StreamTask(topology, 0, 0, collector, **options).initialize()
    task.add_records("in", inputs)
    task.process()
    return task, collector


class Spy(Processor):
    """Notes what it sees per record and at each punctuation; forwards every record."""

    def __init__(self, seen: list) -> None:
        self.seen = seen

    def init(self, context: Any) -> None:
        super().init(context)
        context.schedule(10, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record) -> None:
        meta = self.context.record_metadata()
        self.seen.append((record.value, self.context.current_stream_time_ms(), meta.offset))
        self.context.forward(record)

    def punctuate(self, timestamp: int) -> None:
        self.seen.append(("punctuation", timestamp, None))


def spied(seen: list) -> Topology:
    return (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("keep", lambda: FilterOperator(lambda k, v: v != "drop", True), "src")
        .add_processor("spy", lambda: Spy(seen), "keep")
        .add_sink("out", "out", "spy", key_serde=STRING, value_serde=STRING)
    )


def test_a_processor_sees_each_record_with_its_stream_time_offset_and_punctuations() -> None:
    seen: list = []
    inputs = records(("a", 0), ("b", 5), ("drop", 12), ("c", 8), ("d", 15), ("e", 25))
    task, collector = run(spied(seen), inputs)
    # stream time moves on the dropped record too; punctuations fall between the records
    # they would fall between one record at a time (epoch-aligned every 10 ms)
    assert seen == [
        ("a", 0, 0),
        ("punctuation", 0, None),
        ("b", 5, 1),
        ("punctuation", 12, None),
        ("c", 12, 3),
        ("d", 15, 4),
        ("e", 25, 5),
        ("punctuation", 25, None),
    ]
    assert collector.values("out") == ["a", "b", "c", "d", "e"]
    assert task.stream_time == 25


class Router(Processor):
    """Odd values to every child, even ones to child ``even`` only, twice."""

    def process(self, record: Record) -> None:
        if int(record.value) % 2:
            self.context.forward(record)
        else:
            self.context.forward(record, "even")
            self.context.forward(record.with_value(record.value + "!"), "even")


def test_forwards_to_a_named_child_or_to_all() -> None:
    topology = (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("route", Router, "src")
        .add_sink("even", "evens", "route", key_serde=STRING, value_serde=STRING)
        .add_sink("all", "all", "route", key_serde=STRING, value_serde=STRING)
    )
    _, collector = run(topology, records(("1", 1), ("2", 2), ("3", 3), ("4", 4)))
    assert collector.values("evens") == ["1", "2", "2!", "3", "4", "4!"]
    assert collector.values("all") == ["1", "3"]


def raises_on(bad: str) -> Any:
    def mapper(value: str) -> str:
        if value == bad:
            raise ValueError(f"cannot map {value}")
        return value

    return mapper


def fan_out(first_bad: str, second_bad: str) -> Topology:
    """``src`` feeds three children in order: a sink, a mapper failing on ``first_bad``
    then a sink, and a mapper failing on ``second_bad`` then a sink."""
    sink = {"key_serde": STRING, "value_serde": STRING}
    return (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_sink("first", "first", "src", **sink)
        .add_processor("m1", lambda: MapValuesOperator(raises_on(first_bad)), "src")
        .add_sink("second", "second", "m1", **sink)
        .add_processor("m2", lambda: MapValuesOperator(raises_on(second_bad)), "src")
        .add_sink("third", "third", "m2", **sink)
    )


def test_a_failed_row_reaches_earlier_children_and_no_later_ones() -> None:
    inputs = records(("a", 1), ("b", 2), ("c", 3), ("d", 4))
    task, collector = run(
        fan_out("b", "c"), inputs, processing_handler="log_and_continue", dead_letter_topic="dlq"
    )
    assert collector.values("first") == ["a", "b", "c", "d"]
    assert collector.values("second") == ["a", "c", "d"]
    assert collector.values("third") == ["a", "d"]  # b failed above it, c in it
    assert collector.values("dlq") == ["b", "c"]  # in input order
    assert task.metrics.get("processed-records") == 2
    assert task.metrics.get("dropped-records.processing_error") == 2


def test_fail_stops_at_the_record_that_fails_first_one_record_at_a_time() -> None:
    """``d`` fails in the first mapper, which runs over the whole batch before the second
    one does; but one record at a time ``b`` fails first (in the second mapper)."""
    with pytest.raises(StreamsProcessingError) as failed:
        run(fan_out("d", "b"), records(("a", 1), ("b", 2), ("c", 3), ("d", 4)))
    assert failed.value.node == "m2" and failed.value.offset == 1
    assert "cannot map b" in str(failed.value)


class CountAfterForward(Processor):
    """Forwards each record, then counts it in a store (work done after ``forward``)."""

    def __init__(self, catch: bool = False) -> None:
        self.catch = catch

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        try:
            self.context.forward(record)
        except ValueError:
            if not self.catch:
                raise
        self.store.put(record.value, 1)


def counting(catch: bool = False) -> Topology:
    store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("counts"), STRING, Serdes.long()
    )
    return (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("count", lambda: CountAfterForward(catch), "src")
        .add_state_store(store, "count")
        .add_processor("map", lambda: MapValuesOperator(raises_on("b")), "count")
        .add_sink("out", "out", "map", key_serde=STRING, value_serde=STRING)
    )


def test_a_failure_below_a_forward_aborts_the_processor_there_when_records_can_be_skipped() -> None:
    task, collector = run(
        counting(), records(("a", 1), ("b", 2), ("c", 3)), processing_handler="log_and_continue"
    )
    assert collector.values("out") == ["a", "c"]
    assert sorted(key for key, _ in task.store("counts").all()) == ["a", "c"]  # no count for b
    assert task.metrics.get("processed-records") == 2


def test_a_failure_below_that_the_processor_catches_fails_nothing() -> None:
    task, collector = run(
        counting(catch=True),
        records(("a", 1), ("b", 2), ("c", 3)),
        processing_handler="log_and_continue",
    )
    assert collector.values("out") == ["a", "c"]
    assert sorted(key for key, _ in task.store("counts").all()) == ["a", "b", "c"]
    assert task.metrics.get("processed-records") == 3
    assert task.metrics.get("dropped-records") == 0


def test_a_processor_without_process_is_refused_naming_its_node() -> None:
    topology = Topology().add_source("src", "in").add_processor("odd", object, "src")
    with pytest.raises(StreamsProcessingError, match="no process"):
        StreamTask(topology, 0, 0, ListCollector())


class Slow(Processor):
    """Takes 2 ms per record; notes its records and the wall-clock punctuations between them."""

    def __init__(self, seen: list) -> None:
        self.seen = seen

    def init(self, context: Any) -> None:
        super().init(context)
        context.schedule(20, PunctuationType.WALL_CLOCK_TIME, lambda now: self.seen.append("tick"))

    def process(self, record: Record) -> None:
        time.sleep(0.002)
        self.seen.append(record.value)


def test_wall_clock_punctuation_falls_between_pieces_of_a_long_batch() -> None:
    """A batch that takes far longer than the schedule's interval is cut into pieces, and the
    wall clock is checked between them (SEMANTICS section 2), not only after the batch."""
    seen: list = []
    topology = (
        Topology()
        .add_source("src", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("slow", lambda: Slow(seen), "src")
    )
    run(topology, records(*((str(n), n) for n in range(200))))
    ticks = [i for i, item in enumerate(seen) if item == "tick"]
    assert len(ticks) >= 2 and ticks[0] < 100  # well before the batch's end
    assert [item for item in seen if item != "tick"] == [str(n) for n in range(200)]
