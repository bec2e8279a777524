"""Every crash point of a batch on the file log, and fencing, without Spark.

A driver process (``tests.engine.crash_driver``) runs batches of a two-stage stateful
topology (a repartition, then a count) with real work units, stores and the file log, and
dies (``os._exit``) at a chosen step: after the ranges are recorded, after a task wrote its
unsealed segments, after the prepare, after some of the stage's segments are sealed and
others not, after the seal record, after the sweep, after the commit record; and while it
restarts. A new driver for the same application must reach the outcome of a run that never
crashed: every count exactly once (the test driver's), no unsealed segment left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtide.errors import FencedError
from streamtide.log import LogRecord, open_log
from tests.engine.crash_driver import FILE_STEPS
from tests.engine.crash_points import (
    check_counts,
    counting_topology,
    crash_and_restart,
    crash_events,
    crash_points,
    expected_counts,
    leftovers,
    outcome,
    reference_trace,
    setup,
)
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import engine_config, write_events

STEPS = [s.name for s in FILE_STEPS] + ["restart"]


def fresh(tmp: Path) -> str:
    log_url = f"file://{tmp / 'log'}"
    write_events(log_url, crash_events(kafka=False))
    return log_url


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A run without a crash: its outcome and the steps it passed."""
    tmp = tmp_path_factory.mktemp("reference")
    log_url = fresh(tmp)
    trace = reference_trace(log_url, str(tmp / "state"), "crash", tmp)
    driver = LocalDriver(counting_topology(), engine_config(log_url, str(tmp / "state"), "crash"))
    expected = outcome(driver, "crash")
    check_counts(expected, expected_counts(crash_events(kafka=False)))
    return expected, trace


def run_points(tmp: Path, reference, points) -> None:
    expected, _ = reference
    counts = expected_counts(crash_events(kafka=False))
    for n, point in enumerate(points):
        log_url = fresh(tmp / f"point-{n}")
        driver = crash_and_restart(log_url, str(tmp / f"point-{n}" / "state"), "crash", point)
        found = outcome(driver, "crash")
        check_counts(found, counts)
        assert found == expected, f"a crash at {point} changed the outcome"
        assert leftovers(log_url, {}) == [], f"unsealed segments left after a crash at {point}"


@pytest.mark.parametrize("step", STEPS)
def test_a_driver_killed_at_a_step_of_a_batch_leaves_what_a_restart_completes(
    tmp_path, reference, step
) -> None:
    """The driver process dies (``os._exit``) at the step; a new driver must reach the
    outcome of a run without a crash, with every count exactly once, and leave no unsealed
    segment. ``restart``: the restarting driver dies too, once taking its epoch."""
    points = crash_points(reference[1], kafka=False)
    chosen = [p for p in points if (len(p) > 2 if step == "restart" else p[0] == step)]
    assert chosen
    run_points(tmp_path, reference, chosen)


@pytest.mark.faults
def test_a_driver_killed_at_every_occurrence_of_every_step(tmp_path, reference) -> None:
    run_points(tmp_path, reference, crash_points(reference[1], kafka=False, every=True))


def test_a_driver_that_another_instance_took_over_from_stops_at_its_next_write(
    tmp_path, reference
) -> None:
    expected, _ = reference
    config = engine_config(fresh(tmp_path), str(tmp_path / "state"), app="crash")
    first = LocalDriver(counting_topology(), config)
    first.run_batch()
    second = LocalDriver(counting_topology(), config)  # takes a newer epoch
    with pytest.raises(FencedError, match="another instance of application 'crash' took over"):
        first.run_batch()
    second.run_until_caught_up()
    assert outcome(second, "crash") == expected


def test_an_older_driver_that_slips_past_its_fence_check_cannot_interleave(
    tmp_path, reference
) -> None:
    """A zombie whose check raced with the take-over writes only records that already
    exist: it adopts them, so nothing is sealed twice and the outcome is unchanged."""
    expected, _ = reference
    config = engine_config(fresh(tmp_path), str(tmp_path / "state"), app="crash")
    zombie = LocalDriver(counting_topology(), config)
    zombie.run_batch()
    successor = LocalDriver(counting_topology(), config)
    successor.run_batch()
    zombie.app_dir.check_fence = lambda: None  # its checks all happened just before
    zombie.run_batch()  # batch 1 again: every record it writes exists already
    assert zombie.app_dir.read_prepare(1, 0).epoch == successor.committer.epoch
    successor.run_until_caught_up()
    assert outcome(successor, "crash") == expected


def test_unsealed_segments_of_decided_batches_are_deleted_on_restart(tmp_path) -> None:
    config = setup(tmp_path)
    LocalDriver(counting_topology(), config).run_batch()
    log = open_log(config.log)
    records = [LogRecord(b"k", b"v", 1)]
    log.write_segment("out", 0, records, writer_id="crash/b0/s1/1_0/late-attempt")
    pending = log.write_segment("out", 0, records, writer_id="crash/b1/s0/0_0/in-flight")
    foreign = log.write_segment("out", 0, records, writer_id="other-app/b0/s0/0_0/x")
    LocalDriver(counting_topology(), config)  # a restart
    assert {s.name for s in log.list_unsealed("out", 0)} == {pending.name, foreign.name}
