"""The engine's assignment glue: subscriptions, stored records, and report bookkeeping."""

from __future__ import annotations

import pytest

from streamtide import StreamsApp
from streamtide.assignment import AssignmentInfo, SubscriptionInfo, TaskId
from streamtide.engine.interop import ExecutorInfo
from streamtide.engine.placement import (
    ClientReport,
    compute_assignment,
    record_stage_reports,
    reports_from,
    standby_shortfall,
    subscriptions,
)
from streamtide.engine.plan import Stage
from streamtide.engine.protocol import UnitReport
from tests.engine.scenarios import engine_config, make_events, session_topology, write_events

STAGE = Stage(0, 2, ("events",), ("sessions",), {"sessions": "app-sessions-changelog"})
EXECUTORS = [ExecutorInfo("1", "h", 1), ExecutorInfo("2", "h", 1)]


def unit(client: str, tasks: dict[str, dict[str, int]], standbys=None) -> UnitReport:
    return UnitReport.from_dict(
        {
            "client": client,
            "tasks": [{"task": t, "local_offsets": offsets} for t, offsets in tasks.items()],
            "standbys": {t: {"local_offsets": o} for t, o in (standbys or {}).items()},
        }
    )


def test_a_task_that_moved_is_no_longer_reported_running_by_its_old_owner() -> None:
    reports = {"1": ClientReport({"0_0", "0_1"}), "2": ClientReport()}
    record_stage_reports(reports, STAGE.task_ids, [unit("1", {"0_1": {}}), unit("2", {"0_0": {}})])
    assert reports["1"].running == {"0_1"} and reports["2"].running == {"0_0"}
    subs = subscriptions(EXECUTORS, reports, set(STAGE.task_ids))
    # one active owner per task, so the assignor accepts the history
    assignment = compute_assignment([STAGE], subs, lambda task: 0, engine_config("file:///x", "s"))
    assert assignment.active["1"] == {TaskId(0, 1)} and assignment.active["2"] == {TaskId(0, 0)}


def test_standby_offsets_become_lags_through_the_subscription_records() -> None:
    reports: dict[str, ClientReport] = {}
    record_stage_reports(
        reports,
        STAGE.task_ids,
        [
            unit("1", {"0_0": {"sessions": 40}, "0_1": {"sessions": 7}}),
            unit("2", {}, standbys={"0_0": {"sessions": 90}, "0_1": {"sessions": 5}}),
        ],
    )
    subs = subscriptions(EXECUTORS, reports, set(STAGE.task_ids))
    decoded = {c: SubscriptionInfo.decode(s.encode()) for c, s in subs.items()}
    assert decoded["2"].offset_sums == {TaskId(0, 0): 90, TaskId(0, 1): 5}
    assert reports_from(decoded)["1"].running == {"0_0", "0_1"}
    state = decoded["2"].client_state({TaskId(0, 0): 100, TaskId(0, 1): 100})
    assert state.lags == {TaskId(0, 0): 10, TaskId(0, 1): 95}


def test_standbys_that_cannot_be_placed_are_explained() -> None:
    one = [ExecutorInfo("driver", "localhost", 2)]
    three = [ExecutorInfo(str(i), "h", 1) for i in range(3)]
    assert standby_shortfall(0, one) is None and standby_shortfall(2, three) is None
    alone = standby_shortfall(1, one)
    assert alone is not None
    assert alone.startswith("num_standby_replicas=1, but the application has one executor")
    assert "(driver)" in alone and "none are kept" in alone
    assert standby_shortfall(3, three) == (
        "num_standby_replicas=3, but with 3 executors each task keeps at most 2 standby(s): a "
        "standby must live on another executor than its active task"
    )


@pytest.mark.spark
def test_each_batch_stores_versioned_records_and_a_restart_resumes_from_them(
    spark, log_url, tmp_path
) -> None:
    write_events(log_url, make_events(120, seed=13))
    config = engine_config(log_url, str(tmp_path / "state"))
    app = StreamsApp(session_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=300)
    last = progress[-1].batch
    stored = app.app_dir.read_assignment(last)
    assert stored is not None
    subs = {c: SubscriptionInfo.decode(b) for c, b in stored["subscriptions"].items()}
    assignment = {c: AssignmentInfo.decode(b) for c, b in stored["assignments"].items()}
    assert set(subs) == {"driver"} and subs["driver"].prev_active == {TaskId(0, 0), TaskId(0, 1)}
    assert assignment["driver"].active == {TaskId(0, 0), TaskId(0, 1)}
    resumed = StreamsApp(session_topology(), config, spark=spark)
    resumed._ensure_started()
    assert resumed._reports["driver"].running == {"0_0", "0_1"}
    assert resumed.run_batch().owners == {"0_0": "driver", "0_1": "driver"}
