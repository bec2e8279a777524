"""Transactional appends to Kafka at most once per write id (``log.kafka_once``), on the test
broker: retried attempts, zombie attempts, fencing after a failure, and clear errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from streamtide.log import (
    KafkaLog,
    LogError,
    LogRecord,
    ProducerFencedError,
    UnknownPartitionError,
    UnknownTopicError,
    open_log,
)
from streamtide.log.kafka_once import (
    WRITES_CONFIGS,
    WRITES_TOPIC,
    _confirm,
    _transaction,
    append_once,
    fence,
    marker_offsets,
)
from tests.kafka_broker import KAFKA_TEST_OPTIONS

pytestmark = pytest.mark.kafka


@pytest.fixture
def klog(kafka_url: str) -> Iterator[KafkaLog]:
    log = open_log(kafka_url, **KAFKA_TEST_OPTIONS)
    assert isinstance(log, KafkaLog)
    log.create_topic("out", 2)
    yield log
    log.close()


def pairs(n: int, tag: str = "v") -> list[tuple[int, LogRecord]]:
    return [(i % 2, LogRecord(f"k{i}".encode(), f"{tag}{i}".encode(), 1_000 + i)) for i in range(n)]


def stored(log: KafkaLog, topic: str = "out") -> list[tuple[int, bytes | None, int]]:
    return sorted(
        (p, r.value, r.timestamp) for p in range(log.partitions(topic)) for r in log.read(topic, p)
    )


def settled(log: KafkaLog, topic: str = "out") -> bool:
    """No transaction is open on the topic: read_committed readers see every record written."""
    return all(
        log.end_offset(topic, p) == log.high_watermark(topic, p)
        for p in range(log.partitions(topic))
    )


def test_records_and_marker_commit_together(klog: KafkaLog) -> None:
    since = marker_offsets(klog)
    assert klog.topic_configs(WRITES_TOPIC)["cleanup.policy"] == WRITES_CONFIGS["cleanup.policy"]
    assert append_once(klog, "out", iter(pairs(40)), write_id="w-0", since=since) == 40
    assert stored(klog) == sorted((p, r.value, r.timestamp) for p, r in pairs(40))
    markers = [(r.key, json.loads(r.value)) for r in klog.read(WRITES_TOPIC, 0)]
    assert markers == [(b"w-0", {"topic": "out", "records": 40})]
    assert settled(klog) and settled(klog, WRITES_TOPIC)
    assert marker_offsets(klog) == {0: klog.end_offset(WRITES_TOPIC, 0)}  # exists: kept


def test_a_retried_attempt_appends_nothing_and_reports_the_committed_count(klog: KafkaLog) -> None:
    since = marker_offsets(klog)
    assert append_once(klog, "out", pairs(30), write_id="w-0", since=since) == 30
    # the first attempt's report was lost; the retry sees its marker and writes nothing
    consumed: list[int] = []

    def retry() -> Iterator[tuple[int, LogRecord]]:
        for pair in pairs(30, "again"):
            consumed.append(1)
            yield pair

    assert append_once(klog, "out", retry(), write_id="w-0", since=since) == 30
    assert consumed == []
    assert stored(klog) == sorted((p, r.value, r.timestamp) for p, r in pairs(30))
    # another write id of the same call is a write of its own
    assert append_once(klog, "out", pairs(4, "x"), write_id="w-1", since=since) == 4
    assert len(stored(klog)) == 34


def test_a_zombie_attempt_is_fenced_and_its_records_never_become_visible(klog: KafkaLog) -> None:
    since = marker_offsets(klog)
    zombie = _transaction(klog, "w-0", "out")
    zombie.begin()
    for partition, record in pairs(20, "zombie"):
        zombie.send("out", partition, record)
    zombie.flush()  # its records are on the broker, in a transaction still open
    assert not settled(klog) and stored(klog) == []
    assert append_once(klog, "out", pairs(10, "retry"), write_id="w-0", since=since) == 10
    with pytest.raises(ProducerFencedError, match=r"write 'w-0' to topic 'out'.*fenced"):
        zombie.commit_with(WRITES_TOPIC, 0, LogRecord(b"w-0", b"{}", 5))
    zombie.__exit__(None, None, None)
    assert stored(klog) == sorted((p, r.value, r.timestamp) for p, r in pairs(10, "retry"))
    assert settled(klog) and settled(klog, WRITES_TOPIC)
    assert [r.key for r in klog.read(WRITES_TOPIC, 0)] == [b"w-0"]


def test_fence_aborts_what_a_dead_attempt_left_open(klog: KafkaLog) -> None:
    marker_offsets(klog)
    dead = _transaction(klog, "w-3", "out")
    dead.begin()
    for partition, record in pairs(6, "dead"):
        dead.send("out", partition, record)
    dead.flush()
    assert klog.end_offset("out", 0) == 0 < klog.high_watermark("out", 0)  # readers wait
    fence(klog, "out", ["w-3"])
    assert settled(klog) and stored(klog) == []
    with pytest.raises(ProducerFencedError):
        dead.commit_with(WRITES_TOPIC, 0, LogRecord(b"w-3", b"{}", 5))


def test_a_failing_attempt_aborts_and_names_topic_and_partition(klog: KafkaLog) -> None:
    since = marker_offsets(klog)
    bad_time = [*pairs(5), (1, LogRecord(b"k", b"v", 0))]
    with pytest.raises(LogError, match=r"from 1 ms on, got 0 for out/1"):
        append_once(klog, "out", bad_time, write_id="w-0", since=since)
    with pytest.raises(UnknownPartitionError, match=r"'out' has partitions 0\.\.1; .* partition 7"):
        append_once(klog, "out", [(7, LogRecord(b"k", b"v", 1))], write_id="w-0", since=since)
    with pytest.raises(UnknownTopicError, match="'missing'"):
        append_once(klog, "missing", pairs(1), write_id="w-0", since=since)
    assert not klog.has_topic("missing")
    assert settled(klog) and stored(klog) == [] and list(klog.read(WRITES_TOPIC, 0)) == []
    # the write was never committed, so a later attempt writes it
    assert append_once(klog, "out", pairs(3), write_id="w-0", since=since) == 3


def test_a_commit_whose_marker_is_not_committed_is_an_error(klog: KafkaLog) -> None:
    """The read-back after a commit: a broker can abort a transaction (restart) after the
    client reported its commit; then the marker is not where the commit put it."""
    since = marker_offsets(klog)
    append_once(klog, "out", pairs(2), write_id="w-0", since=since)
    _confirm(klog, b"w-0", 0, 0, "w-0")  # the committed marker is found
    with pytest.raises(LogError, match=r"marker at _streamtide-writes/0 offset 0 is not committed"):
        _confirm(klog, b"w-9", 0, 0, "w-9")
    started = time.monotonic()
    with pytest.raises(LogError, match="offset 99 is not committed"):
        _confirm(klog, b"w-0", 0, 99, "w-0")  # beyond the end: the records vanished
    assert time.monotonic() - started < 5
