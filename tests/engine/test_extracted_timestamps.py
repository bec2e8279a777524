"""The engine applies timestamp extractors; each batch resumes the committed partition time."""

from __future__ import annotations

from streamtide import Consumed, StreamsApp, StreamsBuilder
from streamtide.log import LogRecord, open_log
from tests.engine.scenarios import JSON, STRING, engine_config, event_time


def extracted_topology():
    builder = StreamsBuilder()
    builder.stream("events", Consumed.with_(STRING, JSON, timestamp_extractor=event_time)).to("out")
    return builder.build()


def test_the_engine_stamps_records_with_the_extracted_timestamp(spark, log_url, tmp_path) -> None:
    log = open_log(log_url)
    log.create_topic("events", 1)
    # every third record has no event time and takes the partition time; stored timestamps
    # (offset * 7) would give other results
    values = [{"i": i} if i % 3 == 2 else {"i": i, "at": 1000 + (i * 37) % 500} for i in range(200)]
    log.append(
        "events", 0, [LogRecord(b"k", JSON.serialize(v), i * 7) for i, v in enumerate(values)]
    )
    expected, partition_time = [], -1
    for value in values:
        at = value.get("at", partition_time)
        partition_time = max(partition_time, at)
        expected.append((value["i"], at))
    config = engine_config(log_url, str(tmp_path / "state"), adaptive_batch_size=False)
    app = StreamsApp(extracted_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    app.stop()
    assert len(progress) >= 3, "the input must span several batches"
    output = [(JSON.deserialize(r.value)["i"], r.timestamp) for r in log.read("out", 0)]
    log.close()
    assert output == expected
