"""Drivers and executors killed at random moments lose and duplicate nothing.

The short run is part of the default suite; the long one (``./dev faults``, marker
``faults``) is the figure docs/engine.md quotes under "What Streamtide promises".
"""

from __future__ import annotations

import pytest

from tests.faults.harness import run_with_kills


@pytest.mark.parametrize(
    "execution,on_kafka",
    [
        ("continuous", False),
        ("micro_batch", False),
        pytest.param("continuous", True, marks=pytest.mark.kafka, id="continuous-kafka"),
    ],
)
def test_a_few_random_driver_and_executor_kills(tmp_path, request, execution, on_kafka) -> None:
    kafka_url = request.getfixturevalue("kafka_url") if on_kafka else None
    run = run_with_kills(
        tmp_path,
        events=240,
        driver_kills=3,
        executor_kill=0.3,
        seed=7,
        execution=execution,
        kafka_url=kafka_url,
    )
    assert run.driver_kills == 3
    assert (run.lost, run.duplicated) == (0, 0)


@pytest.mark.faults
@pytest.mark.parametrize("log", ["file", "kafka"])
@pytest.mark.parametrize("execution", ["continuous", "micro_batch"])
@pytest.mark.parametrize("seed", [101, 202])
def test_thirty_driver_kills_and_ten_executor_kills(
    tmp_path, request, seed, execution, log
) -> None:
    run = run_with_kills(
        tmp_path,
        events=4000,
        driver_kills=32,
        executor_kill=0.4,
        seed=seed,
        min_executor_kills=12,
        execution=execution,
        kafka_url=request.getfixturevalue("kafka_url") if log == "kafka" else None,
    )
    print(f"\nrandom-kill run ({execution}, {log} log, seed {seed}): {run}")
    assert run.driver_kills >= 30 and run.executor_kills >= 10
    assert (run.lost, run.duplicated) == (0, 0)


@pytest.mark.faults
@pytest.mark.parametrize("log", ["file", "kafka"])
@pytest.mark.parametrize("execution", ["continuous", "micro_batch"])
def test_kills_under_load(tmp_path, request, execution, log) -> None:
    """The load mode: a CPU hog keeps the load average at twice the cores or more while
    drivers (alone, or with their executors) and executors are killed at random moments; on
    Kafka, executors also die inside their tasks' commits. 60 driver kills and 20 executor
    kills or more per run."""
    run = run_with_kills(
        tmp_path,
        events=6000,
        driver_kills=60,
        executor_kill=0.4,
        seed=303,
        min_executor_kills=20,
        execution=execution,
        kafka_url=request.getfixturevalue("kafka_url") if log == "kafka" else None,
        load=2.0,
        commit_kill=0.05 if log == "kafka" else 0.0,
    )
    print(f"\nkills under load ({execution}, {log} log): {run}", flush=True)
    assert run.driver_kills >= 60 and run.executor_kills + run.commit_kills >= 20
    if log == "kafka":
        assert run.commit_kills > 0, "no executor died inside a commit: the hook missed it"
    assert (run.lost, run.duplicated) == (0, 0)


@pytest.mark.kafka
def test_random_kills_at_least_once_on_kafka_lose_nothing(tmp_path, kafka_url) -> None:
    """Without transactions a killed attempt's records can stay and be written again by the
    retry: duplicates are allowed (and counted), missing records are not."""
    run = run_with_kills(
        tmp_path,
        events=240,
        driver_kills=3,
        executor_kill=0.3,
        seed=9,
        execution="continuous",
        kafka_url=kafka_url,
        guarantee="at_least_once",
    )
    print(f"\nat-least-once random-kill run on Kafka: {run}")
    assert run.driver_kills == 3 and run.lost == 0


@pytest.mark.faults
@pytest.mark.kafka
def test_thirty_driver_kills_at_least_once_on_kafka(tmp_path, kafka_url) -> None:
    run = run_with_kills(
        tmp_path,
        events=4000,
        driver_kills=32,
        executor_kill=0.4,
        seed=101,
        min_executor_kills=12,
        execution="continuous",
        kafka_url=kafka_url,
        guarantee="at_least_once",
    )
    print(f"\nrandom-kill run (continuous, kafka log, at_least_once, seed 101): {run}")
    assert run.driver_kills >= 30 and run.executor_kills >= 10
    assert run.lost == 0
