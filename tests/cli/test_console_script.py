"""The ``streamtide`` console script as the README shows it, from a fresh venv, as subprocesses.

A new venv is created with this Python and the project installed from this checkout as
``./dev`` does; then a bash shell activates it, as the README says, and runs the README's
commands. Spark starts once, in ``streamtide run``. Where pip cannot reach the package index,
the test skips with pip's error.
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

ROOT = Path(__file__).resolve().parents[2]
MINUTE = 60_000

# What pip prints when it cannot reach an index (urllib3 and socket errors), as opposed to an
# install that fails for a reason of the project's own.
NETWORK_ERRORS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ProxyError",
    "Max retries exceeded",
)

APP = """
from datetime import timedelta
from streamtide import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows


def topology():
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(Serdes.string(), Serdes.json()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size(timedelta(minutes=1)))
        .count()
        .to_stream()
        .to("counts", Produced.with_(Serdes.time_windowed(Serdes.string(), 60_000), Serdes.long()))
    )
    return builder.build()
"""


def network_error(pip_output: str) -> str | None:
    """The first line of ``pip_output`` saying the index could not be reached, if any."""
    for line in pip_output.splitlines():
        if any(marker in line for marker in NETWORK_ERRORS):
            return line.strip()
    return None


def pip(python: Path, *args: str) -> None:
    """Run ``python -m pip ARGS`` in the checkout; skip if the index is out of reach."""
    result = subprocess.run(
        [str(python), "-m", "pip", *args], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    if result.returncode != 0:
        output = result.stdout + result.stderr
        reason = network_error(output)
        if reason is not None:
            pytest.skip(f"pip cannot reach the package index to install streamtide: {reason}")
        pytest.fail(f"pip {' '.join(args)} failed:\n{output}")


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the project installed from this checkout, the way ``./dev`` does."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip(python, "install", "--quiet", "--upgrade", "pip")
    pip(python, "install", "--quiet", "-e", ".[dev]")
    return venv


def sh(
    venv: Path, command: str, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a bash shell with ``venv`` activated, as the README says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "VIRTUAL_ENV"))}
    env["PYSPARK_PYTHON"] = str(venv / "bin" / "python")
    result = subprocess.run(
        ["bash", "-c", f"source {venv / 'bin' / 'activate'} && {command}"],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow
@pytest.mark.spark
def test_the_readme_commands_from_a_fresh_venv(fresh_venv: Path, tmp_path: Path) -> None:
    found = sh(fresh_venv, "command -v streamtide", tmp_path).stdout.strip()
    assert found == str(fresh_venv / "bin" / "streamtide")
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
    sh(fresh_venv, "streamtide topics create clicks --partitions 2 --log file://./data", tmp_path)
    sh(fresh_venv, "streamtide produce clicks --log file://./data", tmp_path, stdin=lines)
    ran = sh(
        fresh_venv,
        "streamtide run clickapp:topology --config clickstats.toml --until-caught-up",
        tmp_path,
    )
    assert "batch 0:" in ran.stdout
    consumed = sh(
        fresh_venv,
        "streamtide consume counts --log file://./data --from-beginning "
        "--key-format time-windowed-string --window-size 60000 --value-format long "
        "--timestamps iso",
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
        fresh_venv,
        "streamtide status --application-id clickstats --log file://./data --history 3",
        tmp_path,
    )
    assert "latest 3 batches" in status.stdout and "caught-up" in status.stdout
    assert "2026-01-05T" in status.stdout  # stream times in ISO


@pytest.mark.slow
def test_the_dev_passthrough() -> None:
    version = subprocess.run(
        [str(ROOT / "dev"), "streamtide", "--version"], capture_output=True, text=True, timeout=600
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("streamtide, version")


def test_only_network_failures_skip() -> None:
    unreachable = (
        "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None))"
        " after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection."
        "HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -2] Name"
        " or service not known')': /simple/setuptools/\n"
        "ERROR: No matching distribution found for setuptools>=68\n"
    )
    assert network_error(unreachable) is not None
    assert "NewConnectionError" in (network_error(unreachable) or "")
    missing = "ERROR: No matching distribution found for rocksdict>=99\n"
    assert network_error(missing) is None


@pytest.mark.slow
def test_dev_streamtide_runs_where_it_is_called(tmp_path: Path) -> None:
    """``./dev streamtide`` keeps the caller's directory: the user's modules import and
    relative --log paths are the user's (the venv is still the repository's)."""
    (tmp_path / "myapp.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "STREAMTIDE"))}

    def dev(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ROOT / "dev"), "streamtide", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    described = dev("describe", "myapp:topology")
    assert described.returncode == 0, described.stderr
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: [clicks])" in described.stdout
    created = dev("topics", "create", "clicks", "--log", "./data")
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "data" / "clicks").is_dir()
    assert not (ROOT / "data").exists()
    assert dev("topics", "list", "--log", "./data").stdout == "clicks\n"
