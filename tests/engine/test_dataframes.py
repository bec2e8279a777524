"""Topics as DataFrames: read on the executors, written exactly once per call (on the file log
and on Kafka)."""

from __future__ import annotations

import gc
import json
import os
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from streamtide import Serdes
from streamtide.engine.dataframes import (
    _WriteSpec,
    seal_written,
    write_partition,
    write_partition_once,
)
from streamtide.errors import ConfigError
from streamtide.log import (
    KafkaLog,
    LogRecord,
    ProducerFencedError,
    UnknownTopicError,
    open_log,
)
from streamtide.log.kafka_once import WRITES_TOPIC, marker_offsets
from streamtide.log.partitioner import partition_for_key
from streamtide.spark import read_topic, write_topic
from tests.kafka_broker import KAFKA_TEST_OPTIONS

pytestmark = pytest.mark.spark

STRING, JSON = Serdes.string(), Serdes.json()


@pytest.mark.slow
def test_a_million_records_stay_on_the_executors(spark, log_url) -> None:
    log = open_log(log_url)
    log.create_topic("big", 4)
    per_partition = 250_000
    for p in range(4):
        n = per_partition
        log.append(
            "big",
            p,
            pa.table(
                {
                    "key": pa.array([b"k%d" % (i % 1000) for i in range(n)], pa.binary()),
                    "value": pa.array([b"%d" % i for i in range(n)], pa.binary()),
                    "timestamp": pa.array(range(n), pa.int64()),
                }
            ),
        )
    gc.collect()
    tracemalloc.start()
    try:
        frame = read_topic(spark, log, "big")
        assert frame.rdd.getNumPartitions() == 4
        summary = frame.groupBy("partition").agg(
            F.count("*").alias("n"), F.max("offset").alias("last"), F.sum("timestamp").alias("ts")
        )
        per_partition_rows = {r.partition: (r.n, r.last, r.ts) for r in summary.collect()}
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    expected = (per_partition, per_partition - 1, sum(range(per_partition)))
    assert per_partition_rows == {p: expected for p in range(4)}
    # collecting 1M rows on the driver would take hundreds of MB of Python objects
    assert peak < 20 * 1024 * 1024, f"driver allocated {peak / 1e6:.0f} MB"


def test_decoding_with_serdes_a_schema_and_offset_ranges(spark, log_url) -> None:
    log = open_log(log_url)
    log.create_topic("clicks", 2)
    for p in range(2):
        log.append(
            "clicks",
            p,
            [
                LogRecord(STRING.serialize(f"u{p}-{i}"), JSON.serialize({"n": i, "page": "/"}), i)
                for i in range(10)
            ],
        )
    frame = read_topic(
        spark,
        log_url,
        "clicks",
        key_serde=STRING,
        value_serde=JSON,
        schema="n long, page string",
        start_offsets={0: 3},
        end_offsets={1: 5},
    )
    assert frame.rdd.getNumPartitions() == 2
    assert frame.schema.simpleString() == (
        "struct<key:string,value:struct<n:bigint,page:string>,topic:string,partition:int,"
        "offset:bigint,timestamp:bigint>"
    )
    rows = sorted((r.partition, r.offset, r.key, r.value.n) for r in frame.collect())
    assert rows == [(0, i, f"u0-{i}", i) for i in range(3, 10)] + [
        (1, i, f"u1-{i}", i) for i in range(5)
    ]
    text = read_topic(spark, log_url, "clicks", value_serde=JSON, end_offsets={0: 1, 1: 0})
    assert [json.loads(r.value) for r in text.collect()] == [{"n": 0, "page": "/"}]
    with pytest.raises(ConfigError, match="cannot map"):
        read_topic(spark, log_url, "clicks", key_serde=Serdes.windowed(STRING))
    with pytest.raises(ConfigError, match=r"needs Serdes\.json"):
        read_topic(spark, log_url, "clicks", schema="n long")


