"""Topics as DataFrames: read on the executors, written exactly once per call."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from streamtide import Serdes
from streamtide.engine.dataframes import _WriteSpec, seal_written, write_partition
from streamtide.errors import ConfigError
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.spark import read_topic, write_topic

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
    spec = _WriteSpec("t", 2, "write_topic/call-1/", "key", "value", None)
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
