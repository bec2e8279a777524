"""Fixtures for the CLI tests: a runner and a log directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def log_url(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'data'}"
