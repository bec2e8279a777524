"""The README's command-line section runs as written: every ``streamtide`` command of its bash
block, in order, with the installed command, in a fresh directory holding what the README says
it holds (``myapp.py`` with the first example's topology, ``events.jsonl`` written by the
README's own command, and the README's ``clickstats.toml`` with a free metrics port). ``run``
runs until its first batch is committed and is then stopped with Ctrl-C, which must print one
line."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli.installed import STREAMTIDE, Running, command_env
from tests.readme import blocks, commands

pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = 1_767_607_200_000  # 2026-01-05T10:00:00Z
USERS = ("alice", "bob", "carol")
CLICKS_PER_USER = 10
STOP_LINE = re.compile(r"^stopping \(Ctrl-C\) \.\.\. stopped after batch \d+$")
STANDBY_NOTE = "num_standby_replicas=1, but the application has one executor (driver)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _first_example_topology() -> str:
    """The tour's first example up to ``topology = builder.build()`` (the README's myapp.py)."""
    first = blocks("## A tour", "python")[0]
    return first[
        : first.index("topology = builder.build()\n") + len("topology = builder.build()\n")
    ]


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = command_env(PATH=f"{STREAMTIDE.parent}:{command_env()['PATH']}")
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_command_line_section_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(_first_example_topology())
    port = _free_port()
    (toml,) = blocks("### The log and the command line", "toml")
    assert "metrics_port = 9464" in toml
    (tmp_path / "clickstats.toml").write_text(toml.replace("9464", str(port)))
    (generate,) = [
        line
        for block in blocks("### The log and the command line", "bash")
        for line in block.splitlines()
        if line.startswith("python3 -c")
    ]
    assert _shell(generate, tmp_path).returncode == 0, generate
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events == [
        {"key": user, "value": {"page": "/"}, "timestamp": T0 + (n * 3 + u) * 20_000}
        for n in range(CLICKS_PER_USER)
        for u, user in enumerate(USERS)
    ]
    steps = commands("### The log and the command line")
    assert [c.split()[1] for c in steps] == [
        "topics", "produce", "run", "consume", "status", "describe",
    ]  # fmt: skip
    results = {}
    for command in steps:
        if command.split()[1] == "run":
            _run_then_ctrl_c(command, tmp_path, port)
            continue
        result = _shell(command, tmp_path)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        results[command.split()[1]] = result

    # the session counts read back with the README's formats: one session per user
    lines = [json.loads(line) for line in results["consume"].stdout.splitlines()]
    latest = {}
    for line in lines:
        user, _, window = line["key"].partition("@")
        start, end = window.strip("[)").split(",")
        assert start <= end, line
        latest[user] = (start, end, line["value"])
    assert set(latest) == set(USERS)
    assert all(count == CLICKS_PER_USER for *_, count in latest.values())
    assert latest["alice"][0] == "2026-01-05T10:00:00.000Z"
    assert latest["carol"][1].startswith("2026-01-05T10:09:40")  # the last click
    # status says why there is no standby, and the mermaid chart is one
    assert STANDBY_NOTE in " ".join(results["status"].stdout.split())
    assert re.search(r"latest \d+ batches", results["status"].stdout)
    assert results["describe"].stdout.startswith("flowchart")


def _run_then_ctrl_c(command: str, cwd: Path, port: int) -> None:
    """``command`` (``streamtide run``) until its first batch is committed, then Ctrl-C: one
    line, exit status 130."""
    env = command_env(PATH=f"{STREAMTIDE.parent}:{command_env()['PATH']}")
    running = Running(["bash", "-c", f"exec {command}"], cwd, env)
    try:
        seen = running.wait_for("clickstats batch 0:", timeout=300)
        before = "\n".join(running.lines[:seen])
        assert f"metrics: http://127.0.0.1:{port}/metrics" in before
        assert STANDBY_NOTE in before  # said when the application starts
        running.ctrl_c()
        status = running.finish(timeout=120)
        after = [line for line in running.lines[seen:] if line.strip()]
        assert status == 130, running.lines[-40:]
        assert len(after) == 1 and STOP_LINE.match(after[0]), after
    finally:
        running.close()
