"""Engine tests share one local SparkSession (starting one costs 10-30 s on 2 cores)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from streamtide.engine.interop import build_session

    session = build_session("local[2]", "streamtide-tests")
    yield session
    session.stop()


@pytest.fixture
def log_url(tmp_path) -> str:
    return f"file://{tmp_path / 'log'}"
