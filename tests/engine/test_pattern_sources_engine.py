"""A stream of every topic whose name matches a pattern, on the engine: a topic created
while the application runs is read from a following batch on, exactly once, its extra
partitions becoming new tasks; a pattern that matches no topic is a clear error."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from streamtide import Consumed, Produced, Serdes, StreamsApp, StreamsBuilder
from streamtide.errors import UnknownTopicError
from streamtide.log import LogRecord, open_log
from tests.engine.scenarios import engine_config, log_options_for

STRING = Serdes.string()


def pattern_topology():
    builder = StreamsBuilder()
    clicks = builder.stream(re.compile(r"clicks-\d+"), Consumed.with_(STRING, STRING))
    clicks.map_values(lambda v: v.upper()).to("out", Produced.with_(STRING, STRING))
    return builder.build()


def write(log, topic: str, partitions: int, values: list[str]) -> None:
    if not log.has_topic(topic):
        log.create_topic(topic, partitions)
    for i, value in enumerate(values):
        partition = i % partitions
        log.append(topic, partition, [LogRecord(b"k%d" % i, value.encode(), 1_000 + i)])


def outputs(log) -> Counter:
    return Counter(
        r.value.decode() for p in range(log.partitions("out")) for r in log.read("out", p)
    )


@pytest.mark.spark
@pytest.mark.parametrize("on", ["file", "kafka"])
def test_a_topic_created_while_running_is_read_from_a_following_batch(
    spark, request, tmp_path, on
) -> None:
    log_url = request.getfixturevalue("log_url" if on == "file" else "kafka_url")
    log = open_log(log_url, **log_options_for(log_url))
    write(log, "clicks-1", 2, [f"a{i}" for i in range(10)])
    write(log, "views-1", 2, ["not read"])
    config = engine_config(log_url, str(tmp_path / "state"), commit_interval=100)
    app = StreamsApp(pattern_topology(), config, spark=spark).start()
    try:
        deadline = time.monotonic() + 120
        while sum(outputs(log).values()) < 10:
            assert time.monotonic() < deadline, "the first topic was not read"
            time.sleep(0.2)
        # more partitions than the first topic: tasks 0_2 and 0_3 appear
        write(log, "clicks-22", 4, [f"b{i}" for i in range(12)])
        write(log, "clicks-1", 2, [f"c{i}" for i in range(4)])
        while sum(outputs(log).values()) < 26:
            assert time.monotonic() < deadline, f"read only {outputs(log)}"
            time.sleep(0.2)
        tasks = {t for p in list(app.history) for t in p.owners}
    finally:
        app.stop()
    want = Counter([f"A{i}" for i in range(10)] + [f"B{i}" for i in range(12)])
    want.update(f"C{i}" for i in range(4))
    assert outputs(log) == want
    assert tasks == {"0_0", "0_1", "0_2", "0_3"}
    # a restart reads the same topics and has nothing left to do
    again = StreamsApp(pattern_topology(), config, spark=spark)
    progress = again.run_until_caught_up(timeout=120)
    assert sum(p.input_records for p in progress) == 0
    assert outputs(log) == want


@pytest.mark.spark
def test_a_pattern_that_matches_no_topic_is_a_clear_error(spark, log_url, tmp_path) -> None:
    open_log(log_url).create_topic("views-1", 1)
    config = engine_config(log_url, str(tmp_path / "s"))
    app = StreamsApp(pattern_topology(), config, spark=spark)
    with pytest.raises(UnknownTopicError, match="matches the pattern") as info:
        app.run_batch()
    assert "clicks-" in str(info.value) and "KSTREAM-SOURCE-0000000000" in str(info.value)