def test_write_topic_round_trips_a_dataframe(spark, log_url) -> None:
    open_log(log_url).create_topic("users", 3)
    rows = [(f"user-{i}", json.dumps({"i": i}), 1_000 + i) for i in range(300)]
    df = spark.createDataFrame(rows, "name string, doc string, ts long").repartition(5)
    written = write_topic(
        df,
        log_url,
        "users",
        key_col="name",
        value_col="doc",
        timestamp_col="ts",
        key_serde=STRING,
        value_serde=STRING,
    )
    assert written == 300
    log = open_log(log_url)
    assert log.list_unsealed("users", 0) == []
    stored = {}
    for p in range(3):
        for r in log.read("users", p):
            name = STRING.deserialize(r.key)
            assert partition_for_key(r.key, 3) == p  # keyed like every other producer
            stored[name] = (r.value.decode(), r.timestamp)
    assert stored == {name: (doc, ts) for name, doc, ts in rows}
    back = read_topic(spark, log_url, "users", key_serde=STRING, value_serde=STRING)
    assert sorted((r.key, r.value, r.timestamp) for r in back.collect()) == sorted(rows)
    # a custom partitioner sees the column values
    write_topic(
        spark.createDataFrame([("a", "x")], "key string, value string"),
        log_url,
        "users",
        key_serde=STRING,
        value_serde=STRING,
        partitioner=lambda key, value, n: 2 if key == "a" else 0,
    )
    assert STRING.deserialize(list(log.read("users", 2))[-1].key) == "a"


def test_a_retried_spark_task_is_appended_once(log_url) -> None:
    """Two attempts of the same Spark partition both write; sealing keeps exactly one."""
    log = open_log(log_url)
    log.create_topic("t", 2)
    spec = _WriteSpec("t", 2, "call-1", "key", "value", None)
    rows = [{"key": f"k{i}".encode(), "value": b"v%d" % i} for i in range(50)]
    bytes_ = Serdes.bytes()
    failed = list(write_partition(log, spec, 0, iter(rows), bytes_, bytes_, None))
    retried = list(write_partition(log, spec, 0, iter(rows), bytes_, bytes_, None))
    assert failed and len(log.list_unsealed("t", 0)) + len(log.list_unsealed("t", 1)) == 2 * len(
        failed
    )
    assert seal_written(log, "t", spec.prefix, retried) == 50
    assert seal_written(log, "t", spec.prefix, retried) == 50  # sealing again is a no-op
    assert sum(log.end_offset("t", p) for p in range(2)) == 50
    assert log.list_unsealed("t", 0) == log.list_unsealed("t", 1) == []
    stored = sorted(r.value for p in range(2) for r in log.read("t", p))
    assert stored == sorted(r["value"] for r in rows)


# -- on Kafka --------------------------------------------------------------------------------


def open_kafka(url: str) -> KafkaLog:
    log = open_log(url, **KAFKA_TEST_OPTIONS)
    assert isinstance(log, KafkaLog)
    return log


def kafka_rows(log: KafkaLog, topic: str) -> list[tuple[int, Any, Any, int]]:
    """(partition, key, value, timestamp) of the committed records, in partition order."""
    return [
        (p, r.key, r.value, r.timestamp)
        for p in range(log.partitions(topic))
        for r in log.read(topic, p, log.begin_offset(topic, p))
    ]


def settled(log: KafkaLog, topic: str) -> bool:
    """No transaction is open on the topic: read_committed readers see all that was written."""
    return all(
        log.end_offset(topic, p) == log.high_watermark(topic, p)
        for p in range(log.partitions(topic))
    )


@pytest.mark.kafka
def test_write_topic_round_trips_a_dataframe_on_kafka(spark, kafka_url) -> None:
    log = open_kafka(kafka_url)
    log.create_topic("users", 3)
    rows = [(f"user-{i}", json.dumps({"i": i}), 1_000 + i) for i in range(300)]
    df = spark.createDataFrame(rows, "name string, doc string, ts long").repartition(5)
    written = write_topic(
        df,
        kafka_url,
        "users",
        key_col="name",
        value_col="doc",
        timestamp_col="ts",
        key_serde=STRING,
        value_serde=STRING,
        log_options=KAFKA_TEST_OPTIONS,
    )
    assert written == 300
    stored = kafka_rows(log, "users")
    assert all(partition_for_key(key, 3) == p for p, key, _, _ in stored)
    decoded = [(STRING.deserialize(k), v.decode(), ts) for _, k, v, ts in stored]
    assert sorted(decoded) == sorted(rows)
    back = read_topic(spark, log, "users", key_serde=STRING, value_serde=STRING)
    assert sorted((r.key, r.value, r.timestamp) for r in back.collect()) == sorted(rows)
    # one committed marker per Spark partition of the call
    assert len(list(log.read(WRITES_TOPIC, 0))) == 5
    # a custom partitioner sees the column values; keyless rows, written at the current time
    before = time.time_ns() // 1_000_000
    pairs = spark.createDataFrame([("a", "x"), ("b", "y")], "key string, value string")
    assert (
        write_topic(
            pairs,
            log,
            "users",
            key_serde=STRING,
            value_serde=STRING,
            partitioner=lambda key, value, n: 2 if key == "a" else 0,
        )
        == 2
    )
    last = {p: list(log.read("users", p))[-1] for p in (0, 2)}
    assert STRING.deserialize(last[2].key) == "a" and last[2].timestamp >= before
    assert STRING.deserialize(last[0].key) == "b"
    assert write_topic(pairs, log, "users", key_col=None, value_serde=STRING) == 2
    keyless = [r for p in range(3) for r in log.read("users", p) if r.key is None]
    assert sorted(r.value for r in keyless) == [b"x", b"y"]
    assert settled(log, "users") and settled(log, WRITES_TOPIC)
    with pytest.raises(UnknownTopicError, match="'nope'"):
        write_topic(pairs, log, "nope")
    log.close()


