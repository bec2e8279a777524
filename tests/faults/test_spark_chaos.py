"""Executor JVMs, Python workers and drivers of the reported application killed at random
moments on a ``local-cluster`` while input arrives, with the load at twice the cores
(``./dev faults``): every output exactly once, on Kafka at read_committed and on the file
log."""

from __future__ import annotations

import pytest

from tests.faults.load import cpu_hog
from tests.faults.spark_chaos import run_spark_chaos

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.cluster]


@pytest.mark.parametrize("log", ["file", "kafka"])
@pytest.mark.parametrize("execution", ["continuous", "micro_batch"])
def test_executor_jvms_workers_and_drivers_killed_under_load(
    tmp_path, request, execution, log
) -> None:
    log_url = request.getfixturevalue("kafka_url") if log == "kafka" else f"file://{tmp_path}/log"
    # in micro-batch execution a Python worker lives only while a batch's job runs, so the
    # harness finds one to kill about once per driver (continuous: several)
    workers = 10 if execution == "continuous" else 3
    with cpu_hog(2.0) as load:
        run = run_spark_chaos(
            tmp_path, log_url, seed=404, execution=execution, worker_kills=workers
        )
    print(f"\nexecutor JVM kills ({execution}, {log} log, load {load.median:.1f}): {run}")
    assert run.executor_kills >= 20 and run.driver_kills >= 6
    assert (run.lost, run.duplicated, run.sessions_differing) == (0, 0, 0)
