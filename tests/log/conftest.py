"""Fixtures for the log tests: the file log, and every log kind for the contract tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamtide.log import FileLog, Log, open_log
from tests.kafka_broker import KAFKA_TEST_OPTIONS


@pytest.fixture
def log(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[FileLog]:
    """A file log; in modules that set ``PER_PARTITION_LAYOUT = True`` its topics have the
    per-partition manifest layout of earlier releases (whose entry files they check)."""
    grouped = not getattr(request.module, "PER_PARTITION_LAYOUT", False)
    handle = FileLog(str(tmp_path / "data"), grouped_manifests=grouped)
    yield handle
    handle.close()


@pytest.fixture(params=["file", pytest.param("kafka", marks=pytest.mark.kafka)])
def open_any(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Log]]:
    """Opens handles on one empty log of each kind (file, then Kafka on the test broker);
    every handle is closed after the test."""
    if request.param == "kafka":
        url, options = request.getfixturevalue("kafka_url"), KAFKA_TEST_OPTIONS
    else:
        url, options = f"file://{tmp_path / 'data'}", {}
    handles: list[Log] = []

    def open_() -> Log:
        handles.append(open_log(url, **options))
        return handles[-1]

    yield open_
    for handle in handles:
        handle.close()


@pytest.fixture
def any_log(open_any: Callable[[], Log]) -> Log:
    """One handle on an empty log of each kind."""
    return open_any()
