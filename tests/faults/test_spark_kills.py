"""The reported exactly-once scenario on Kafka, with real Spark driver processes: a
clickstream deduplicated into one topic and counted in user sessions into another (4
partitions, ``exactly_once``, ``max_records_per_batch=20``); the driver SIGKILLed once at
least 20 outputs are committed, then restarted with the same ``application_id`` and
``state_dir``. A plain confluent-kafka consumer at read_committed must find every output
exactly once, equal to the test driver's, and the same final session counts.

Before the fix (``KafkaTaskCommit.decide``) a driver killed in its first batch, after some
tasks had committed, left a restart that ran those tasks' ranges again: duplicated dedup
outputs and sessions counted twice. The short run is in the default suite; the long one
(``./dev faults``) runs the scenario 20 times, half of them with the load at twice the cores.
"""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from tests.faults.load import cpu_hog
from tests.faults.spark_kills import run_spark_kills
from tests.kafka_broker import delete_all_topics

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_killed_and_restarted_driver_emits_every_output_once(kafka_url, tmp_path) -> None:
    run = run_spark_kills(
        tmp_path, kafka_url, kills=1, users=16, seed=2, spread=0, app="spark-kill-short"
    )
    print(f"\nthe reported scenario: {run}")
    assert run.kills == 1 and run.expected > 300
    assert (run.lost, run.duplicated, run.sessions_differing) == (0, 0, 0)


@pytest.mark.faults
@pytest.mark.parametrize("first", [0, 5, 10, 15], ids=lambda n: f"runs-{n}-{n + 4}")
def test_the_reported_scenario_twenty_times_half_of_them_under_load(
    kafka_broker, tmp_path, first
) -> None:
    """Five runs per case (cases may run side by side, each with its broker)."""
    runs = []
    for n in range(first, first + 5):
        delete_all_topics(kafka_broker)
        loaded = n % 2 == 1
        execution = "continuous" if n % 4 < 2 else "micro_batch"
        with cpu_hog(2.0) if loaded else nullcontext() as load:
            run = run_spark_kills(
                tmp_path / f"run-{n}", kafka_broker.url, kills=2, seed=100 + n, execution=execution
            )
        median = load.median if load is not None else None
        runs.append(run)
        print(f"\nrun {n} ({execution}, load median {median}): {run}", flush=True)
    assert sum(r.kills for r in runs) >= 5
    assert [(r.lost, r.duplicated, r.sessions_differing) for r in runs] == [(0, 0, 0)] * 5
