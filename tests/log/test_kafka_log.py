"""The Kafka log beyond the common ``Log`` contract: topic configs, read_committed ranges over
transaction markers, delete_records, interoperability with plain Kafka clients, and the test
broker's differences from Apache Kafka that the log works around (docs/kafka.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from streamtide.log import (
    CHANGELOG_CONFIGS,
    READ_SCHEMA,
    REPARTITION_CONFIGS,
    KafkaLog,
    LogError,
    LogRecord,
    LogUnavailableError,
    OffsetOutOfRangeError,
    UnknownTopicError,
    UnsupportedOperationError,
    open_log,
    records_of,
)
from tests.kafka_broker import KAFKA_TEST_OPTIONS, free_port


def recs(n: int, prefix: str = "v", ts: int = 1000) -> list[LogRecord]:
    return [LogRecord(f"k{i}".encode(), f"{prefix}{i}".encode(), ts + i) for i in range(n)]


@pytest.fixture
def open_kafka(kafka_url: str) -> Iterator[Callable[..., KafkaLog]]:
    handles: list[KafkaLog] = []

    def open_(**options: object) -> KafkaLog:
        log = open_log(kafka_url, **{**KAFKA_TEST_OPTIONS, **options})
        assert isinstance(log, KafkaLog)
        handles.append(log)
        return log

    yield open_
    for handle in handles:
        handle.close()


@pytest.fixture
def klog(open_kafka: Callable[..., KafkaLog]) -> KafkaLog:
    return open_kafka()


def write_transactions(
    producer, outcomes: tuple[tuple[str, bool], ...], *, flush: bool = False
) -> None:
    """One transaction of three records per ``(label, commit)`` to ``t``/0, committed or
    aborted; ``flush``: the records reach the partition before the transaction ends."""
    for label, commit in outcomes:
        producer.begin_transaction()
        for i in range(3):
            producer.produce("t", f"{label}{i}".encode(), b"k", partition=0, timestamp=100 + i)
        if flush:
            producer.flush(10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)


def transactional_producer(log: KafkaLog, tid: str):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": log.bootstrap, "transactional.id": tid})
    producer.init_transactions(10)
    return producer


# -- no broker needed --------------------------------------------------------------------------


def test_options_that_would_break_the_log_are_refused() -> None:
    with pytest.raises(LogError, match=r"isolation\.level='read_uncommitted' conflicts"):
        open_log("kafka://127.0.0.1:9092", **{"isolation.level": "read_uncommitted"})
    with pytest.raises(LogError, match=r"enable\.idempotence"):
        open_log("kafka://127.0.0.1:9092", **{"enable.idempotence": False})
    with pytest.raises(LogError, match="comes from the log URL"):
        open_log("kafka://127.0.0.1:9092", **{"bootstrap.servers": "elsewhere:1"})


def test_segment_sealing_is_file_log_only() -> None:
    log = open_log("kafka://127.0.0.1:9092")
    calls = [
        lambda: log.write_segment("t", 0, recs(1), writer_id="w"),
        lambda: log.list_unsealed("t", 0),
        lambda: log.abort_unsealed_by_prefix("w"),
    ]
    for call in calls:
        with pytest.raises(UnsupportedOperationError, match="file log's segment commit protocol"):
            call()


def test_an_unreachable_cluster_is_a_clear_unavailable_error() -> None:
    """The first call gives up after the connect timeout, not after each call's own timeout."""
    address = f"127.0.0.1:{free_port()}"
    log = KafkaLog(address, {"streamtide.connect.timeout.ms": 1000}, timeout_s=60.0)
    started = time.monotonic()
    with pytest.raises(LogUnavailableError, match=rf"^cannot reach Kafka at {address} within 1 s"):
        log.list_topics()
    assert time.monotonic() - started < log.timeout_s
    log.close()


# -- on the test broker --------------------------------------------------------------------------