@pytest.mark.kafka
def test_a_retried_spark_task_is_appended_once_on_kafka(kafka_url) -> None:
    """The first attempt commits but its report is lost; the retry appends nothing."""
    log = open_kafka(kafka_url)
    log.create_topic("t", 2)
    spec = _WriteSpec("t", 2, "call-1", "key", "value", None, marker_offsets(log))
    rows = [{"key": f"k{i}".encode(), "value": b"v%d" % i} for i in range(50)]
    bytes_ = Serdes.bytes()
    assert write_partition_once(log, spec, 0, iter(rows), bytes_, bytes_, None) == 50
    assert write_partition_once(log, spec, 0, iter(rows), bytes_, bytes_, None) == 50
    assert sorted(v for _, _, v, _ in kafka_rows(log, "t")) == sorted(r["value"] for r in rows)
    # Spark partition 1 of the same call is a write of its own
    assert write_partition_once(log, spec, 1, iter(rows[:3]), bytes_, bytes_, None) == 3
    assert len(kafka_rows(log, "t")) == 53
    log.close()


@pytest.mark.kafka
def test_a_zombie_spark_task_is_fenced_on_kafka(kafka_url) -> None:
    """An attempt still holding an open transaction when a retry of its Spark partition runs:
    the retry aborts it, and none of its records ever becomes visible."""
    log = open_kafka(kafka_url)
    log.create_topic("t", 2)
    spec = _WriteSpec("t", 2, "call-1", "key", "value", None, marker_offsets(log))
    bytes_ = Serdes.bytes()
    retry_rows = [{"key": f"k{i}".encode(), "value": b"retry%d" % i} for i in range(20)]
    retried: list[int] = []

    def zombie_rows() -> Iterator[dict[str, bytes]]:
        for i in range(25):
            yield {"key": f"k{i}".encode(), "value": b"zombie%d" % i}
        deadline = time.monotonic() + 10
        while all(log.high_watermark("t", p) == 0 for p in range(2)):  # wait for the broker
            assert time.monotonic() < deadline, "the zombie's records never reached the broker"
            time.sleep(0.01)
        assert not settled(log, "t")  # its transaction is open
        retried.append(write_partition_once(log, spec, 0, iter(retry_rows), bytes_, bytes_, None))
        for i in range(25, 50):
            yield {"key": f"k{i}".encode(), "value": b"zombie%d" % i}

    with pytest.raises(ProducerFencedError, match="write 'call-1-0' to topic 't'"):
        write_partition_once(log, spec, 0, zombie_rows(), bytes_, bytes_, None)
    assert retried == [20]
    assert sorted(v for _, _, v, _ in kafka_rows(log, "t")) == sorted(
        r["value"] for r in retry_rows
    )
    assert settled(log, "t") and settled(log, WRITES_TOPIC)
    log.close()


@pytest.mark.kafka
def test_a_failed_call_leaves_no_transaction_open_on_kafka(spark, kafka_url) -> None:
    """A Spark task dies with its transaction open; the call fails, and the driver aborts that
    transaction, so readers of the topic are not held up by it."""
    log = open_kafka(kafka_url)
    log.create_topic("t", 2)
    url = kafka_url

    def die_midway(key: Any, value: Any, n: int) -> int:
        if key == "die":  # once the records before it are in the open transaction: crash
            probe = open_log(url)
            while all(probe.high_watermark("t", p) == 0 for p in range(n)):
                time.sleep(0.01)
            os._exit(1)
        return 0

    rows = [(f"k{i}", "v") for i in range(30)] + [("die", "v")]
    df = spark.createDataFrame(rows, "key string, value string").coalesce(1)
    with pytest.raises(Exception, match=r"(?i)python worker|crash|exited"):
        write_topic(df, log, "t", key_serde=STRING, value_serde=STRING, partitioner=die_midway)
    assert log.high_watermark("t", 0) > 0  # the records were written, in a transaction ...
    assert settled(log, "t") and kafka_rows(log, "t") == []  # ... that was aborted
    log.close()
