"""A task's processing order, stream time, metadata, and failures of a task."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtide import Processor, Record, Serdes, StreamsProcessingError, Topology
from streamtide.errors import InvalidTimestampError
from streamtide.log.api import LogRecord
from streamtide.runtime.committed import TaskCommittedState
from streamtide.runtime.stream_task import StreamTask


class ListCollector:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def partitions_for(self, topic: str) -> int:
        return 1

    def send(self, topic, partition, key, value, timestamp, headers) -> None:
        self.sent.append((topic, partition, key, value, timestamp, headers))


class Spy(Processor):
    """Records (stream time seen, record, metadata) for every record."""

    def __init__(self, seen: list) -> None:
        self.seen = seen

    def process(self, record: Record) -> None:
        meta = self.context.record_metadata()
        self.seen.append((self.context.current_stream_time_ms(), record, meta))


def spy_task(topics: list[str], seen: list, partition: int = 3, **kwargs) -> StreamTask:
    topology = (
        Topology()
        .add_source("src", *topics, key_serde=Serdes.string(), value_serde=Serdes.string())
        .add_processor("spy", lambda: Spy(seen), "src")
    )
    return StreamTask(topology, 0, partition, ListCollector(), **kwargs).initialize()


def rec(ts: int, offset: int, value: str = "v") -> LogRecord:
    return LogRecord(b"k", value.encode(), ts, (), offset)


def test_task_id_is_subtopology_and_partition() -> None:
    task = spy_task(["a"], [])
    assert task.task_id == "0_3"


def test_lowest_head_timestamp_goes_first_across_partitions() -> None:
    seen: list = []
    task = spy_task(["a", "b"], seen)
    task.add_records("a", [rec(5, 0, "a0"), rec(1, 1, "a1")])
    task.add_records("b", [rec(3, 0, "b0"), rec(9, 1, "b1")])
    task.process()
    # heads: a0@5 vs b0@3 -> b0; a0@5 vs b1@9 -> a0; a1@1 vs b1@9 -> a1; then b1
    assert [r.value for _, r, _ in seen] == ["b0", "a0", "a1", "b1"]
    # within a partition offset order is kept even when timestamps go back (a1@1 after a0@5)
    assert [st for st, _, _ in seen] == [3, 5, 5, 9]


def test_ties_go_to_the_lower_source_index_not_the_topic_name() -> None:
    seen: list = []
    task = spy_task(["zeta", "alpha"], seen)
    task.add_records("alpha", [rec(7, 0, "alpha")])
    task.add_records("zeta", [rec(7, 0, "zeta")])
    task.process()
    assert [r.value for _, r, _ in seen] == ["zeta", "alpha"]


def test_stream_time_is_unknown_before_the_first_record_and_advances_before_processing() -> None:
    seen: list = []
    task = spy_task(["a"], seen)
    assert task.stream_time == -1
    task.add_records("a", [rec(42, 0)])
    task.process()
    assert seen[0][0] == 42


def test_record_metadata_names_topic_partition_offset() -> None:
    seen: list = []
    task = spy_task(["a"], seen, partition=2)
    task.add_records("a", [rec(1, 17)])
    task.process()
    meta = seen[0][2]
    assert (meta.topic, meta.partition, meta.offset) == ("a", 2, 17)
    assert task.committed_state().offsets == {"a:2": 18}


def test_stream_time_and_offsets_survive_a_restart() -> None:
    seen: list = []
    committed = TaskCommittedState(offsets={"a:3": 10}, stream_time=500)
    task = spy_task(["a"], seen, committed=committed)
    assert task.committed_offset("a") == 10
    task.add_records("a", [rec(100, 10)])
    task.process()
    assert seen[0][0] == 500  # an older record does not move stream time back
    assert task.commit().stream_time == 500


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=1_000), max_size=12), min_size=1, max_size=4
    ),
    st.randoms(use_true_random=False),
)
def test_stream_time_never_decreases_and_is_the_max_processed_timestamp(partitions, rnd) -> None:
    seen: list = []
    topics = [f"t{i}" for i in range(len(partitions))]
    task = spy_task(topics, seen)
    # feed the partitions in random interleaved chunks, processing between chunks
    cursors = [0] * len(partitions)
    processed: list[int] = []
    while any(c < len(p) for c, p in zip(cursors, partitions)):
        i = rnd.choice([i for i, p in enumerate(partitions) if cursors[i] < len(p)])
        n = rnd.randint(1, len(partitions[i]) - cursors[i])
        chunk = partitions[i][cursors[i] : cursors[i] + n]
        task.add_records(topics[i], [rec(ts, cursors[i] + j) for j, ts in enumerate(chunk)])
        cursors[i] += n
        if rnd.random() < 0.5:
            task.process()
    task.process()
    processed = [r.timestamp for _, r, _ in seen]
    assert sorted(processed) == sorted(ts for p in partitions for ts in p)
    running = -1
    for (stream_time, record, _), previous in zip(seen, [(-1, None, None), *seen]):
        running = max(running, record.timestamp)
        assert stream_time == running
        assert stream_time >= previous[0]
    assert task.stream_time == max(processed, default=-1)


def test_a_raising_processor_stops_the_task_naming_where() -> None:
    class Boom(Processor):
        def process(self, record: Record) -> None:
            raise ValueError("bad value")

    topology = (
        Topology()
        .add_source("src", "clicks")
        .add_processor("ok", lambda: Spy([]), "src")
        .add_processor("boom", Boom, "src")
    )
    task = StreamTask(topology, 0, 4, ListCollector()).initialize()
    task.add_records("clicks", [rec(1, 0), rec(2, 1)])
    with pytest.raises(StreamsProcessingError) as info:
        task.process()
    error = info.value
    assert (error.task_id, error.node, error.topic, error.partition, error.offset) == (
        "0_4",
        "boom",
        "clicks",
        4,
        0,
    )
    assert "bad value" in str(error) and "offset=0" in str(error)


def test_deserialization_failure_fails_by_default_naming_the_record() -> None:
    task = spy_task(["a"], [], partition=1)
    task.add_records("a", [LogRecord(b"k", b"\xff\xfe", 1, (), 9)])
    with pytest.raises(StreamsProcessingError, match="cannot deserialize") as info:
        task.process()
    assert (info.value.topic, info.value.partition, info.value.offset) == ("a", 1, 9)


def test_log_and_continue_sends_bad_records_to_the_dead_letter_topic() -> None:
    seen: list = []
    topology = (
        Topology()
        .add_source("src", "a", key_serde=Serdes.string(), value_serde=Serdes.string())
        .add_processor("spy", lambda: Spy(seen), "src")
    )
    collector = ListCollector()
    task = StreamTask(
        topology,
        0,
        0,
        collector,
        application_id="app",
        deserialization_handler="log_and_continue",
    ).initialize()
    task.add_records("a", [LogRecord(b"k", b"\xff", 1, (), 0), rec(2, 1, "fine")])
    task.process()
    assert [r.value for _, r, _ in seen] == ["fine"]
    (dlq,) = collector.sent
    assert dlq[0] == "app-dlq" and dlq[3] == b"\xff"
    assert dict(dlq[5])["streamtide.offset"] == b"0"
    assert task.metrics.get("skipped-records") == 1
    assert task.committed_state().offsets == {"a:0": 2}


def test_negative_timestamps_fail_naming_the_record() -> None:
    task = spy_task(["a"], [])
    task.add_records("a", [rec(5, 0), rec(-5, 1)])
    with pytest.raises(InvalidTimestampError) as info:
        task.process()
    assert (info.value.topic, info.value.partition, info.value.offset) == ("a", 3, 1)
    assert "negative timestamp -5" in str(info.value)


def test_negative_timestamps_are_dropped_and_counted_with_log_and_skip() -> None:
    seen: list = []
    task = spy_task(["a"], seen, invalid_timestamp_handler="log_and_skip")
    task.add_records("a", [rec(-5, 0), rec(5, 1)])
    task.process()
    assert len(seen) == 1 and task.metrics.get("dropped-records") == 1


def test_sink_serialization_failure_names_the_sink_and_topic() -> None:
    topology = (
        Topology()
        .add_source("src", "a", key_serde=Serdes.string(), value_serde=Serdes.string())
        .add_sink("out-sink", "out", "src", key_serde=Serdes.string(), value_serde=Serdes.int())
    )
    task = StreamTask(topology, 0, 0, ListCollector()).initialize()
    task.add_records("a", [rec(1, 0, "not-an-int")])
    with pytest.raises(StreamsProcessingError) as info:
        task.process()
    assert info.value.node == "out-sink"
    assert "'out'" in str(info.value) and "int serde cannot serialize" in str(info.value)
