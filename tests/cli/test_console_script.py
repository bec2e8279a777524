"""The ``streamtide`` console script as the README shows it, run as subprocesses.

Uses the console script installed in the project's venv (the one running the tests) instead of
building a fresh venv, and starts Spark once, in ``streamtide run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from streamtide.cli.formats import iso

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
MINUTE = 60_000

APP = """
from datetime import timedelta
from streamtide import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows

LONG = getattr(Serdes, "long", Serdes.int)()  # the 8-byte big-endian serde


def topology():
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(Serdes.string(), Serdes.json()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size(timedelta(minutes=1)))
        .count()
        .to_stream()
        .to("counts", Produced.with_(Serdes.windowed(Serdes.string()), LONG))
    )
    return builder.build()
"""


def sh(command: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` in bash with the venv activated, as the README says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    result = subprocess.run(
        ["bash", "-c", f"source {VENV_BIN / 'activate'} && {command}"],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def test_the_readme_commands_from_a_shell(tmp_path: Path) -> None:
    assert (VENV_BIN / "streamtide").exists(), "install the project (./dev test does)"
    (tmp_path / "clickapp.py").write_text(APP)
    (tmp_path / "clickstats.toml").write_text(
        'application_id = "clickstats"\n'
        'log = "file://./data"\n'
        'state_dir = "./state"\n'
        "max_records_per_batch = 10\n"
        "adaptive_batch_size = false\n"
        'master = "local[1]"\n'
    )
    events = [(f"user-{i % 3}", {"n": i}, 1_767_607_200_000 + i * 7_000) for i in range(60)]
    lines = "\n".join(
        json.dumps({"key": user, "value": value, "timestamp": ts}) for user, value, ts in events
    )
    sh("streamtide topics create clicks --partitions 2 --log file://./data", tmp_path)
    sh("streamtide produce clicks --log file://./data", tmp_path, stdin=lines)
    ran = sh(
        "streamtide run clickapp:topology --config clickstats.toml --until-caught-up", tmp_path
    )
    assert "batch 0:" in ran.stdout
    consumed = sh(
        "streamtide consume counts --log file://./data --from-beginning "
        "--key-format windowed-string --value-format long --timestamps iso",
        tmp_path,
    )
    latest = {}
    for line in consumed.stdout.splitlines():
        record = json.loads(line)
        assert record["timestamp"].endswith("Z")
        latest[record["key"]] = record["value"]
    expected = Counter(
        f"{user}@[{iso(ts - ts % MINUTE)},{iso(ts - ts % MINUTE + MINUTE)})"
        for user, _, ts in events
    )
    assert latest == dict(expected)
    status = sh(
        "streamtide status --application-id clickstats --log file://./data --history 3", tmp_path
    )
    assert "latest 3 batches" in status.stdout and "caught-up" in status.stdout
    assert "2026-01-05T" in status.stdout  # stream times in ISO
    version = subprocess.run(
        [str(ROOT / "dev"), "streamtide", "--version"], capture_output=True, text=True, timeout=300
    )
    assert version.returncode == 0 and version.stdout.startswith("streamtide, version")
