"""The reported application on real Spark executors while things die at random moments:
executor JVMs (a ``local-cluster``), Python workers (work units), and drivers (alone, or with
their JVM and its cluster), with input arriving meanwhile. Then one driver runs to the end and
a plain consumer at read_committed (Kafka) or the log (file) must hold every output exactly
once, equal to the test driver's."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.faults.spark_kills import (
    ROOT,
    child_env,
    clicks,
    compare,
    end_groups,
    expected,
    read_all,
    write_clicks,
)

#: How long a driver may take to start its work units before its life is counted anyway.
STARTUP_S = 300


@dataclass
class ChaosRun:
    """Kills by kind, and what the final outputs held."""

    driver_kills: int = 0
    group_kills: int = 0  # the driver with its JVM (and the cluster inside it)
    executor_kills: int = 0  # executor JVMs
    worker_kills: int = 0  # Python workers (work units)
    driver_runs: int = 0
    expected: int = 0
    lost: int = 0
    duplicated: int = 0
    sessions_differing: int = 0
    seconds: float = 0.0


def processes() -> dict[int, tuple[int, str]]:
    """Every process: ``pid -> (parent pid, command line)``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry)] = (parent, command)
    return found


def descendants(root: int) -> dict[int, str]:
    """The processes below ``root``: ``pid -> command line``."""
    table = processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = table[pid][1]
        todo.extend(children.get(pid, []))
    return found


def executor_jvms(driver: int) -> list[int]:
    return [p for p, cmd in descendants(driver).items() if "CoarseGrainedExecutorBackend" in cmd]


def python_workers(driver: int) -> list[int]:
    """Forked Python workers (children of a ``pyspark.daemon``): the work units."""
    below = descendants(driver)
    table = processes()
    return [
        pid
        for pid, cmd in below.items()
        if "pyspark.daemon" in cmd and "pyspark.daemon" in table.get(table[pid][0], (0, ""))[1]
    ]


def runs_work_units(driver: int) -> bool:
    """Whether the driver's executors started Python (a ``pyspark.daemon``): it runs its
    application. On a loaded machine starting Spark takes a minute or more, and kills timed
    from the driver's start alone mostly hit a driver that had not done anything yet."""
    return any("pyspark.daemon" in cmd for cmd in descendants(driver).values())


def kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def progress(run: ChaosRun, started: float, killed: str) -> None:
    """A line per kill, so that a long run shows how far it got (``./dev faults`` runs with
    ``-s``)."""
    print(
        f"[{time.monotonic() - started:7.0f} s] killed {killed}: {run.driver_kills} drivers "
        f"({run.group_kills} with their JVM), {run.executor_kills} executor JVMs, "
        f"{run.worker_kills} Python workers, {run.driver_runs} driver runs",
        flush=True,
    )


def run_spark_chaos(
    tmp: Path,
    log_url: str,
    *,
    seed: int,
    execution: str = "continuous",
    app: str | None = None,
    driver_kills: int = 6,
    executor_kills: int = 20,
    worker_kills: int = 10,
    users: int = 60,
    executors: int = 2,
) -> ChaosRun:
    """Feed the clickstream in chunks while killing executor JVMs and Python workers every
    few seconds and, now and then, the driver; until the wanted kills happened. Each driver
    lives 40-90 s from when it runs its work units (``STARTUP_S`` at the most before that)."""
    started = time.monotonic()
    rnd = random.Random(seed)
    app = app or f"chaos-{seed}-{execution}"
    events = clicks(users, seed)
    size = -(-len(events) // (driver_kills + 1))
    chunks = [events[i : i + size] for i in range(0, len(events), size)]
    state = str(tmp / "state")
    logs = tmp / "drivers"
    logs.mkdir(parents=True, exist_ok=True)
    master = f"local-cluster[{executors},1,1024]"
    run = ChaosRun()
    fed: list = []

    def start(forever: bool) -> subprocess.Popen:
        run.driver_runs += 1
        args = [sys.executable, "-m", "tests.faults.spark_app", log_url, state, app, execution]
        with open(logs / f"driver-{run.driver_runs}.log", "wb") as out:
            return subprocess.Popen(
                [*args, master, *(["--forever"] if forever else [])],
                cwd=ROOT,
                env=child_env(),
                start_new_session=True,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    groups = []
    while (
        run.driver_kills < driver_kills
        or run.executor_kills < executor_kills
        or run.worker_kills < worker_kills
    ):
        if chunks:
            chunk = chunks.pop(0)
            write_clicks(log_url, chunk)
            fed.extend(chunk)
        driver = start(forever=True)
        groups.append(driver.pid)
        life = rnd.uniform(40, 90)  # counted from when the driver runs its work units
        begun, running = time.monotonic(), None
        while driver.poll() is None:
            now = time.monotonic()
            if running is None and (runs_work_units(driver.pid) or now - begun > STARTUP_S):
                running = now
            if running is not None and now - running >= life:
                break
            time.sleep(rnd.uniform(3, 10))
            if running is None:
                continue  # a driver still starting has nothing to lose yet
            jvms, workers = executor_jvms(driver.pid), python_workers(driver.pid)
            if rnd.random() < 0.6 and jvms and run.executor_kills < executor_kills:
                run.executor_kills += kill(rnd.choice(jvms))
                progress(run, started, "an executor JVM")
            elif workers:
                run.worker_kills += kill(rnd.choice(workers))
                progress(run, started, "a Python worker")
        if driver.poll() is None:
            if rnd.random() < 0.4:
                os.killpg(driver.pid, signal.SIGKILL)
                run.group_kills += 1
            else:
                driver.send_signal(signal.SIGKILL)
            run.driver_kills += 1
            progress(run, started, "the driver")
        driver.wait()
    for chunk in chunks:
        write_clicks(log_url, chunk)
        fed.extend(chunk)
    final = start(forever=False)
    groups.append(final.pid)
    code = final.wait(timeout=1800)
    end_groups(groups)
    assert code == 0, f"the last driver failed: see {logs / f'driver-{run.driver_runs}.log'}"
    counts = compare(expected(fed), read_all(log_url))
    run.expected, run.lost, run.duplicated, run.sessions_differing = counts
    run.seconds = round(time.monotonic() - started, 1)
    return run