@pytest.mark.kafka
def test_topics_are_created_with_configs(open_kafka: Callable[..., KafkaLog]) -> None:
    log = open_kafka(**{"topic.segment.ms": "600000"})
    log.create_topic("app-store-changelog", 2, configs=CHANGELOG_CONFIGS)
    log.create_topic("app-x-repartition", 2, configs=REPARTITION_CONFIGS)
    log.create_topic("plain", 1, configs={"retention.ms": "3600000"})
    changelog = log.topic_configs("app-store-changelog")
    assert changelog["cleanup.policy"] == "compact"
    assert changelog["retention.ms"] == "-1"  # the handle's topic.retention.ms default
    repartition = log.topic_configs("app-x-repartition")
    assert (repartition["cleanup.policy"], repartition["retention.ms"]) == ("delete", "-1")
    assert log.topic_configs("plain")["retention.ms"] == "3600000"  # explicit beats default
    with pytest.raises(UnknownTopicError):
        log.topic_configs("nope")


@pytest.mark.kafka
def test_keys_values_timestamps_and_headers_survive(klog: KafkaLog) -> None:
    klog.create_topic("t", 1)
    written = [
        LogRecord(b"k", b"v", 1_700_000_000_123, (("a", b"1"), ("a", b"2"), ("empty", b""))),
        LogRecord(None, b"keyless", 1),
        LogRecord(b"tombstone", None, 5),
        LogRecord(b"", b"", 7),
    ]
    assert klog.append("t", 0, written) == 0
    got = list(klog.read("t", 0))
    assert [(r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (r.key, r.value, r.timestamp, r.headers) for r in written
    ]
    assert records_of(klog.read_table("t", 0)) == got


@pytest.mark.kafka
def test_timestamps_below_one_are_refused_before_sending(klog: KafkaLog) -> None:
    """The client library sends timestamp 0 as "now": refused rather than silently changed."""
    klog.create_topic("t", 1)
    for bad in (-5, 0):
        with pytest.raises(LogError, match=f"from 1 ms on, got {bad}"):
            klog.append("t", 0, [LogRecord(b"k", b"v", 1), LogRecord(b"k", b"v", bad)])
    assert klog.end_offset("t", 0) == 0


@pytest.mark.kafka
def test_plain_kafka_clients_read_and_write_the_same_records(klog: KafkaLog) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    klog.create_topic("t", 1)
    klog.append("t", 0, [LogRecord(b"k1", b"from-streamtide", 42, (("h", b"x"),))])
    producer = Producer({"bootstrap.servers": klog.bootstrap})
    producer.produce("t", b"from-kafka", b"k2", partition=0, timestamp=43, headers=[("h", b"y")])
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": klog.bootstrap, "group.id": "independent"})
    consumer.assign([TopicPartition("t", 0, 0)])
    seen = []
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append((message.key(), message.value(), message.timestamp()[1], message.headers()))
    consumer.close()
    assert seen == [
        (b"k1", b"from-streamtide", 42, [("h", b"x")]),
        (b"k2", b"from-kafka", 43, [("h", b"y")]),
    ]
    assert [(r.key, r.headers) for r in klog.read("t", 0)] == [
        (b"k1", (("h", b"x"),)),
        (b"k2", (("h", b"y"),)),
    ]


@pytest.mark.kafka
def test_reads_are_read_committed_and_stop_at_the_range_end_across_markers(
    klog: KafkaLog,
) -> None:
    klog.create_topic("t", 1)
    producer = transactional_producer(klog, "writer-1")
    write_transactions(producer, (("a", True), ("b", False), ("c", True)))
    # Commit markers take offsets (Apache Kafka also keeps the aborted records and an abort
    # marker; the test broker drops both), so offsets have gaps.
    end = klog.end_offset("t", 0)
    visible = [(r.offset, r.value) for r in klog.read("t", 0)]
    assert [v for _, v in visible] == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"]
    assert end > len(visible) and visible[-1][0] < end
    for start in range(end + 1):  # every range stops at its end, never waits for an offset
        for stop in range(start, end + 1):
            expected = [(o, v) for o, v in visible if start <= o < stop]
            assert [(r.offset, r.value) for r in klog.read("t", 0, start, stop)] == expected
    assert [v for _, v in [(r.offset, r.value) for r in klog.read("t", 0, 1, max_records=3)]] == [
        b"a1", b"a2", b"c0",
    ]  # fmt: skip
    table = klog.read_table("t", 0, 0, end)
    assert table.schema == READ_SCHEMA
    assert table.column("offset").to_pylist() == [o for o, _ in visible]

    # An open transaction: its records are invisible and the end offset stays before them.
    producer.begin_transaction()
    producer.produce("t", b"pending", b"k", partition=0, timestamp=200)
    producer.flush(10)
    assert klog.end_offset("t", 0) == end
    assert [r.value for r in klog.read("t", 0, visible[3][0])] == [b"c0", b"c1", b"c2"]
    producer.commit_transaction(10)
    assert klog.end_offset("t", 0) > end
    assert [r.value for r in klog.read("t", 0, end)] == [b"pending"]


@pytest.mark.kafka
def test_long_ranges_are_read_in_chunks(klog: KafkaLog) -> None:
    klog.create_topic("t", 1)
    klog.append("t", 0, recs(25_000))
    table = klog.read_table("t", 0, 5, 24_990)
    assert table.num_rows == 24_985
    assert table.column("offset").to_pylist() == list(range(5, 24_990))
    assert table.column("value")[-1].as_py() == b"v24989"
    assert klog.read_table("t", 0, 100, max_records=12_000).num_rows == 12_000
    assert sum(1 for _ in klog.read("t", 0, 9_990, 10_020)) == 30


@pytest.mark.kafka
def test_truncate_before_purges_with_delete_records(klog: KafkaLog) -> None:
    klog.create_topic("r", 1, configs=REPARTITION_CONFIGS)
    klog.append("r", 0, recs(10))
    assert klog.truncate_before("r", 0, 4) == 4
    assert (klog.begin_offset("r", 0), klog.end_offset("r", 0)) == (4, 10)
    assert [r.offset for r in klog.read("r", 0, 4)] == list(range(4, 10))
    with pytest.raises(OffsetOutOfRangeError, match="truncated; the first readable offset is 4"):
        klog.read("r", 0, 3)
    assert klog.truncate_before("r", 0, 2) == 4  # never moves back
    with pytest.raises(OffsetOutOfRangeError, match="end offset is 10"):
        klog.truncate_before("r", 0, 11)
    assert klog.truncate_before("r", 0, 10) == 10
    assert list(klog.read("r", 0, 10)) == []
    klog.create_topic("c", 1, configs=CHANGELOG_CONFIGS)
    klog.append("c", 0, recs(3))
    with pytest.raises(LogError, match=r"cleanup\.policy=compact"):
        klog.truncate_before("c", 0, 1)


@pytest.mark.kafka
def test_offsets_of_many_partitions_are_asked_at_once(klog: KafkaLog) -> None:
    """End offsets in bulk are last stable offsets; high watermarks include an open
    transaction's records; many partitions are purged in one call."""
    klog.create_topic("t", 2)
    klog.create_topic("r", 3, configs=REPARTITION_CONFIGS)
    for p in range(3):
        klog.append("r", p, recs(4))
    producer = transactional_producer(klog, "bulk-writer")
    producer.begin_transaction()
    producer.produce("t", b"pending", b"k", partition=1, timestamp=5)
    producer.flush(10)
    keys = [("t", 0), ("t", 1)]
    assert klog.end_offsets(keys) == {("t", 0): 0, ("t", 1): 0}
    assert klog.high_watermarks(keys) == {("t", 0): 0, ("t", 1): 1}
    producer.commit_transaction(10)
    assert klog.end_offsets(keys) == klog.high_watermarks(keys) == {("t", 0): 0, ("t", 1): 2}
    # purging: below the consumed offsets, never back, never past the end
    begins = klog.truncate_before_many({("r", 0): 2, ("r", 1): 4, ("r", 2): 0})
    assert begins == {("r", 0): 2, ("r", 1): 4, ("r", 2): 0}
    assert klog.begin_offsets([("r", p) for p in range(3)]) == begins
    assert klog.truncate_before_many({("r", 0): 1}) == {("r", 0): 2}
    with pytest.raises(OffsetOutOfRangeError, match="end offset is 4"):
        klog.truncate_before_many({("r", 1): 5})
    with pytest.raises(UnknownTopicError):
        klog.truncate_before_many({("ghost", 0): 1})


# -- broker differences (docs/kafka.md) -----------------------------------------------------------


@pytest.mark.kafka
def test_missing_topics_are_never_created_by_lookups_or_appends(klog: KafkaLog) -> None:
    """A metadata request naming a missing topic creates it on the test broker, and so may
    a produce request: the log lists all topics instead and checks before producing."""
    for call in (
        lambda: klog.describe_topic("ghost"),
        lambda: klog.end_offset("ghost", 0),
        lambda: klog.read("ghost", 0),
        lambda: klog.append("ghost", 0, recs(1)),
        lambda: klog.truncate_before("ghost", 0, 0),
    ):
        with pytest.raises(UnknownTopicError, match="does not exist"):
            call()
    assert not klog.has_topic("ghost")
    assert "ghost" not in KafkaLog(klog.bootstrap).list_topics()


@pytest.mark.kafka
def test_time_retention_applies_to_the_active_segment_within_seconds(
    open_kafka: Callable[..., KafkaLog],
) -> None:
    """Records older than retention.ms vanish within seconds, even from the active segment:
    topics that hold old event times need retention.ms=-1 (Kafka Streams' choice for
    repartition topics) and are purged with delete_records instead."""
    log = open_kafka()
    log.create_topic("kept", 1)  # topic.retention.ms=-1 from the test options
    log.create_topic("expiring", 1, configs={"retention.ms": "60000"})
    for topic in ("kept", "expiring"):
        log.append(topic, 0, recs(3, ts=1000))
    deadline = time.monotonic() + 15
    while log.begin_offset("expiring", 0) < 3 and time.monotonic() < deadline:
        time.sleep(0.25)
    assert log.begin_offset("expiring", 0) == 3 and list(log.read("expiring", 0, 3)) == []
    assert [r.value for r in log.read("kept", 0)] == [b"v0", b"v1", b"v2"]


@pytest.mark.kafka
def test_reads_that_continue_where_the_last_stopped_see_new_records(klog: KafkaLog) -> None:
    """The reader keeps its assignment between calls; continuing at the end of a partition
    (as ``consume --follow`` does) must still see what was appended since."""
    klog.create_topic("t", 2)
    klog.append("t", 0, recs(3))
    assert [r.offset for r in klog.read("t", 0)] == [0, 1, 2]
    klog.append("t", 0, recs(2, "later"))
    assert [r.value for r in klog.read("t", 0, 3)] == [b"later0", b"later1"]
    assert [r.offset for r in klog.read("t", 0, 1, max_records=1)] == [1]
    assert [r.offset for r in klog.read("t", 0, 2, 4)] == [2, 3]  # continues after a limit
    klog.append("t", 1, recs(1, "other"))
    assert [r.value for r in klog.read("t", 1)] == [b"other0"]  # another partition
    assert [r.offset for r in klog.read("t", 0, 0, 2)] == [0, 1]  # and back, seeking again


@pytest.mark.kafka
def test_committed_records_after_an_aborted_transaction_are_read_from_any_offset(
    klog: KafkaLog,
) -> None:
    """An aborted transaction whose records reached the partition, then committed ones of the
    same producer (a task's changelog after a work unit died in its transaction): a range
    starting past the abort marker returns them (the test broker alone hid them; a restore
    from a checkpoint there lost the store's state)."""
    klog.create_topic("t", 1)
    producer = transactional_producer(klog, "writer-2")
    outcomes = (("a", True), ("b", False), ("c", True), ("d", False), ("e", True))
    write_transactions(producer, outcomes, flush=True)  # aborted records reach the partition
    end = klog.end_offset("t", 0)
    visible = [(r.offset, r.value) for r in klog.read("t", 0)]
    assert [v for _, v in visible] == [
        b"a0", b"a1", b"a2", b"c0", b"c1", b"c2", b"e0", b"e1", b"e2",
    ]  # fmt: skip
    for start in range(end + 1):
        expected = [(o, v) for o, v in visible if o >= start]
        assert [(r.offset, r.value) for r in klog.read("t", 0, start, end)] == expected, start
        table = klog.read_table("t", 0, start, end)
        assert table.column("offset").to_pylist() == [o for o, _ in expected], start
