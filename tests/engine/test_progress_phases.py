"""A batch's progress says where its time went (``phases_ms``) and how many changelog records
it wrote, so that benchmarks can break a batch down without instrumenting the engine."""

from __future__ import annotations

import pytest

from streamtide import StreamsApp
from streamtide.engine.progress import PHASES, BatchProgress
from streamtide.log import open_log
from tests.engine.scenarios import (
    PARTITIONS,
    engine_config,
    make_events,
    session_topology,
    write_events,
)


def test_work_unit_reports_add_up_per_phase() -> None:
    progress = BatchProgress(0)
    progress.add_phase("plan", 1.5)
    progress.add_phase("plan", 2.0)
    progress.add_work_unit_reports(
        [
            {
                "duration_ms": 30.0,
                "settle_ms": 4.0,
                "tasks": [
                    {"phases_ms": {"read": 1.0, "process": 10.0}},
                    {"phases_ms": {"read": 2.0, "process": 5.0}},
                ],
            },
            {"duration_ms": 50.0, "tasks": [{"phases_ms": {"process": 7.0}}]},
        ]
    )
    assert progress.phases_ms == {
        "plan": 3.5,
        "unit.settle": 4.0,
        "task.read": 3.0,
        "task.process": 22.0,
        "unit.longest": 50.0,
    }
    assert set(progress.phases_ms) <= set(PHASES)
    assert BatchProgress.from_dict(progress.as_dict()).phases_ms == progress.phases_ms


@pytest.mark.spark
@pytest.mark.parametrize("execution", ["continuous", "micro_batch"])
def test_batches_report_their_phases_and_changelog_records(
    spark, log_url, tmp_path, execution
) -> None:
    write_events(log_url, make_events(200, seed=5))
    config = engine_config(log_url, str(tmp_path / "state"), execution=execution)
    app = StreamsApp(session_topology(), config, spark=spark)
    try:
        batches = app.run_until_caught_up(timeout=300)
    finally:
        app.stop()
    assert len(batches) >= 2
    for batch in batches:
        assert set(batch.phases_ms) <= set(PHASES)
        for phase in ("plan", "run", "seal", "commit", "unit.longest", "task.process"):
            assert batch.phases_ms[phase] >= 0, phase
        # the driver's phases before the commit record lie within the batch's duration
        driver = sum(batch.phases_ms[p] for p in ("plan", "run", "seal"))
        assert driver <= batch.duration_ms + 1
        assert batch.phases_ms["unit.longest"] <= batch.phases_ms["run"] + 1
    if execution == "continuous":  # from the second batch on, the first one's settle counts
        assert "unit.settle" in batches[1].phases_ms
    else:
        assert batches[0].phases_ms["task.close"] >= 0
    log = open_log(log_url)
    try:
        changelog = f"{config.application_id}-sessions-changelog"
        written = sum(log.end_offset(changelog, p) for p in range(PARTITIONS))
    finally:
        log.close()
    assert written > 0
    assert sum(b.changelog_records for b in batches) == written
