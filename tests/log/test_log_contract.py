"""The ``Log`` contract, run against every kind of log: the file log and the Kafka log (on the
test broker; those cases skip where it cannot start). Kind-specific behaviour is tested in
``test_file_log.py`` and ``test_kafka_log.py``."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pyarrow as pa
import pytest

from streamtide.log import (
    READ_SCHEMA,
    Log,
    LogClosedError,
    LogError,
    LogRecord,
    OffsetOutOfRangeError,
    TopicDescription,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
    records_of,
)


def recs(n: int, prefix: str = "v") -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), 1000 + i) for i in range(n)]


def vals(items) -> list[bytes]:
    return [r.value for r in items]


@pytest.fixture
def log(any_log: Log) -> Log:
    return any_log


def test_create_describe_list_has_delete(log: Log) -> None:
    assert log.list_topics() == []
    assert log.create_topic("b-topic", 3) == TopicDescription("b-topic", 3)
    log.create_topic("a.topic_1", 1)
    assert log.list_topics() == ["a.topic_1", "b-topic"]
    assert log.has_topic("b-topic") and not log.has_topic("nope")
    assert log.describe_topic("b-topic") == TopicDescription("b-topic", 3)
    assert log.partitions("b-topic") == 3
    assert [log.end_offset("b-topic", p) for p in range(3)] == [0, 0, 0]
    log.delete_topic("b-topic")
    assert log.list_topics() == ["a.topic_1"] and not log.has_topic("b-topic")
    with pytest.raises(UnknownTopicError):
        log.end_offset("b-topic", 0)


def test_create_existing_topic(log: Log) -> None:
    log.create_topic("t", 2)
    with pytest.raises(TopicExistsError):
        log.create_topic("t", 2)
    assert log.create_topic("t", 2, exist_ok=True) == TopicDescription("t", 2)
    with pytest.raises(LogError, match="exists with 2 partitions, not 3"):
        log.create_topic("t", 3, exist_ok=True)


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "..", "x" * 250, "sp ace", 5])
def test_invalid_topic_names(log: Log, name: object) -> None:
    with pytest.raises(LogError, match="invalid topic name"):
        log.create_topic(name, 1)  # type: ignore[arg-type]
    assert not log.has_topic(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("partitions", [0, -1, True, 1.0, 100_001])
def test_invalid_partition_counts(log: Log, partitions: object) -> None:
    with pytest.raises(LogError):
        log.create_topic("t", partitions)  # type: ignore[arg-type]
    assert not log.has_topic("t")


def test_missing_partition_errors(log: Log) -> None:
    log.create_topic("t", 2)
    for p in (2, -1, True, "0"):
        with pytest.raises(UnknownPartitionError):
            log.end_offset("t", p)  # type: ignore[arg-type]
        with pytest.raises(UnknownPartitionError):
            log.append("t", p, recs(1))  # type: ignore[arg-type]
    log.append("t", 1, recs(1))
    with pytest.raises(UnknownPartitionError):
        log.end_offset("t", True)  # type: ignore[arg-type]


def test_append_assigns_dense_offsets_and_reads_back(log: Log) -> None:
    log.create_topic("t", 2)
    assert log.append("t", 0, recs(3, "a")) == 0
    assert log.append("t", 0, recs(2, "b")) == 3
    assert log.append("t", 0, []) == 5
    assert log.append("t", 1, recs(1, "c")) == 0
    assert log.end_offset("t", 0) == 5 and log.begin_offset("t", 0) == 0
    got = list(log.read("t", 0))
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    assert vals(got) == [b"a0", b"a1", b"a2", b"b0", b"b1"]
    assert got[3] == LogRecord(b"k0", b"b0", 1000, (), 3)
    assert vals(log.read("t", 1)) == [b"c0"]


def test_offsets_of_many_partitions_at_once_equal_one_by_one(log: Log) -> None:
    log.create_topic("t", 3)
    log.create_topic("u", 1)
    log.append("t", 0, recs(3))
    log.append("t", 2, recs(1))
    log.append("u", 0, recs(2))
    log.truncate_before("u", 0, 2)  # Kafka purges exactly; the file log by whole segments
    keys = [("t", 0), ("t", 1), ("t", 2), ("u", 0)]
    assert log.end_offsets(keys) == {k: log.end_offset(*k) for k in keys}
    assert log.end_offsets(keys) == {("t", 0): 3, ("t", 1): 0, ("t", 2): 1, ("u", 0): 2}
    assert log.begin_offsets(keys) == {k: log.begin_offset(*k) for k in keys}
    assert log.end_offsets([]) == log.begin_offsets([]) == {}
    with pytest.raises(UnknownTopicError):
        log.end_offsets([("t", 0), ("nope", 0)])
    with pytest.raises(UnknownPartitionError):
        log.begin_offsets([("t", 3)])


def test_read_ranges_and_max_records(log: Log) -> None:
    log.create_topic("t", 1)
    for batch in range(4):
        log.append("t", 0, recs(5, f"{batch}-"))
    everything = vals(log.read("t", 0))
    assert len(everything) == 20
    for start, end, limit in [
        (0, 20, None),
        (3, 17, None),
        (5, 10, None),
        (7, None, 4),
        (19, 20, None),
        (20, None, None),
        (4, 4, None),
        (0, None, 0),
    ]:
        stop = 20 if end is None else end
        if limit is not None:
            stop = min(stop, start + limit)
        got = list(log.read("t", 0, start, end, max_records=limit))
        assert vals(got) == everything[start:stop]
        assert [r.offset for r in got] == list(range(start, stop))
        table = log.read_table("t", 0, start, end, max_records=limit)
        assert table.schema == READ_SCHEMA
        assert table.column("value").to_pylist() == everything[start:stop]
        assert records_of(table) == got


def test_bad_read_ranges(log: Log) -> None:
    log.create_topic("t", 1)
    log.append("t", 0, recs(5))
    for start, end in [(-1, None), (6, None), (0, 6), (3, 7)]:
        with pytest.raises(OffsetOutOfRangeError):
            log.read("t", 0, start, end)  # raised at call time, not when iterated
        with pytest.raises(OffsetOutOfRangeError):
            log.read_table("t", 0, start, end)
    with pytest.raises(LogError, match="before start"):
        log.read("t", 0, 4, 2)
    with pytest.raises(LogError, match="max_records"):
        log.read("t", 0, 0, None, max_records=-1)
    with pytest.raises(LogError, match="int offset"):
        log.read("t", 0, "0")  # type: ignore[arg-type]


def test_empty_partition_reads(log: Log) -> None:
    log.create_topic("t", 1)
    assert list(log.read("t", 0)) == []
    assert log.read_table("t", 0).num_rows == 0
    assert log.read_table("t", 0).schema == READ_SCHEMA


def test_append_accepts_an_arrow_table_and_generators(log: Log) -> None:
    log.create_topic("t", 1)
    table = pa.table({"key": [b"a", None], "value": [b"1", b"2"], "timestamp": [5, 6]})
    assert log.append("t", 0, table) == 0
    assert log.append("t", 0, (r for r in recs(2))) == 2
    got = list(log.read("t", 0))
    assert [(r.key, r.value, r.timestamp) for r in got[:2]] == [(b"a", b"1", 5), (None, b"2", 6)]
    assert len(got) == 4


def test_headers_round_trip(log: Log) -> None:
    log.create_topic("t", 1)
    rec = LogRecord(b"k", b"v", 1, (("a", b"1"), ("a", b"2"), ("b", b"")))
    log.append("t", 0, [rec, LogRecord(b"k", b"v", 2)])
    got = list(log.read("t", 0))
    assert got[0].headers == rec.headers and got[1].headers == ()
    assert log.read_table("t", 0).column("headers").to_pylist()[0][1] == {"key": "a", "value": b"2"}


def test_close_makes_the_handle_unusable(log: Log) -> None:
    log.create_topic("t", 1)
    with log as same:
        assert same is log
    for call in (lambda: log.end_offset("t", 0), log.list_topics, lambda: log.append("t", 0, [])):
        with pytest.raises(LogClosedError):
            call()


def test_missing_topic_errors_everywhere(log: Log) -> None:
    calls = [
        lambda: log.describe_topic("nope"),
        lambda: log.partitions("nope"),
        lambda: log.delete_topic("nope"),
        lambda: log.end_offset("nope", 0),
        lambda: log.begin_offset("nope", 0),
        lambda: log.read("nope", 0),
        lambda: log.read_table("nope", 0),
        lambda: log.append("nope", 0, recs(1)),
        lambda: log.truncate_before("nope", 0, 0),
        lambda: log.describe_topic("../etc"),
    ]
    for call in calls:
        with pytest.raises(UnknownTopicError, match="does not exist"):
            call()
    assert not log.has_topic("nope") and log.list_topics() == []


def test_topic_deleted_by_another_handle(open_any: Callable[[], Log]) -> None:
    a, b = open_any(), open_any()
    a.create_topic("t", 1)
    a.append("t", 0, recs(2))
    assert b.end_offset("t", 0) == 2
    a.delete_topic("t")
    assert not b.has_topic("t") and b.list_topics() == []
    with pytest.raises(UnknownTopicError):
        b.append("t", 0, recs(1))
    with pytest.raises(UnknownTopicError):
        list(b.read("t", 0))
    assert not a.has_topic("t")  # the refused append did not create it


def test_writes_notice_a_topic_recreated_by_another_handle(open_any: Callable[[], Log]) -> None:
    a, b = open_any(), open_any()
    a.create_topic("t", 1)
    a.append("t", 0, recs(5, "old"))
    b.delete_topic("t")
    b.create_topic("t", 1)
    b.append("t", 0, recs(2, "new"))
    assert a.append("t", 0, recs(1, "a")) == 2  # not 5: nothing cached survives re-creation
    assert vals(open_any().read("t", 0)) == [b"new0", b"new1", b"a0"]


def test_a_second_handle_sees_new_data_incrementally(open_any: Callable[[], Log]) -> None:
    writer, reader = open_any(), open_any()
    writer.create_topic("t", 1)
    assert reader.end_offset("t", 0) == 0
    for i in range(5):
        writer.append("t", 0, recs(2, f"{i}-"))
        assert reader.end_offset("t", 0) == 2 * (i + 1)
    assert vals(reader.read("t", 0, 8)) == [b"4-0", b"4-1"]


def test_pickled_handle_opens_the_same_log(log: Log) -> None:
    log.create_topic("t", 1)
    log.append("t", 0, recs(3))
    clone = pickle.loads(pickle.dumps(log))
    try:
        assert type(clone) is type(log) and clone.url == log.url
        assert clone.end_offset("t", 0) == 3
    finally:
        clone.close()


def test_interleaved_readers_each_keep_their_position(log: Log) -> None:
    log.create_topic("t", 1)
    log.append("t", 0, recs(6))
    first, second = log.read("t", 0), log.read("t", 0, 3)
    assert [next(first).offset, next(second).offset, next(first).offset] == [0, 3, 1]
    assert [r.offset for r in second] == [4, 5]
    assert [r.offset for r in first] == [2, 3, 4, 5]
