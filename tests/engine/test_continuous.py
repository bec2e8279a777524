"""Continuous execution: long-running work units run batch after batch without a Spark job
each, keep their stores open, are replaced when they die or age, and admit no process that
lacks the application's secret."""

from __future__ import annotations

import os
import signal
import time

import pytest

from streamtide import StreamsApp
from streamtide.engine.channel import HandshakeError, connect
from tests.engine.scenarios import (
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)
from tests.engine.test_idle import spark_job_count

pytestmark = pytest.mark.spark


def test_batches_run_on_long_running_work_units_that_keep_their_stores(
    spark, log_url, tmp_path
) -> None:
    events = make_events(400, seed=31)
    write_events(log_url, events[:200])
    config = engine_config(log_url, str(tmp_path / "state"), execution="continuous")
    app = StreamsApp(session_topology(), config, spark=spark)
    first = app.run_until_caught_up(timeout=300)
    jobs, launched = spark_job_count(spark), app._workers.launched
    assert launched == 2  # one work unit per slot of local[2]
    write_events(log_url, events[200:])
    later = app.run_until_caught_up(timeout=300)
    assert len(first) >= 2 and len(later) >= 2
    assert spark_job_count(spark) == jobs, "a batch launched a Spark job"
    assert app._workers.launched == launched
    assert sum(p.restored_records for p in later) == 0  # stores stayed open: nothing replayed
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


def test_a_killed_work_unit_is_replaced_and_nothing_is_lost(spark, log_url, tmp_path) -> None:
    events = make_events(300, seed=32)
    write_events(log_url, events[:150])
    config = engine_config(log_url, str(tmp_path / "state"), execution="continuous")
    app = StreamsApp(session_topology(), config, spark=spark)
    app.run_until_caught_up(timeout=300)
    victim = next(s["pid"] for s in app._workers.slots().values() if s["connected"])
    os.kill(victim, signal.SIGKILL)
    write_events(log_url, events[150:])
    app.run_until_caught_up(timeout=300)
    assert app._workers.launched == 3
    assert victim not in {s["pid"] for s in app._workers.slots().values() if s["connected"]}
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


def test_a_work_unit_that_dies_between_batches_is_replaced_before_the_next_batch(
    spark, log_url, tmp_path
) -> None:
    """The application is idle (no batch runs until ``run_until_caught_up`` is called
    again): a work unit's Python worker is killed. The driver notices its connection close
    and launches a replacement at once, without a batch; the next batch runs on it, exactly
    once."""
    events = make_events(300, seed=34)
    write_events(log_url, events[:150])
    config = engine_config(log_url, str(tmp_path / "state"), execution="continuous")
    app = StreamsApp(session_topology(), config, spark=spark)
    app.run_until_caught_up(timeout=300)
    batches = len(app.history)
    key, victim = next((k, s) for k, s in app._workers.slots().items() if s["connected"])
    os.kill(victim["pid"], signal.SIGKILL)
    killed = time.monotonic()
    deadline = killed + 120
    now = app._workers.slots()[key]
    while time.monotonic() < deadline and not (
        now["connected"] and now["generation"] > victim["generation"]
    ):
        time.sleep(0.01)
        now = app._workers.slots()[key]
    took = time.monotonic() - killed
    print(f"\nwork unit {key} replaced {took:.2f} s after its worker was killed")
    assert now["connected"] and now["generation"] == victim["generation"] + 1
    assert now["pid"] != victim["pid"] and app._workers.replaced == 1
    assert len(app.history) == batches and app._workers.launched == 3  # no batch ran
    write_events(log_url, events[150:])
    app.run_until_caught_up(timeout=300)
    assert app._workers.launched == 3  # the next batch ran on the replacement
    app.stop()
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


def test_work_units_older_than_their_maximum_age_are_replaced(spark, log_url, tmp_path) -> None:
    events = make_events(200, seed=33)
    write_events(log_url, events)
    config = engine_config(
        log_url, str(tmp_path / "state"), execution="continuous", work_unit_max_age=1
    )
    app = StreamsApp(session_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    assert app._workers.launched >= 2 * len(progress)  # every batch on fresh work units
    assert engine_outputs(log_url, "session") == expected_outputs("session", events)


def test_a_process_without_the_secret_is_refused(spark, log_url, tmp_path) -> None:
    write_events(log_url, make_events(20, seed=34))
    config = engine_config(log_url, str(tmp_path / "state"), execution="continuous")
    app = StreamsApp(session_topology(), config, spark=spark)
    app.run_batch()
    workers = app._workers
    host, port = workers.address
    assert host == "127.0.0.1"  # a local master: loopback only, never every interface
    with pytest.raises(HandshakeError, match="authentication failed"):
        hello = {"slot": ["driver", 0]}
        connect(host, port, "not-the-secret", workers._server.identity.fingerprint, hello).close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(s["connected"] for s in workers.slots().values()):
        time.sleep(0.1)
    assert all(s["connected"] for s in workers.slots().values())  # its own units are unharmed
    app.run_batch()
