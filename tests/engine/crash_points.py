"""What the crash-point tests share: the topology, its input, the driver process that dies at
a step (``tests.engine.crash_driver``), which crash points to try, and the checks of what a
restarted driver reaches.

The oracle is not the engine: the test driver's counts. The topology counts events by a key
it derives (a repartition, then a count), without caching, so each input event gives exactly
one output: for each key the output values must be 1, 2, ..., n, with n the test driver's
final count, and the key's changelog must end at n. A duplicate, a lost record or a record
counted twice breaks that sequence. The outcome must also equal, record for record, that of
a run without a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from streamtide import Consumed, Materialized, Produced, StreamsBuilder, StreamsConfig, Topology
from streamtide.log import open_log
from streamtide.testing import TopologyTestDriver
from tests.engine.crash_driver import DIED, FILE_STEPS, KAFKA_STEPS
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import INT, JSON, STRING, engine_config, make_events, write_events
from tests.kafka_broker import read_committed

ROOT = Path(__file__).resolve().parents[2]
#: A point: ``(step, occurrence)``; ``(step, n, restart step, m)`` also kills the restart.
Point = tuple[Any, ...]


def counting_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .select_key(lambda k, v: f"n{v.get('n', 0) % 5}")
        .group_by_key()
        .count(Materialized.as_("counts"))
        .to_stream()
        .to("out", Produced.with_(STRING, INT))
    )
    return builder.build()


def crash_events(kafka: bool) -> list[tuple[str, dict, int]]:
    """Input for two batches of two stages (Kafka stores timestamps from 1 ms on)."""
    events = make_events(60, seed=11)
    return [(u, v, ts + 1_000_000) for u, v, ts in events] if kafka else events


def setup(tmp_path: Path, events: int = 90) -> StreamsConfig:
    """A file log with input, and the config of an application on it."""
    log_url = f"file://{tmp_path / 'log'}"
    write_events(log_url, make_events(events, seed=11))
    return engine_config(log_url, str(tmp_path / "state"), app="crash")


def expected_counts(events: Iterable[tuple[str, dict, int]]) -> dict[str, int]:
    """The test driver's final count per key."""
    config = StreamsConfig(
        application_id="expected", default_key_serde=STRING, default_value_serde=JSON
    )
    with TopologyTestDriver(counting_topology(), config) as driver:
        inp = driver.create_input_topic("events", STRING, JSON)
        for user, value, ts in events:
            inp.pipe_input(user, value, timestamp=ts)
        return dict(driver.get_key_value_store("counts").all())


