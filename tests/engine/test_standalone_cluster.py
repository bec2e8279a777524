"""A real Spark standalone cluster: a master and three workers started with Spark's own
launcher as separate processes; a whole worker dies and comes back
(``standalone_scenario.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.scenario_process import run_scenario

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]


def test_a_dead_worker_fails_over_to_standbys_exactly_once_and_tasks_move_back(tmp_path):
    result = run_scenario(Path(__file__).with_name("standalone_scenario.py"), tmp_path, timeout=900)
    timings = ("cluster_start_s", "session_s", "recovery_s", "total_s")
    print("standalone cluster:", ", ".join(f"{k} {result.get(k)}" for k in timings))
    # three executors, one per worker, each keeping its state in its own worker's directory
    assert len(result["executors"]) == 3
    assert sorted(result["workers_of_executors"].values()) == [0, 1, 2]
    assert result["state_on_own_host"] and all(result["state_on_own_host"].values())
    assert set(result["owners_before"].values()) == set(result["executors"])
    assert result["exact_before"]
    # the whole worker of task 0_0 died: its tasks moved to the executors holding their
    # standbys, which replayed only what they lacked, and every count is there exactly once
    lost = result["lost_tasks"]
    assert "0_0" in lost
    for task in lost:
        assert result["owners_after"][task] != result["victim"]
        assert result["owners_after"][task] in result["standby_holders"][task]
        assert result["restored_after"][task] < result["changelog_records"][task]
    assert result["exact_after"]
    # the worker came back: a new executor there warmed tasks up before they moved to it
    newcomer = result["newcomer"]
    assert newcomer is not None and newcomer not in result["executors"]
    assert result["newcomer_worker"] == result["victim_worker"]
    assert newcomer in result["owners_back"].values()
    events = result["history"]
    warmed = {
        e["task"] for e in events if e["kind"] in ("warm-up", "standby") and e["target"] == newcomer
    }
    moves = [e for e in events if e["kind"] == "move" and e["target"] == newcomer]
    assert moves and all(e["reason"] == "warm-up caught up" for e in moves)
    assert {e["task"] for e in moves} <= warmed
    assert result["newcomer_state"]
    assert result["exact_back"]
