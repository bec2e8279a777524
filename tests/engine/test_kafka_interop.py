"""Spark interop and the engine with a ``kafka://`` log: ``read_topic`` reads Kafka topics
(from their first readable offset), and running an application on Kafka fails with a clear
error until the engine's transactional commit lands."""

from __future__ import annotations

import pytest

from streamtide import StreamsConfig
from streamtide.errors import ConfigError
from streamtide.log import LogRecord, open_log
from streamtide.spark import read_topic
from tests.kafka_broker import KAFKA_TEST_OPTIONS


@pytest.mark.spark
@pytest.mark.kafka
def test_read_topic_reads_a_kafka_topic_like_a_file_topic(spark, kafka_url, tmp_path) -> None:
    rows = {
        0: [LogRecord(f"k{i}".encode(), f"v{i}".encode(), 1_000 + i) for i in range(6)],
        1: [LogRecord(None, b"keyless", 99, (("h", b"1"),))],
    }
    frames, expected = {}, {}
    for url, options in ((kafka_url, KAFKA_TEST_OPTIONS), (f"file://{tmp_path}", {})):
        log = open_log(url, **options)
        log.create_topic("events", 2)
        for partition, records in rows.items():
            log.append("events", partition, records)
        log.truncate_before("events", 0, 2)  # Kafka purges exactly; files by whole segment
        expected[url] = [
            (r.key, r.value, "events", p, r.offset, r.timestamp)
            for p in (0, 1)
            for r in log.read("events", p, log.begin_offset("events", p))
        ]
        log.close()
        frame = read_topic(spark, url, "events", log_options=options)
        frames[url] = sorted((tuple(r) for r in frame.collect()), key=lambda r: (r[3], r[4]))
        assert frames[url] == expected[url]
    assert [r[4] for r in frames[kafka_url]] == [2, 3, 4, 5, 0]
    assert frames[kafka_url][-1] == (None, b"keyless", "events", 1, 0, 99)


def test_log_options_must_be_a_dict_of_settings() -> None:
    with pytest.raises(ConfigError, match="log_options must be a dict"):
        StreamsConfig(log_options=[("a", "b")])  # type: ignore[arg-type]
