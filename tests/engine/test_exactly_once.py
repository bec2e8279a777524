"""Exactly-once under faults: every output appears once, whatever fails and is retried."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from streamtide import (
    Consumed,
    Processor,
    Produced,
    Record,
    StreamsApp,
    StreamsBuilder,
    StreamsProcessingError,
)
from streamtide.engine.app_dir import AppDirectory
from streamtide.log import LogRecord, open_log
from tests.engine.scenarios import (
    JSON,
    SCENARIOS,
    STRING,
    by_user_key,
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)

pytestmark = pytest.mark.spark


def fail_next_log_write() -> None:
    """Make this process's next write of task outputs to the log (a work unit's shared files, a
    Kafka work unit's commit) raise ``OSError`` once: a failure of the infrastructure, not of user
    code."""
    import errno

    from streamtide.runtime.kafka_unit_commit import KafkaUnitCommit
    from streamtide.runtime.unit_writes import UnitWrites

    writes = [(UnitWrites, "write"), (KafkaUnitCommit, "commit")]
    originals = {(cls, name): cls.__dict__[name] for cls, name in writes}

    def failing(self, *args, **kwargs):
        if isinstance(self, UnitWrites) and not len(self):  # nothing held (Kafka): no write
            return originals[(UnitWrites, "write")](self, *args, **kwargs)
        for (cls, name), original in originals.items():
            setattr(cls, name, original)
        raise OSError(errno.EIO, "injected: writing the task's outputs to the log failed")

    for cls, name in writes:
        setattr(cls, name, failing)


class FailOnce(Processor):
    """Passes records through; when it first sees record ``n == at`` (marker file), its
    Python worker dies (``kill``) or the log write at the end of the task fails
    (``log-write``)."""

    def __init__(self, marker: str, at: int, how: str) -> None:
        self.marker, self.at, self.how = marker, at, how

    def process(self, record: Record) -> None:
        if record.value["n"] == self.at and not os.path.exists(self.marker):
            Path(self.marker).touch()
            if self.how == "kill":
                os._exit(17)  # the Python worker dies mid-task
            fail_next_log_write()
        self.context.forward(record)


def pass_through(marker: str, at: int, how: str):
    builder = StreamsBuilder()
    builder.stream("events", Consumed.with_(STRING, JSON)).process(
        lambda: FailOnce(marker, at, how)
    ).to("out", Produced.with_(STRING, JSON, by_user_key))
    return builder.build()


def expected_pass_through(events) -> dict[int, list]:
    from streamtide.log.partitioner import partition_for_key

    out: dict[int, list] = {0: [], 1: []}
    for user, value, ts in events:
        out[partition_for_key(STRING.serialize(user), 2)].append((user, value, ts))
    return out


@pytest.mark.parametrize("how", ["log-write", "kill"])
def test_a_failed_attempt_is_retried_and_its_output_never_duplicated(
    spark, log_url, tmp_path, how
) -> None:
    events = [(u, v, ts) for u, v, ts in make_events(150, seed=3) if "n" in v]
    events = [(u, {**v, "n": i}, ts) for i, (u, v, ts) in enumerate(events)]
    write_events(log_url, events)
    marker = str(tmp_path / "failed-once")
    topology = pass_through(marker, at=100, how=how)
    app = StreamsApp(topology, engine_config(log_url, str(tmp_path / "state")), spark=spark)
    app.run_until_caught_up(timeout=300)
    app.stop()
    assert os.path.exists(marker), "the failure was injected"
    assert engine_outputs(log_url, "dedup") == expected_pass_through(events)
    log = open_log(log_url)
    assert all(not log.list_unsealed("out", p) for p in range(2)), "failed attempts are aborted"


@pytest.mark.parametrize("crash_point", ["after_prepare", "after_seal"])
def test_a_driver_that_dies_before_commit_resumes_exactly(
    spark, log_url, tmp_path, monkeypatch, crash_point
) -> None:
    events = make_events(260, seed=5)
    write_events(log_url, events)
    config = engine_config(log_url, str(tmp_path / "state"))
    app = StreamsApp(session_topology(), config, spark=spark)
    app.run_batch()
    app.run_batch()

    class DriverDied(Exception):
        pass

    def die(*args, **kwargs):
        raise DriverDied

    target = "create_seal" if crash_point == "after_prepare" else "create_commit"
    monkeypatch.setattr(AppDirectory, target, die)
    with pytest.raises(DriverDied):
        app.run_batch()
    monkeypatch.undo()
    # a new driver (same application id) finds the prepared batch and rolls it forward
    resumed = StreamsApp(session_topology(), config, spark=spark)
    progress = resumed.run_until_caught_up(timeout=300)
    assert progress[0].batch == 2 and progress[0].resumed
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


@pytest.mark.parametrize(
    ("name", "moved"),
    [("session", False), ("final-session", True), ("final-window", False), ("suppressed", True)],
)
def test_restart_resumes_with_no_loss_and_no_duplicates(
    spark, log_url, tmp_path, name, moved
) -> None:
    """Also for emit-final aggregations and suppression buffers: a restarted app neither
    re-emits a result nor loses one, with its local state (``moved=False``) or restored
    from the changelogs as after a move to another executor (``moved=True``)."""
    events = make_events(240, seed=9)
    first, second = events[:120], events[120:]
    write_events(log_url, first)
    topology_fn = SCENARIOS[name][0]
    config = engine_config(log_url, str(tmp_path / "state"))
    StreamsApp(topology_fn(), config, spark=spark).run_until_caught_up(timeout=300)
    write_events(log_url, second)
    if moved:
        shutil.rmtree(tmp_path / "state")
    again = StreamsApp(topology_fn(), config, spark=spark)
    progress = again.run_until_caught_up(timeout=300)
    assert progress[0].batch > 0
    assert sum(p.input_records for p in progress) == len(second)
    assert engine_outputs(log_url, name) == expected_outputs(name, events)


def test_a_poison_record_fails_with_a_clear_error(spark, log_url, tmp_path) -> None:
    write_events(log_url, make_events(20, seed=2))
    log = open_log(log_url)
    log.append("events", 1, [LogRecord(b"u1", b"{not json", 10_000)])
    bad_offset = log.end_offset("events", 1) - 1
    app = StreamsApp(session_topology(), engine_config(log_url, str(tmp_path / "s")), spark=spark)
    with pytest.raises(StreamsProcessingError) as info:
        app.run_until_caught_up(timeout=300)
    message = str(info.value)
    assert "cannot deserialize" in message
    assert "'events'" in message and "partition 1" in message and f"offset {bad_offset}" in message


def test_log_and_continue_sends_the_poison_record_to_the_dead_letter_topic(
    spark, log_url, tmp_path
) -> None:
    events = make_events(40, seed=4)
    write_events(log_url, events)
    log = open_log(log_url)
    log.append("events", 0, [LogRecord(b"u1", b"\xff not json", 1)])
    config = engine_config(
        log_url,
        str(tmp_path / "s"),
        app="dlq-app",
        deserialization_exception_handler="log_and_continue",
    )
    StreamsApp(session_topology(), config, spark=spark).run_until_caught_up(timeout=300)
    (dead,) = list(log.read("dlq-app-dlq", 0))
    assert dead.value == b"\xff not json"
    assert dict(dead.headers)["streamtide.topic"] == b"events"
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)