def run_driver(
    log_url: str, state_dir: str, app: str, point: tuple[str, int] | None, trace: Path | None = None
) -> int:
    """Run the crash driver in a process of its own; its exit status."""
    args = [sys.executable, "-m", "tests.engine.crash_driver", log_url, state_dir, app]
    if point is not None:
        args += ["--step", point[0], "--occurrence", str(point[1])]
    if trace is not None:
        args += ["--trace", str(trace)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(args, cwd=ROOT, env=env, timeout=300).returncode


def reference_trace(log_url: str, state_dir: str, app: str, tmp: Path) -> list[tuple[str, int]]:
    """The steps a run without a crash passes, ``[(step, batch), ...]``."""
    trace = tmp / "trace.json"
    assert run_driver(log_url, state_dir, app, None, trace) == 0
    return [(step, batch) for step, batch in json.loads(trace.read_text())]


def crash_points(trace: list[tuple[str, int]], kafka: bool, every: bool = False) -> list[Point]:
    """Where to kill the driver. ``every``: at every occurrence of every step. Otherwise each
    step of a batch once, at its second occurrence in the first batch: a task's steps at the
    second task (one task's transaction committed, the others' not; no batch is committed
    yet, so a restart knows of the tasks' commits only from the log), the driver's steps at
    the second stage; and one restart that dies too."""
    steps = [s.name for s in (KAFKA_STEPS if kafka else FILE_STEPS)]
    seen: Counter[str] = Counter()
    occurrences: dict[str, list[tuple[int, int]]] = {}
    for step, batch in trace:
        seen[step] += 1
        occurrences.setdefault(step, []).append((seen[step], batch))
    missing = [s for s in steps if s not in occurrences]
    assert not missing, f"the reference run never passed {missing}"
    if every:
        return [(step, n) for step in steps for n, _ in occurrences[step]]
    points: list[Point] = []
    for step in steps:
        first = [n for n, batch in occurrences[step] if batch == 0]
        points.append((step, first[1] if len(first) > 1 else first[0]))
    if kafka:  # a task committed, the next one not; the restart dies after fencing 2 tasks
        points.append(("txn-committed", 1, "task-fenced", 2))
    else:  # one topic's group of seals created, the others not; the restart dies after its
        # epoch
        points.append(("seal-group", 1, "epoch", 1))
    return points


def crash_and_restart(log_url: str, state_dir: str, app: str, point: Point) -> LocalDriver:
    """A driver dies at ``point`` (and, for a restart point, so does the next one); a new
    driver then runs to the end."""
    status = run_driver(log_url, state_dir, app, (point[0], point[1]))
    assert status == DIED, f"the driver was to die at {point[:2]}, it ended with {status}"
    if len(point) > 2:
        status = run_driver(log_url, state_dir, app, (point[2], point[3]))
        assert status == DIED, f"the restart was to die at {point[2:]}, it ended with {status}"
    config = engine_config(log_url, state_dir, app=app)
    driver = LocalDriver(counting_topology(), config)
    driver.run_until_caught_up()
    return driver


def outcome(driver: LocalDriver, app: str) -> dict[str, Any]:
    """What a run left: every topic's records but the input's (``out`` read by a plain Kafka
    consumer at read_committed on Kafka), internal topic names without the application id;
    each task's committed stream time and input offsets of the input topic."""
    config = driver.config
    log = open_log(config.log, **config.log_options)
    records = {}
    for topic in log.list_topics():
        if topic == "events" or topic.startswith("_"):
            continue
        name = "<app>" + topic[len(app) :] if topic.startswith(f"{app}-") else topic
        if config.log.startswith("kafka://") and topic == "out":
            rows = read_committed(config.log, topic)
            for p, found in rows.items():
                records[(name, p)] = [(k, v, ts) for k, v, ts in found]
            continue
        for p in range(log.partitions(topic)):  # from the first record not purged
            found = log.read(topic, p, start=log.begin_offset(topic, p))
            records[(name, p)] = [(r.key, r.value, r.timestamp) for r in found]
    last = driver.app_dir.last_committed()
    assert last is not None
    states = {
        task: (
            state.get("stream_time"),
            {k: v for k, v in state.get("offsets", {}).items() if k.startswith("events:")},
        )
        for task, state in last.tasks.items()
    }
    log.close()
    return {"records": records, "states": states}


def check_counts(result: dict[str, Any], expected: dict[str, int]) -> None:
    """Each key's outputs are 1..n and its changelog ends at n (n: the test driver's)."""
    outputs: dict[str, list[int]] = {}
    for (topic, _), rows in sorted(result["records"].items()):
        if topic == "out":
            for key, value, _ in rows:
                outputs.setdefault(STRING.deserialize(key), []).append(INT.deserialize(value))
    for key, n in expected.items():
        assert outputs.get(key) == list(range(1, n + 1)), f"outputs of {key!r}: {outputs.get(key)}"
    assert set(outputs) == set(expected)
    changelog = {}
    for (topic, _), rows in result["records"].items():
        if topic.endswith("-changelog"):
            for key, value, _ in rows:
                changelog[STRING.deserialize(key)] = value
    assert {k: INT.deserialize(v[-8:]) if v else None for k, v in changelog.items()} == expected


def leftovers(log_url: str, options: dict[str, str]) -> list[str]:
    """Kafka: partitions with a transaction still open; file log: unsealed segments (and
    shared files of which no slice is sealed)."""
    log = open_log(log_url, **options)
    try:
        if log_url.startswith("kafka://"):
            return [
                f"{t}/{p}"
                for t in log.list_topics()
                for p in range(log.partitions(t))
                if log.end_offset(t, p) != log.high_watermark(t, p)
            ]
        return [
            s.name
            for t in log.list_topics()
            for p in range(log.partitions(t))
            for s in log.list_unsealed(t, p)
        ] + log.list_unsealed_shared()
    finally:
        log.close()
