"""Run a cluster scenario script in a process of its own (one SparkContext per process) and
read the ``RESULT <json>`` line it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_scenario(script: Path, workdir: Path, timeout: float) -> dict[str, Any]:
    """The scenario's result; fails the test with its output when it printed none."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    run = subprocess.run(
        [sys.executable, str(script), str(workdir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"scenario failed:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    return dict(json.loads(lines[-1][len("RESULT ") :]))
