"""The machine's load average at the start of a run, recorded with its results.

Figures for the README need a quiet machine (load average below 2 at the start); a run on a
busier one still measures ratios against baselines taken in the same run, but says so loudly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: At or above this 1-minute load average a run's absolute figures are not results.
BUSY = 2.0


@dataclass(frozen=True)
class LoadAtStart:
    """The 1, 5 and 15-minute load averages when the run began, and the machine's cores."""

    averages: tuple[float, float, float]
    cpus: int

    @property
    def busy(self) -> bool:
        return self.averages[0] >= BUSY

    def describe(self) -> str:
        one, five, fifteen = self.averages
        text = f"load average at start: {one:.2f}, {five:.2f}, {fifteen:.2f} ({self.cpus} cores)"
        if self.busy:
            text += (
                f"  WARNING: load >= {BUSY:g}: the machine is busy; ratios against baselines "
                "of this run still hold, the absolute figures are not results"
            )
        return text

    def as_json(self) -> dict[str, Any]:
        return {"load_average": list(self.averages), "cpus": self.cpus, "busy": self.busy}


def load_at_start() -> LoadAtStart:
    """The load averages now (zeros where the platform has none)."""
    try:
        averages = os.getloadavg()
    except OSError:
        averages = (0.0, 0.0, 0.0)
    return LoadAtStart(tuple(round(a, 2) for a in averages), os.cpu_count() or 1)  # type: ignore[arg-type]


def load_line(console: Any = None) -> LoadAtStart:
    """Take the load at the start of a run and print it (on ``console``, a rich Console, or
    stdout), with a loud warning when the machine is busy."""
    load = load_at_start()
    text = load.describe()
    if console is None:
        print(("\n!!! " + text + "\n") if load.busy else text, flush=True)
    else:
        style = "bold red" if load.busy else "dim"
        console.print(f"[{style}]{text}[/]", highlight=False)
    return load


def tree_cpu_seconds(root: int) -> float:
    """User and system CPU seconds of process ``root`` and all its live descendants (its
    JVM and Spark's Python workers included; Linux ``/proc``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        used[pid] = (int(stat[11]) + int(stat[12])) / ticks
        children.setdefault(int(stat[1]), []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total
