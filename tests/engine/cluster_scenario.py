"""Run on ``local-cluster[3,1,1024]`` (its own process: one SparkContext per process).

The cluster starts with three executors and is shrunk to two at once (``engine.scaling``).

1. The session topology with one standby replica runs (in micro-batch execution; the other
   scenarios and step 3 run continuously) until caught up; every task must run on
   the executor the assignment named, and the output must equal the test driver's.
2. The executor running task 0_0 is killed (its JVM, started by this run); more input
   arrives; the task moves to the surviving executor, which held its standby, restores only
   what it lacked from the changelog, and the output still equals the driver's. The
   replacement executor takes a task over once it caught up on it.
3. Continuous execution on six partitions: ``StreamsApp.scale`` grows the cluster from two
   executors to three (the newcomer warms tasks up before they move to it; the tasks that do
   not move run, unopened and unrestored, in every batch) and shrinks it back to two (the
   removed executor's tasks go to their standbys); outputs equal the driver's and
   ``streamtide status --history 20`` shows the moves.

Prints one JSON line with what it saw; ``test_cluster.py`` asserts on it.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamtide import StreamsApp
from streamtide.engine import scaling
from streamtide.engine.interop import list_executors
from streamtide.log import open_log
from streamtide.testing.local_cluster import kill_executor, start_local_cluster
from tests.engine.scenarios import (
    SCENARIOS,
    engine_config,
    engine_outputs,
    expected_outputs,
    make_events,
    session_topology,
    write_events,
)

# long enough that a failover batch that waited it out cannot pass for a busy machine's
LOCALITY_WAIT_MS = 300_000


def placement_ok(progress) -> bool:
    return all(p.ran_on.get(t) == p.owners.get(t) for p in progress for t in p.owners)


def main(workdir: str) -> None:
    root = Path(workdir)
    log_url = f"file://{root / 'log'}"
    events = make_events(400, seed=21)
    first, second = events[:300], events[300:]
    write_events(log_url, first)
    spark = start_local_cluster(
        3, "streamtide-cluster-test", **{"spark.locality.wait": f"{LOCALITY_WAIT_MS}ms"}
    )
    sc = spark.sparkContext
    spare = list_executors(sc)[-1].id  # two executors until the scaling phase
    scaling.kill(sc, [spare])
    scaling.request_total(sc, 2)
    scaling.await_executors(sc, lambda ids: spare not in ids, 60, "executor not removed")
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
    config = engine_config(
        log_url, str(root / "state"), num_standby_replicas=1, execution="micro_batch"
    )
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
    # no waiting for Spark to drop the executor: the next batch may still pin work to it, and
    # must then give its job up and re-plan rather than wait out spark.locality.wait
    kill_executor(sc, victim, wait=False)
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
        failover_batch_ms=after[0].duration_ms,
        locality_wait_ms=LOCALITY_WAIT_MS,
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
    result["scaling"] = scaling_phase(spark, root)
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


def scaling_phase(spark, root: Path) -> dict:
    """Scale a continuous application out from two executors to three and back to two."""
    sc = spark.sparkContext
    parts = 6
    log_url = f"file://{root / 'scale' / 'log'}"
    events = make_events(900, seed=31, users=12)
    write_events(log_url, events[:300], partitions=parts)
    config = engine_config(
        log_url,
        str(root / "scale" / "state"),
        app="scale-test",
        num_standby_replicas=1,
        execution="continuous",
    )
    app = StreamsApp(session_topology(), config, spark=spark)
    tasks = {f"0_{p}" for p in range(parts)}
    fed = iter(range(300, 900, 20))

    def batches(count: int, until=None) -> list:
        """Run up to ``count`` batches, 20 more events before each, stopping after ``until``."""
        done = []
        for _ in range(count):
            start = next(fed, None)
            if start is not None:
                write_events(log_url, events[start : start + 20], partitions=parts)
            done.append(app.run_batch())
            if until is not None and until(done):
                break
        return done

    try:
        app.run_until_caught_up(timeout=600)
        two = sorted(e.id for e in list_executors(sc))
        generations = {k: v["generation"] for k, v in app._workers.slots().items()}
        three = app.scale(3, timeout=180)
        newcomer = sorted(set(three) - set(two))[0]
        # batches until the newcomer runs tasks and two more batches moved nothing
        grown = batches(
            15,
            lambda done: (
                len(done) >= 3
                and newcomer in done[-1].owners.values()
                and done[-1].owners == done[-2].owners == done[-3].owners
            ),
        )
        moves = [
            (i, task)
            for i in range(1, len(grown))
            for task, owner in grown[i].owners.items()
            if grown[i - 1].owners.get(task) != owner
        ]
        moved = {task for _, task in moves}
        kept = tasks - moved
        stayed_slots = {
            k: v["generation"] for k, v in app._workers.slots().items() if k.executor in two
        }
        out = {
            "two": two,
            "three": three,
            "newcomer": newcomer,
            "out_moves": [[grown[i].batch, task, grown[i].owners[task]] for i, task in moves],
            "out_to_newcomer": bool(moves)
            and all(grown[i].owners[t] == newcomer for i, t in moves),
            "warmed_up_first": bool(moves)
            and all(
                any(task in grown[j].standbys.get(newcomer, []) for j in range(i))
                for i, task in moves
            ),
            "consecutive": [p.batch for p in grown]
            == list(range(grown[0].batch, grown[0].batch + len(grown))),
            "every_task_every_batch": all(set(p.owners) == tasks for p in grown),
            "kept_tasks": sorted(kept),
            "kept_never_stopped": bool(kept)
            and all(
                p.ran_on[t] == grown[0].ran_on[t] and p.restored_by_task.get(t, 0) == 0
                for p in grown
                for t in kept
            ),
            "slots_not_relaunched": all(generations.get(k) == g for k, g in stayed_slots.items()),
        }
        # scale in: the executor with the fewest tasks leaves; its tasks go to standbys
        before = grown[-1]
        app.scale(2, timeout=180)
        after = app.last_progress
        remaining = sorted(e.id for e in list_executors(sc))
        (removed,) = set(three) - set(remaining)
        handed = sorted(t for t, owner in before.owners.items() if owner == removed)
        changelog = "scale-test-sessions-changelog"
        log = open_log(log_url)
        out.update(
            removed=removed,
            handed=handed,
            to_standbys=bool(handed)
            and all(t in before.standbys.get(after.owners[t], []) for t in handed),
            restored_on_scale_in={t: after.restored_by_task.get(t, 0) for t in handed},
            changelog_records={t: log.end_offset(changelog, int(t[2:])) for t in handed},
            scale_in_kept_running=all(
                after.ran_on[t] == before.ran_on[t] and after.restored_by_task.get(t, 0) == 0
                for t in tasks - set(handed)
            ),
        )
        for start in fed:
            write_events(log_url, events[start : start + 20], partitions=parts)
        app.run_until_caught_up(timeout=600)
        out["equal"] = engine_outputs(log_url, "session") == expected_outputs(
            "session", events, partitions=parts
        )
        out["history"] = app.status(history=50)["history"]
        status = subprocess.run(
            [
                sys.executable,
                "-m",
                "streamtide.cli",
                "status",
                "--application-id",
                "scale-test",
                "--log",
                log_url,
                "--history",
                "20",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, COLUMNS="220"),
        )
        out["status_text"] = status.stdout + status.stderr
    finally:
        app.stop()
    return out


if __name__ == "__main__":
    main(sys.argv[1])
