"""Every crash point of a batch on Kafka, without Spark.

The driver process of ``test_crash_points`` (``tests.engine.crash_driver``) runs the same
two-stage topology (a repartition, then a count) on Kafka, where each task commits its
outputs, repartition and changelog records and input offsets in its own transaction, and dies
(``os._exit``) at a chosen step: after its fencing transaction, after the ranges are recorded,
after a task's producer is initialised, with a task's records (then also its offsets) in an
open transaction, after a task's commit, after its read-back, after its stores took the run's
writes, after the prepare, seal and commit records, after the purge of repartition records;
and while it restarts (after fencing some of the tasks). Each task step is taken at the
second task of the first batch: one task's transaction committed, the others' not, no batch
committed yet. A new driver must reach the outcome of a run that never crashed: every count
exactly once (the test driver's) at read_committed, no transaction left open.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.crash_driver import KAFKA_STEPS
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
)
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import engine_config, log_options_for, write_events
from tests.kafka_broker import delete_all_topics

pytestmark = pytest.mark.kafka

STEPS = [s.name for s in KAFKA_STEPS] + ["restart"]


def fresh(broker) -> str:
    """An empty broker with the input (each run has its own application id: a consumer
    group's offsets outlive the topics)."""
    delete_all_topics(broker)
    write_events(broker.url, crash_events(kafka=True))
    return broker.url


@pytest.fixture(scope="module")
def reference(kafka_broker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kafka-reference")
    log_url = fresh(kafka_broker)
    trace = reference_trace(log_url, str(tmp / "state"), "crash-reference", tmp)
    config = engine_config(log_url, str(tmp / "state"), app="crash-reference")
    expected = outcome(LocalDriver(counting_topology(), config), "crash-reference")
    check_counts(expected, expected_counts(crash_events(kafka=True)))
    return expected, trace


def run_points(broker, tmp: Path, reference, points, name: str) -> None:
    expected, _ = reference
    counts = expected_counts(crash_events(kafka=True))
    for n, point in enumerate(points):
        app = f"crash-{name}-{n}"
        log_url = fresh(broker)
        driver = crash_and_restart(log_url, str(tmp / app), app, point)
        found = outcome(driver, app)
        check_counts(found, counts)
        assert found == expected, f"a crash at {point} changed the outcome"
        assert leftovers(log_url, log_options_for(log_url)) == [], (
            f"transactions left open after a crash at {point}"
        )


@pytest.mark.parametrize("step", STEPS)
def test_a_driver_killed_at_a_step_of_a_batch_on_kafka_leaves_what_a_restart_completes(
    kafka_broker, tmp_path, reference, step
) -> None:
    points = crash_points(reference[1], kafka=True)
    chosen = [p for p in points if (len(p) > 2 if step == "restart" else p[0] == step)]
    assert chosen
    run_points(kafka_broker, tmp_path, reference, chosen, step)


@pytest.mark.faults
def test_a_driver_killed_at_every_occurrence_of_every_step_on_kafka(
    kafka_broker, tmp_path, reference
) -> None:
    points = crash_points(reference[1], kafka=True, every=True)
    run_points(kafka_broker, tmp_path, reference, points, "every")
