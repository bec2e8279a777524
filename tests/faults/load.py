"""A CPU hog for the fault runs: keeps the load average at a multiple of the cores while
drivers, work units and executors are killed, as on a machine shared with other work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: A process that only burns CPU (no I/O, no memory), until killed.
_SPIN = "while True:\n    pass\n"


@dataclass
class LoadSamples:
    """One-minute load averages seen while the hog ran (sampled every few seconds)."""

    target: float
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        ordered = sorted(self.samples)
        return ordered[len(ordered) // 2] if ordered else 0.0


@contextmanager
def cpu_hog(factor: float = 2.0, every_s: float = 5.0) -> Iterator[LoadSamples]:
    """Run ``factor`` x cores spinning processes (so the load average reaches about that
    multiple of the cores on top of the work under test) for the ``with`` block."""
    cores = os.cpu_count() or 1
    count = max(1, round(factor * cores))
    spinners = [
        subprocess.Popen([sys.executable, "-c", _SPIN], start_new_session=True)
        for _ in range(count)
    ]
    seen = LoadSamples(target=factor * cores)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every_s):
            seen.samples.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, name="load-sampler", daemon=True)
    sampler.start()
    try:
        yield seen
    finally:
        stop.set()
        for spinner in spinners:
            try:
                os.kill(spinner.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            spinner.wait()
