"""Placement, failover, standby restore and scaling on a real multi-executor cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.scenario_process import run_scenario

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]


def test_tasks_run_where_assigned_fail_over_to_standbys_and_scale_out_and_in(tmp_path) -> None:
    result = run_scenario(Path(__file__).with_name("cluster_scenario.py"), tmp_path, timeout=1200)
    assert result["other_scenarios"] == {"dedup": True, "punctuation": True}
    assert len(result["executors"]) == 2
    assert result["batches_before"] >= 3
    assert result["placement_before"], "every task ran on the executor the assignment named"
    assert set(result["owners_before"].values()) == set(result["executors"])
    assert result["equal_before"]
    # failover: 0_0 moved off the dead executor, ran where assigned, and its standby meant
    # it replayed only part of the changelog
    assert result["owner_after"] != result["victim"]
    assert result["ran_on_after"] == result["owner_after"]
    assert result["placement_after"]
    assert result["restored_after"] < result["changelog_records"]
    # the batch after the loss re-planned instead of waiting out spark.locality.wait
    assert result["failover_batch_ms"] < result["locality_wait_ms"]
    assert result["equal_after"]
    # scale-out: the replacement executor gets a task only once caught up on it (warmed up
    # as a standby, or within acceptable_recovery_lag), then replays only what it lacks
    assert result["newcomer"] not in (None, result["victim"], result["owner_after"])
    assert result["moved"] and result["cooperative_move"]
    assert result["placement_scale_out"]
    assert all(n < result["changelog_records"] for n in result["restored_on_move"].values())
    assert result["equal_scale_out"]
    assert result["moves_metric"] == result["moves_seen"] >= 2  # the failover and the scale-out
    assert result["restored_metric"] == result["restored_seen"] > 0
    assert result["standby_lag_tasks"]  # standbys reported their lag
    scaled = result["scaling"]
    # scale-out 2 -> 3: the newcomer warmed each task up before it moved there; every batch
    # ran every task, and the tasks that stayed were neither reopened nor restored
    assert len(scaled["two"]) == 2 and len(scaled["three"]) == 3
    assert scaled["out_moves"] and scaled["out_to_newcomer"] and scaled["warmed_up_first"]
    assert scaled["consecutive"] and scaled["every_task_every_batch"]
    assert scaled["kept_tasks"] and scaled["kept_never_stopped"]
    assert scaled["slots_not_relaunched"]
    # scale-in 3 -> 2: the removed executor's tasks went to their standbys, which replayed
    # only part of the changelog, while the other tasks kept running where they were
    assert scaled["handed"] and scaled["to_standbys"] and scaled["scale_in_kept_running"]
    assert all(
        scaled["restored_on_scale_in"][t] < max(1, scaled["changelog_records"][t])
        for t in scaled["handed"]
    )
    assert scaled["equal"]  # exactly once: the outputs equal the test driver's
    reasons = {(e["kind"], e.get("reason"), e.get("target")) for e in scaled["history"]}
    assert ("executor-joined", None, scaled["newcomer"]) in reasons
    assert any(k == "warm-up" and t == scaled["newcomer"] for k, _, t in reasons)
    assert any(r == "warm-up caught up" for _, r, _ in reasons)
    assert any(r == "executor removed" for _, r, _ in reasons)
    text = scaled["status_text"]
    assert "assignment history" in text
    assert "warm-up caught up" in text and "executor removed" in text
    assert "T" in text and "Z" in text  # ISO times
