"""Marks of many Kafka partitions checked at once: the marked records are read together
(``KafkaLog.records_at``), and every answer equals ``mark_holds`` of the partition alone."""

from __future__ import annotations

import time

from streamtide.log import KafkaLog, LogRecord, open_log
from streamtide.log.source_marks import SourceMark, mark_holds, marks_hold, record_crc
from tests.kafka_broker import KAFKA_TEST_OPTIONS


def test_marks_of_many_partitions_are_checked_as_one_by_one(kafka_url: str) -> None:
    log = open_log(kafka_url, **KAFKA_TEST_OPTIONS)
    assert isinstance(log, KafkaLog)
    try:
        log.create_topic("m", 4, configs={"retention.ms": "-1"})
        now = int(time.time() * 1000)
        for p in range(4):
            log.append("m", p, [LogRecord(b"k%d" % i, b"v%d" % i, now + i) for i in range(5)])
        log.truncate_before("m", 3, 3)

        def mark(offset: int, value: bytes) -> SourceMark:
            return SourceMark(offset, now + offset, record_crc(b"k%d" % offset, value))

        marks = {
            ("m", 0): mark(2, b"v2"),  # holds
            ("m", 1): mark(4, b"other"),  # another record is there
            ("m", 2): SourceMark(9, now, 0),  # past the partition's end
            ("m", 3): mark(1, b"v1"),  # purged: cannot be told
        }
        keys = list(marks)
        found = log.records_at({k: m.offset for k, m in marks.items() if k != ("m", 2)})
        assert found[("m", 0)] == (now + 2, b"k2", b"v2")
        held = marks_hold(log, marks, log.begin_offsets(keys), log.end_offsets(keys))
        assert held == {("m", 0): True, ("m", 1): False, ("m", 2): False, ("m", 3): None}
        assert held == {k: mark_holds(log, k[0], k[1], m) for k, m in marks.items()}
    finally:
        log.close()
