"""The random-kill harness: drivers and executors killed at random moments, outputs checked
against the test driver."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from streamtide.log import open_log
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import (
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)
from tests.faults.driver_process import ready_file
from tests.faults.load import cpu_hog

ROOT = Path(__file__).resolve().parents[2]
#: Share of driver kills timed from the moment the driver runs batches (the others from its
#: start, when it may still be starting Python: on a loaded machine that takes seconds).
WHILE_WORKING = 0.8


@dataclass
class KillRun:
    """What one run did and found."""

    driver_runs: int = 0
    driver_kills: int = 0
    group_kills: int = 0  # the driver killed together with its executor
    executor_kills: int = 0  # executors SIGKILLed by their driver at random moments
    commit_kills: int = 0  # executors that died inside (or right after) a Kafka commit
    load: float | None = None  # median one-minute load average during the run
    expected: int = 0
    lost: int = 0
    duplicated: int = 0
    seconds: float = 0.0


def final_counts(records: list[tuple]) -> dict:
    """The session table a stream of session-count updates leaves (tombstones delete)."""
    table: dict = {}
    for key, value, _ in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def run_with_kills(
    tmp: Path,
    *,
    events: int,
    driver_kills: int,
    executor_kill: float,
    seed: int,
    min_executor_kills: int = 0,
    max_wait: float = 2.5,
    execution: str = "micro_batch",
    kafka_url: str | None = None,
    guarantee: str = "exactly_once",
    load: float = 0.0,
    commit_kill: float = 0.0,
) -> KillRun:
    """Feed ``events`` in chunks while killing drivers at random moments (until ``driver_kills``
    drivers and ``min_executor_kills`` executors were killed); then let one driver finish and
    compare every output with the test driver's. With ``kafka_url`` the log is Kafka. Under
    ``at_least_once`` a retried run may process records a failed attempt already counted
    (its changelog and outputs stayed): every session of the test driver's final table must
    be there with at least its count (``lost`` counts those that are not); ``duplicated``
    counts the output records a run without failures would not have written. ``load``: a
    CPU hog keeps the load average at about that many times the cores meanwhile;
    ``commit_kill``: each task's Kafka commit kills its executor with this probability."""
    with cpu_hog(load) if load else nullcontext() as hog:
        run = _run_with_kills(
            tmp,
            events=events,
            driver_kills=driver_kills,
            executor_kill=executor_kill,
            seed=seed,
            min_executor_kills=min_executor_kills,
            max_wait=max_wait,
            execution=execution,
            kafka_url=kafka_url,
            guarantee=guarantee,
            commit_kill=commit_kill,
        )
    run.load = hog.median if hog is not None else None
    return run


