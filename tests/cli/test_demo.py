"""``streamtide demo`` as a newcomer runs it: the command it prints to inspect the result runs
as printed (one line, with the formats the demo wrote) and decodes the session windows right;
the batch table's "records processed" is explained; the README's quick-start commands work
on the demo's log."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.installed import STREAMTIDE, command_env, streamtide
from tests.readme import ROOT, commands

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PREFIX = "Inspect it yourself: "


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = command_env(PATH=f"{STREAMTIDE.parent}:{command_env()['PATH']}")
    result = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def test_the_demo_output_can_be_followed_as_printed(tmp_path: Path) -> None:
    demo = streamtide("demo", "--users", "4", "--dir", "streamtide-demo", cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    text = " ".join(demo.stdout.split())
    assert "check: every unique click is counted exactly once" in text
    # Spark's start-up notices that need no action stay out of the demo's output
    for notice in ("log4j profile", "NativeCodeLoader", "resolves to a loopback address"):
        assert notice not in demo.stderr, demo.stderr
    # the clicks are from 2026, and the summary shows clock minutes
    assert re.search(r"\b09:\d\d\b", demo.stdout), demo.stdout
    clicks = int(re.search(r"(\d+) clicks in, (\d+) unique", text)[1])  # type: ignore[index]
    unique = int(re.search(r"(\d+) clicks in, (\d+) unique", text)[2])  # type: ignore[index]
    explained = re.search(
        r"records processed: (\d+) = the (\d+) clicks read from clicks and (\d+) records read "
        r"back from the repartition topics",
        text,
    )
    assert explained, text
    total, read, repartitioned = map(int, explained.groups())
    assert read == clicks and total == read + repartitioned
    assert repartitioned == clicks + unique  # by event id (all), then by user (unique ones)

    lines = demo.stdout.splitlines()
    (line,) = [x for x in lines if x.startswith(PREFIX)]
    # the tests' PATH does not hold the venv, as a shell after ./dev demo does not
    assert lines[lines.index(line) + 1] == (
        f"(streamtide is not on your PATH: run `source {STREAMTIDE.parent.parent}/bin/activate` "
        "first, or run the command as ./dev streamtide consume ... in the repository)"
    )
    command = line[len(PREFIX) :]  # the whole command on its one line
    assert command.startswith("streamtide consume session-counts --log ")
    consumed = [json.loads(x) for x in _shell(command, tmp_path).stdout.splitlines()]
    assert len(consumed) == 5
    for record in consumed:
        user, _, window = record["key"].partition("@")
        start, end = window.strip("[)").split(",")
        assert re.fullmatch(r"user-\d\d", user) and start <= end, record
        assert start.startswith("2026-01-05T"), record
        assert record["value"] is None or record["value"] >= 1

    # the quick start's commands, ./dev included, from the directory the demo ran in
    quick = commands("## Quick start")
    assert quick == [
        "./dev streamtide --help",
        "streamtide topics list --log ./streamtide-demo/log",
    ]
    assert "Usage: streamtide" in _shell(f"{ROOT}/dev streamtide --help", tmp_path).stdout
    listed = _shell(quick[1], tmp_path).stdout.split()
    assert {"clicks", "session-counts", "minute-summary"} <= set(listed)
