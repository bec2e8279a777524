"""Spark interop for users: read a topic's sealed records as a DataFrame."""

from __future__ import annotations

from typing import Any

from streamtide.engine.interop import build_session, spark_context
from streamtide.log import open_log
from streamtide.log.api import Log

__all__ = ["build_session", "read_topic"]

_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp long"


def read_topic(spark: Any, log: str | Log, topic: str) -> Any:
    """A DataFrame (key, value, topic, partition, offset, timestamp) of ``topic``.

    Only sealed (committed) records are included, so the result never shows output of a
    batch that has not committed.
    """
    spark_context(spark)
    log_ = open_log(log) if isinstance(log, str) else log
    rows = []
    for partition in range(log_.partitions(topic)):
        table = log_.read_table(topic, partition)
        columns = table.to_pydict()
        for key, value, offset, timestamp in zip(
            columns["key"], columns["value"], columns["offset"], columns["timestamp"]
        ):
            rows.append((key, value, topic, partition, offset, timestamp))
    return spark.createDataFrame(rows, _SCHEMA)
