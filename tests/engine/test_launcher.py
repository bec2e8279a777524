"""The driver runs continuous execution against work units any launcher starts
(``engine.launcher``): here the driver-scale benchmark's simulated executors, processes that
answer the control protocol and leave unsealed segments, without Spark."""

from __future__ import annotations

import pytest

from bench.driver_scale import topology
from bench.simulated_executors import SimulatedExecutors, simulator_settings
from streamtide import StreamsConfig
from streamtide.engine.app import StreamsApp
from streamtide.errors import ConfigError
from streamtide.log import open_log


@pytest.fixture
def executors():
    sim = SimulatedExecutors(processes=2)
    yield sim
    sim.close()


def test_the_driver_commits_batches_of_work_units_another_launcher_started(
    tmp_path, executors
) -> None:
    url = f"file://{tmp_path / 'log'}"
    open_log(url).create_topic("in-4", 4)
    config = StreamsConfig(
        application_id="simulated",
        log=url,
        state_dir=str(tmp_path / "state"),
        num_standby_replicas=1,
    )
    executors.set_executors(3)
    app = StreamsApp(topology(1, 4), config, launcher=executors)
    try:
        app._ensure_started()
        executors.configure(simulator_settings(app, delay_ms=20))
        ran = []
        for _ in range(3):
            executors.feed("in-4", 4)
            ran.append(app.run_batch())
    finally:
        app.stop()
    last = ran[-1]
    assert set(last.owners) == {f"0_{p}" for p in range(4)}
    assert set(last.owners.values()) == {"1", "2", "3"}  # the launcher's executors
    assert last.ran_on == last.owners
    assert all(p.input_records == 4 for p in ran)  # one record per partition and batch
    assert all(p.work_unit_wait_ms >= 20 for p in ran)  # the replies' delay, counted
    assert last.standbys and all(last.standbys.values())
    log = open_log(url)
    # each batch sealed what the work units wrote: one record per output and changelog
    # partition
    assert [log.end_offset("out-4", p) for p in range(4)] == [3, 3, 3, 3]
    assert log.end_offset("simulated-counts-changelog", 0) == 3
    assert all(not log.list_unsealed("out-4", p) for p in range(4))
    metrics = app.metrics()
    assert metrics["streamtide_batch_driver_seconds_count"] == 3
    assert (
        metrics["streamtide_batch_driver_seconds_sum"]
        < metrics["streamtide_batch_duration_seconds_sum"]
    )


def test_another_launcher_runs_continuous_execution_only(tmp_path, executors) -> None:
    url = f"file://{tmp_path / 'log'}"
    open_log(url).create_topic("in-4", 4)
    config = StreamsConfig(log=url, state_dir=str(tmp_path / "state"), execution="micro_batch")
    with pytest.raises(ConfigError, match="continuous execution"):
        StreamsApp(topology(1, 4), config, launcher=executors)._ensure_started()