def _run_with_kills(
    tmp: Path,
    *,
    events: int,
    driver_kills: int,
    executor_kill: float,
    seed: int,
    min_executor_kills: int,
    max_wait: float,
    execution: str,
    kafka_url: str | None,
    guarantee: str,
    commit_kill: float,
) -> KillRun:
    started = time.monotonic()
    rnd = random.Random(seed)
    log_url = kafka_url or f"file://{tmp / 'log'}"
    state = str(tmp / "state")
    # Kafka: consumer groups outlive a test's topics, so each run has its own application
    app = f"faults-{seed}-{execution}-{guarantee}" if kafka_url else "faults"
    kills_file = tmp / "kills"
    kills_file.touch()
    data = make_events(events, seed=seed)
    if kafka_url:  # Kafka stores timestamps from 1 ms on
        data = [(user, value, ts + 1_000_000) for user, value, ts in data]
    size = -(-len(data) // (driver_kills + 1))
    chunks = [data[i : i + size] for i in range(0, len(data), size)]
    fed: list = []
    run = KillRun()
    groups: list[int] = []

    def start(n: int) -> subprocess.Popen:
        run.driver_runs += 1
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.faults.driver_process", log_url, state),
                *(str(kills_file), f"--executor-kill={executor_kill}", f"--seed={seed * 1000 + n}"),
                f"--execution={execution}",
                f"--app={app}",
                f"--guarantee={guarantee}",
                f"--commit-kill={commit_kill}",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,  # its own process group: the driver and its executors
            stdout=subprocess.DEVNULL,
        )
        groups.append(process.pid)
        return process

    n = 0

    def executor_kills() -> int:  # by its driver, or inside a commit
        text = kills_file.read_text()
        return text.count("executor") + text.count("commit-")

    while run.driver_kills < driver_kills or executor_kills() < min_executor_kills:
        if chunks:
            chunk = chunks.pop(0)
            write_events(log_url, chunk)
            fed.extend(chunk)
        process = start(n)
        n += 1
        if rnd.random() < WHILE_WORKING:
            _wait_until_ready(process, ready_file(kills_file, process.pid))
        time.sleep(rnd.uniform(0.3, max_wait))
        if process.poll() is None:
            if rnd.random() < 0.3:
                os.killpg(process.pid, signal.SIGKILL)  # a lost machine: executors too
                run.group_kills += 1
            else:
                process.send_signal(signal.SIGKILL)  # its executor may live on, a zombie
            run.driver_kills += 1
        process.wait()
    for chunk in chunks:
        write_events(log_url, chunk)
        fed.extend(chunk)
    final = start(n)
    assert final.wait(timeout=900) == 0, "the last driver did not finish"
    for pid in groups:  # zombies of killed drivers may still be writing: end them
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run.commit_kills = kills_file.read_text().count("commit-")
    run.executor_kills = kills_file.read_text().count("executor")
    expected = expected_outputs("session", fed)
    got = engine_outputs(log_url, "session")
    differing: list[str] = []
    for partition, records in expected.items():
        run.expected += len(records)
        if guarantee == "exactly_once":
            want, have = Counter(records), Counter(got.get(partition, []))
            run.lost += sum((want - have).values())
            run.duplicated += sum((have - want).values())
            if got.get(partition) != records:
                differing.append(
                    f"{partition}: {_first_difference(records, got.get(partition, []))}"
                )
        else:  # a repeated run counts its records again: counts may be higher, never lower
            final, reached = final_counts(records), final_counts(got.get(partition, []))
            run.lost += sum(1 for k, n in final.items() if reached.get(k, 0) < n)
            run.duplicated += sum((Counter(got.get(partition, [])) - Counter(records)).values())
    assert not differing, f"partitions {differing} differ from the test driver's: {run}"
    config = engine_config(log_url, state, app=app, processing_guarantee=guarantee)
    log = open_log(log_url, **config.log_options)
    held = sum(log.end_offset("events", p) for p in range(2))
    assert held == len(fed), f"the input holds {held} records, {len(fed)} were written"
    LocalDriver(session_topology(), config)  # a restart
    if kafka_url:  # no transaction of a killed attempt stays open: readers see every record
        open_ones = [
            (topic, p)
            for topic in log.list_topics()
            for p in range(log.partitions(topic))
            if log.end_offset(topic, p) != log.high_watermark(topic, p)
        ]
        assert open_ones == [], f"transactions left open on {open_ones}"
    else:
        leftovers = [
            ref.name
            for topic in log.list_topics()
            for p in range(log.partitions(topic))
            for ref in log.list_unsealed(topic, p)
        ]
        assert leftovers == [], f"unsealed segments of losing attempts remain: {leftovers}"
    run.seconds = round(time.monotonic() - started, 1)
    return run


def _first_difference(want: list[tuple], got: list[tuple]) -> str:
    """Where two output partitions part, with the records around it."""
    at = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return f"from record {at}: expected {want[at : at + 3]}, got {got[at : at + 3]}"


def _wait_until_ready(process: subprocess.Popen, ready: Path, timeout_s: float = 300.0) -> None:
    """Wait until a driver runs batches (it created ``ready``) or ended."""
    deadline = time.monotonic() + timeout_s
    while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
