"""The reported scenario as a fault run: a real Spark driver process of the dedup-and-sessions
application (``tests.faults.spark_app``) SIGKILLed once at least 20 of its outputs are
committed, then restarted with the same ``application_id`` and ``state_dir``; a plain
confluent-kafka consumer at read_committed must then find every output exactly once, equal
to the test driver's, record for record."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from streamtide import StreamsConfig
from streamtide.cli.demo_app import generate_clicks
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import log_options_for, read_outputs
from tests.faults.spark_app import (
    CLICKS,
    JSON,
    LONG,
    PARTITIONS,
    SESSION_KEY,
    SESSIONS,
    STRING,
    UNIQUE,
    dedup_and_sessions,
)

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class SparkKillRun:
    """What one run of the scenario did and found."""

    kills: int = 0
    group_kills: int = 0  # the driver's whole process group (its JVM too) at once
    killed_at_outputs: list[int] = field(default_factory=list)
    expected: int = 0
    lost: int = 0
    duplicated: int = 0
    sessions_differing: int = 0
    seconds: float = 0.0


def clicks(users: int, seed: int) -> list[tuple[str, dict, int]]:
    """The demo's clickstream (resends, sessions), timestamped from 1 s on (Kafka has no
    timestamp 0)."""
    return [(u, e, e["ts"] + 1_000) for u, e in generate_clicks(users=users, seed=seed)]


def write_clicks(log_url: str, events: list[tuple[str, dict, int]]) -> None:
    log = open_log(log_url, **log_options_for(log_url))
    log.create_topic(CLICKS, PARTITIONS, exist_ok=True)
    rows: dict[int, list[LogRecord]] = {p: [] for p in range(PARTITIONS)}
    for user, event, ts in events:
        key = STRING.serialize(user)
        rows[partition_for_key(key, PARTITIONS)].append(LogRecord(key, JSON.serialize(event), ts))
    for partition, records in rows.items():
        log.append(CLICKS, partition, records)
    log.close()


def expected(events: list[tuple[str, dict, int]]) -> dict[str, dict[int, list[tuple]]]:
    """The test driver's outputs per topic and partition (one driver per input partition: a
    task sees exactly one)."""
    found: dict[str, dict[int, list[tuple]]] = {UNIQUE: {}, SESSIONS: {}}
    for partition in range(PARTITIONS):
        config = StreamsConfig(application_id="expected")
        with TopologyTestDriver(dedup_and_sessions(), config) as driver:
            inp = driver.create_input_topic(CLICKS, STRING, JSON)
            for user, event, ts in events:
                if partition_for_key(STRING.serialize(user), PARTITIONS) == partition:
                    inp.pipe_input(user, event, timestamp=ts)
            for topic, key_serde, value_serde in (
                (UNIQUE, STRING, JSON),
                (SESSIONS, SESSION_KEY, LONG),
            ):
                out = driver.create_output_topic(topic, key_serde, value_serde)
                found[topic][partition] = [
                    (r.key, r.value, r.timestamp) for r in out.read_records()
                ]
    return found


def committed_outputs(log_url: str) -> int:
    """How many outputs a read_committed consumer sees now (both topics)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": log_url.partition("://")[2],
            "group.id": "streamtide-fault-watch",
            "isolation.level": "read_committed",
        }
    )
    try:
        total = 0
        for topic in (UNIQUE, SESSIONS):
            for p in range(PARTITIONS):
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                except Exception:  # not created yet
                    continue
                total += high - low
        return total
    finally:
        consumer.close()


def read_all(log_url: str) -> dict[str, dict[int, list[tuple]]]:
    """Both output topics as a plain consumer at read_committed (Kafka) or the log sees them."""
    return {
        UNIQUE: read_outputs(log_url, STRING, JSON, UNIQUE),
        SESSIONS: read_outputs(log_url, SESSION_KEY, LONG, SESSIONS),
    }


def compare(
    want: dict[str, dict[int, list[tuple]]], got: dict[str, dict[int, list[tuple]]]
) -> tuple[int, int, int, int]:
    """``(expected, lost, duplicated, sessions whose final count differs)`` of the outputs
    ``got`` against the test driver's ``want``."""
    total = lost = duplicated = differing = 0
    for topic, partitions in want.items():
        for partition, rows in partitions.items():
            rows = [_hashable(r) for r in rows]
            have = [_hashable(r) for r in got[topic].get(partition, [])]
            total += len(rows)
            lost += sum((Counter(rows) - Counter(have)).values())
            duplicated += sum((Counter(have) - Counter(rows)).values())
            if topic == SESSIONS:
                a, b = final_sessions(rows), final_sessions(have)
                differing += sum(1 for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return total, lost, duplicated, differing


def end_groups(groups: list[int]) -> None:
    """SIGKILL the process groups of the drivers a run started (their leftovers, if any)."""
    for pid in groups:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def child_env() -> dict[str, str]:
    """A driver process's environment: the tests importable (after what PYTHONPATH has)."""
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path}


def _hashable(row: tuple) -> tuple:
    return tuple(json.dumps(x, sort_keys=True) if isinstance(x, dict) else x for x in row)


def final_sessions(rows: list[tuple]) -> dict:
    table: dict = {}
    for key, value, _ in rows:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def run_spark_kills(
    tmp: Path,
    log_url: str,
    *,
    kills: int = 1,
    users: int = 40,
    seed: int = 7,
    execution: str = "continuous",
    app: str | None = None,
    min_outputs: int = 20,
    spread: int = 150,
    whole_group: bool = False,
) -> SparkKillRun:
    started = time.monotonic()
    rnd = random.Random(seed)
    app = app or f"spark-kills-{seed}-{execution}"
    events = clicks(users, seed)
    write_clicks(log_url, events)
    want = expected(events)
    run = SparkKillRun()
    state = str(tmp / "state")
    groups: list[int] = []
    log_dir = tmp / "drivers"
    log_dir.mkdir(parents=True, exist_ok=True)

    def start(n: int) -> subprocess.Popen:
        with open(log_dir / f"driver-{n}.log", "wb") as out:  # the child keeps its own copy
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.spark_app", log_url, state, app, execution],
                cwd=ROOT,
                env=child_env(),
                start_new_session=True,  # its own process group: the driver and its JVM
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        groups.append(process.pid)
        return process

    for n in range(kills):
        process = start(n)
        seen = committed_outputs(log_url)
        target = seen + min_outputs + rnd.randrange(0, spread + 1)
        while process.poll() is None and seen < target:
            time.sleep(0.05)
            seen = committed_outputs(log_url)
        if process.poll() is None:
            if whole_group or n % 2 == 1:  # the driver, its JVM and executor at once
                os.killpg(process.pid, signal.SIGKILL)
                run.group_kills += 1
            else:  # the driver alone: its JVM notices a moment later
                process.send_signal(signal.SIGKILL)
            run.kills += 1
            run.killed_at_outputs.append(seen)
        process.wait()
    final = start(kills)
    code = final.wait(timeout=900)
    end_groups(groups)
    assert code == 0, f"the last driver failed: see {log_dir / f'driver-{kills}.log'}"
    run.expected, run.lost, run.duplicated, run.sessions_differing = compare(
        want, read_all(log_url)
    )
    run.seconds = round(time.monotonic() - started, 1)
    return run
