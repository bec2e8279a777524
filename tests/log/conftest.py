"""Fixtures for the log tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamtide.log import FileLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[FileLog]:
    handle = FileLog(str(tmp_path / "data"))
    yield handle
    handle.close()
