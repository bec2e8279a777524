"""Spark interop for users: read a topic's sealed records as a DataFrame."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamtide.engine.interop import build_session, spark_context
from streamtide.log import open_log
from streamtide.log.api import Log

__all__ = ["build_session", "read_topic"]

_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp long"


def read_topic(
    spark: Any, log: str | Log, topic: str, *, log_options: Mapping[str, Any] | None = None
) -> Any:
    """A DataFrame (key, value, topic, partition, offset, timestamp) of ``topic``.

    Only sealed (committed) records are included, so the result never shows output of a
    batch that has not committed (on Kafka: records of committed transactions only).
    ``log`` is a log or its URL (``file://`` or ``kafka://``); ``log_options`` are passed to
    ``open_log`` with a URL (Kafka client settings, as ``StreamsConfig.log_options``).
    """
    spark_context(spark)
    log_ = open_log(log, **dict(log_options or {})) if isinstance(log, str) else log
    rows = []
    try:
        for partition in range(log_.partitions(topic)):
            # From the first readable offset: purged or retention-trimmed records are gone.
            start = log_.begin_offset(topic, partition)
            columns = log_.read_table(topic, partition, start).to_pydict()
            for key, value, offset, timestamp in zip(
                columns["key"], columns["value"], columns["offset"], columns["timestamp"]
            ):
                rows.append((key, value, topic, partition, offset, timestamp))
    finally:
        if log_ is not log:
            log_.close()
    return spark.createDataFrame(rows, _SCHEMA)
