"""Spark interop for users: topics as DataFrames, and the session Streamtide needs.

``read_topic`` reads a topic's committed records on the executors, one Spark partition per
log partition; ``write_topic`` appends a DataFrame to a topic exactly once per call. See
``streamtide.engine.dataframes``.
"""

from __future__ import annotations

from streamtide.engine.dataframes import read_topic, write_topic
from streamtide.engine.interop import build_session

__all__ = ["build_session", "read_topic", "write_topic"]
