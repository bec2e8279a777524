"""Spark's own streaming operators on the same events: Structured Streaming over the Parquet
copy of the input (one file per micro-batch), ``trigger(availableNow=True)``, a noop sink."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.workload import Workload

SCHEMA = "key STRING, id BIGINT, page STRING, ts TIMESTAMP"
PIPELINE_SCHEMA = "key STRING, id BIGINT, page STRING, kind STRING, amount DOUBLE, ts TIMESTAMP"
#: Output mode per query (append: the default).
OUTPUT_MODES = {"pipeline": "update"}

NOTES = {
    "dedup": (
        "dropDuplicatesWithinWatermark on {cols}, watermark delay {delay} ms: a copy is dropped "
        "while the first copy's state lives (until the watermark passes its time + delay); the "
        "watermark moves only between micro-batches, so within one micro-batch every later copy "
        "of a {what} is dropped whatever its event time; records older than the watermark are "
        "DROPPED (Streamtide forwards them without remembering them). Streamtide checks "
        "[t - interval, t + interval] against entries expired by per-record stream time."
    ),
    "session-count": (
        "groupBy(key, session_window(ts, {gap} ms)).count(), append mode, watermark delay "
        "{delay} ms: each session is emitted once, when the watermark closes it (sessions "
        "still open at the end are never emitted) and records older than the watermark are "
        "dropped. Streamtide emits every update (tombstones for merged sessions, then the "
        "merged count), collapsed per key by the record cache at each commit, and merges late "
        "records into sessions kept for the 1-day retention."
    ),
    "stream-table-join": (
        "a stream-static join: the streaming events joined on key with a static DataFrame of "
        "the same users table (one Parquet file), inner; Spark keeps no state for it and "
        "reads the static side again in every micro-batch ({keys:,} rows, broadcast)."
    ),
    "pipeline": (
        "one query: filter(kind != bot), withColumn(cents), a stream-static join with the "
        "users table, groupBy(window(ts, 60 s), page).count() in update mode (watermark delay "
        "10 s, Streamtide's grace); Spark has no second output or per-key counter in the same "
        "query (each would be a query of its own, reading the input again), so it does less "
        "work than Streamtide's pipeline."
    ),
    "punctuation": (
        "N/A: Structured Streaming has no stream-time punctuator over a key-value store (the "
        "nearest thing is per-key timers in transformWithState/applyInPandasWithState)."
    ),
}


@dataclass
class NativeRun:
    """One query's wall time and its micro-batch progress reports."""

    operation: str
    seconds: float
    progress: list[dict[str, Any]] = field(default_factory=list)

    provider: str | None = None

    @property
    def data_batches(self) -> list[dict[str, Any]]:
        return [p for p in self.progress if p.get("numInputRows", 0) > 0]

    @property
    def input_records(self) -> int:
        return sum(p.get("numInputRows", 0) for p in self.progress)

    @property
    def output_records(self) -> int | None:
        counts = [p.get("sink", {}).get("numOutputRows", -1) for p in self.progress]
        return None if any(c < 0 for c in counts) else sum(counts)

    @property
    def batch_ms(self) -> list[float]:
        """triggerExecution of every micro-batch that read input."""
        return [float(p["durationMs"]["triggerExecution"]) for p in self.data_batches]


def note(operation: str, w: Workload, provider: str | None = None) -> str:
    """How Spark's ``operation`` differs from Streamtide's; ``provider``: its state store."""
    cols = "[key]" if w.dedup_on == "key" else "[key, id]"
    what = "key" if w.dedup_on == "key" else "key and id"
    text = NOTES[operation].format(
        cols=cols,
        what=what,
        delay=watermark_ms(operation, w),
        gap=w.session_gap_ms,
        keys=w.keys,
    )
    if provider:
        text += f" Spark reads typed Parquet columns (no JSON parsing); state store: {provider}."
    return text


def users_parquet(source: Path) -> Path:
    """Where the users table's Parquet file lies, next to the events' directory."""
    return source.parent / "users.parquet"


def pipeline_parquet(source: Path) -> Path:
    """Where the pipeline's events (with page, kind and amount) lie, next to the events'."""
    return source.parent / "parquet-pipeline"


def watermark_ms(operation: str, w: Workload) -> int:
    """The watermark delay: the dedup interval (for sessions too, so both tolerate the same
    out-of-order window)."""
    return w.dedup_interval_ms


def build_query(spark: Any, source: Path, operation: str, w: Workload) -> Any:
    """The streaming DataFrame of ``operation`` over the Parquet files in ``source`` (the
    users table, for the join, in ``users.parquet`` next to it)."""
    from pyspark.sql import functions as F

    pipeline = operation == "pipeline"
    events = (
        spark.readStream.schema(PIPELINE_SCHEMA if pipeline else SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(pipeline_parquet(source) if pipeline else source))
        .withWatermark("ts", f"{watermark_ms(operation, w)} milliseconds")
    )
    if operation == "dedup":
        cols = ["key"] if w.dedup_on == "key" else ["key", "id"]
        return events.dropDuplicatesWithinWatermark(cols)
    if operation == "stream-table-join":
        users = spark.read.parquet(str(users_parquet(source)))
        return events.join(users, "key")
    if pipeline:
        users = spark.read.parquet(str(users_parquet(source)))
        return (
            events.filter(F.col("kind") != "bot")
            .withColumn("cents", F.round(F.col("amount") * 100).cast("long"))
            .join(users, "key")
            .groupBy(F.window("ts", "60 seconds"), "page")
            .count()
        )
    if operation == "session-count":
        window = F.session_window("ts", f"{w.session_gap_ms} milliseconds")
        return events.groupBy("key", window).count()
    raise ValueError(f"no Spark-native query for {operation!r}")


def run_query(spark: Any, source: Path, checkpoint: Path, operation: str, w: Workload) -> NativeRun:
    """Run ``operation`` until every file is consumed; the clock starts before ``start()``."""
    previous = {
        k: spark.conf.get(k)
        for k in ("spark.sql.shuffle.partitions", "spark.sql.streaming.numRecentProgressUpdates")
    }
    spark.conf.set("spark.sql.shuffle.partitions", str(w.partitions))
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    try:
        started = time.perf_counter()
        query = (
            build_query(spark, source, operation, w)
            .writeStream.format("noop")
            .outputMode(OUTPUT_MODES.get(operation, "append"))
            .option("checkpointLocation", str(checkpoint / operation))
            .queryName(f"bench_{operation.replace('-', '_')}")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - started
        provider = str(spark.conf.get("spark.sql.streaming.stateStore.providerClass"))
        short = provider.rsplit(".", 1)[-1]
        return NativeRun(operation, seconds, list(query.recentProgress), short)
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)
