"""Run on ``local-cluster[2,1,1024]`` (its own process: one SparkContext per process).

1. The session topology with one standby replica runs until caught up; every task must run on
   the executor the assignment named, and the output must equal the test driver's.
2. The executor running task 0_0 is killed (its JVM, started by this run); more input
   arrives; the task moves to the surviving executor, which held its standby, restores only
   what it lacked from the changelog, and the output still equals the driver's.

Prints one JSON line with what it saw; ``test_cluster.py`` asserts on it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamtide import StreamsApp
from streamtide.engine.interop import build_session, list_executors
from streamtide.log import open_log
from tests.engine.scenarios import (
    SCENARIOS,
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)


def start_cluster():
    for attempt in range(2):
        try:
            spark = build_session(
                "local-cluster[2,1,1024]",
                "streamtide-cluster-test",
                **{"spark.executor.memory": "512m"},
            )
            deadline = time.monotonic() + 120
            while len(list_executors(spark.sparkContext)) < 2:
                if time.monotonic() > deadline:
                    raise TimeoutError("executors did not register within 120 s")
                time.sleep(0.5)
            return spark
        except Exception:
            if attempt:
                raise
            try:
                spark.stop()  # type: ignore[possibly-undefined]
            except Exception:
                pass


def executor_pid(app_id: str, executor_id: str) -> int:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if (
            "CoarseGrainedExecutorBackend" in line
            and f"--executor-id {executor_id} " in line
            and app_id in line
        ):
            return int(line.split()[0])
    raise LookupError(f"no JVM found for executor {executor_id} of {app_id}")


def placement_ok(progress) -> bool:
    return all(p.ran_on.get(t) == p.owners.get(t) for p in progress for t in p.owners)


def main(workdir: str) -> None:
    root = Path(workdir)
    log_url = f"file://{root / 'log'}"
    events = make_events(400, seed=21)
    first, second = events[:300], events[300:]
    write_events(log_url, first)
    spark = start_cluster()
    sc = spark.sparkContext
    equal_by_scenario = {}
    for name in ("dedup", "punctuation"):
        url = f"file://{root / name / 'log'}"
        scenario_events = make_events(200, seed=len(name))
        write_events(url, scenario_events)
        other = StreamsApp(
            SCENARIOS[name][0](), engine_config(url, str(root / name / "state")), spark=spark
        )
        runs = other.run_until_caught_up(timeout=600)
        other.stop()  # continuous work units hold their executor slots until stopped
        equal_by_scenario[name] = (
            engine_outputs(url, name) == expected_outputs(name, scenario_events)
            and placement_ok(runs)
            and len({e for p in runs for e in p.ran_on.values()}) == 2
        )
    config = engine_config(log_url, str(root / "state"), num_standby_replicas=1)
    app = StreamsApp(session_topology(), config, spark=spark)
    progress = app.run_until_caught_up(timeout=600)
    result = {
        "other_scenarios": equal_by_scenario,
        "executors": [e.id for e in list_executors(sc)],
        "batches_before": len(progress),
        "placement_before": placement_ok(progress),
        "owners_before": progress[-1].owners,
        "standbys_before": progress[-1].standbys,
        "equal_before": engine_outputs(log_url, "session") == expected_outputs("session", first),
    }
    victim = progress[-1].owners["0_0"]
    os.kill(executor_pid(sc.applicationId, victim), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while victim in {e.id for e in list_executors(sc)} and time.monotonic() < deadline:
        time.sleep(0.2)
    write_events(log_url, second)
    after = app.run_until_caught_up(timeout=600)
    log = open_log(log_url)
    changelog = "engine-test-sessions-changelog"
    result.update(
        victim=victim,
        owner_after=after[0].owners["0_0"],
        ran_on_after=after[0].ran_on["0_0"],
        placement_after=placement_ok(after),
        restored_after=after[0].restored_by_task.get("0_0"),
        changelog_records=log.end_offset(changelog, 0),
        equal_after=engine_outputs(log_url, "session") == expected_outputs("session", events),
    )
    # scale out again: local-cluster starts a replacement executor with a new id; a task
    # moves to it only after it caught up as a standby or warm-up, cooperatively
    deadline = time.monotonic() + 90
    while len(list_executors(sc)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    newcomer = sorted({e.id for e in list_executors(sc)} - {result["owner_after"]})
    result["newcomer"] = newcomer[0] if newcomer else None
    history = []
    more = make_events(600, seed=22)[300:]
    write_events(log_url, more)
    for _ in range(12):
        history.append(app.run_batch())
        if result["newcomer"] in history[-1].owners.values():
            break
    moved = next((p for p in history if result["newcomer"] in p.owners.values()), None)
    # every batch so far: the newcomer may have registered (and warmed up) while the batches
    # after the failover ran, before this loop started
    earlier = [p for p in app.history if moved is not None and p.batch < moved.batch]
    arrived = (
        {t for t, owner in moved.owners.items() if owner == result["newcomer"]} if moved else set()
    )
    result.update(
        moved=moved is not None,
        # cooperative: the newcomer warmed up on the task first, or was already within
        # acceptable_recovery_lag of it (KIP-441: then it is caught up and may take it at once)
        cooperative_move=moved is not None
        and all(
            any(t in p.standbys.get(result["newcomer"], []) for p in earlier)
            or moved.restored_by_task.get(t, 0) <= config.acceptable_recovery_lag
            for t in arrived
        ),
        restored_on_move=moved.restored_by_task if moved else None,
        placement_scale_out=placement_ok(history),
    )
    app.run_until_caught_up(timeout=600)
    result["equal_scale_out"] = engine_outputs(log_url, "session") == expected_outputs(
        "session", events + more
    )
    # metrics against the batches' own records: moves between consecutive owners, restores
    batches = list(app.history)
    metrics = app.metrics()
    result.update(
        moves_seen=sum(
            1
            for before, now in itertools.pairwise(batches)
            for task, owner in now.owners.items()
            if before.owners.get(task) not in (None, owner)
        ),
        moves_metric=metrics["streamtide_task_moves_total"],
        restored_seen=sum(b.restored_records for b in batches),
        restored_metric=metrics['streamtide_state_restored_records_total{store="sessions"}'],
        standby_lag_tasks=sorted(
            k for k in metrics if k.startswith("streamtide_standby_lag_records{")
        ),
    )
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
