"""Run an application with standbys on a real Spark standalone cluster (its own process: one
SparkContext per process).

A master and three workers start as separate processes with Spark's launcher
(``streamtide.testing.standalone``), each worker with its own work, local and state
directories; the application (a count per key with one standby, continuous execution, the
file log) keeps each executor's state in its worker's directory (``$STREAMTIDE_HOST_DIR``).

1. Input arrives and the application catches up on three executors.
2. The whole worker running task 0_0 is killed (its JVM and its executor's); more input
   arrives; the dead executor's tasks move to the executors holding their standbys, which
   replay only what they lack; every count is emitted exactly once.
3. The worker starts again; the master gives the application a new executor there, which
   warms tasks up before they move to it ("warm-up caught up"), and the counts stay exact.

Prints ``RESULT <json>`` with what it saw; ``test_standalone_cluster.py`` asserts on it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamtide import Consumed, Materialized, Produced, Serdes, StreamsBuilder, StreamsConfig
from streamtide.engine.app import StreamsApp
from streamtide.engine.interop import build_session, list_executors
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing.local_cluster import wait_for_executors
from streamtide.testing.standalone import HOST_DIR_ENV, LEAN_JVM, StandaloneCluster

PARTITIONS = 6
USERS = 24
STRING = Serdes.string()
APP = "standalone-test"


def topology():
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_(STRING, STRING))
        .group_by_key()
        .count(Materialized.as_("counts"))
        .to_stream()
        .to("counts-out", Produced.with_(STRING, Serdes.long()))
    )
    return builder.build()


def feed(log, round_: int, per_user: int) -> None:
    """``per_user`` clicks of every user, each user's to its key's partition."""
    by_partition: dict[int, list[LogRecord]] = {}
    stamp = 1_000_000 + round_ * 10_000
    for i in range(per_user):
        for user in range(USERS):
            key = STRING.serialize(f"user-{user}")
            record = LogRecord(key, b"click", stamp + i)
            by_partition.setdefault(partition_for_key(key, PARTITIONS), []).append(record)
    for partition, records in by_partition.items():
        log.append("clicks", partition, records)


def counts_exactly_once(log, clicks_per_user: int) -> bool:
    """Every user's counts, in order, are 1..n exactly: none lost, none repeated."""
    seen: dict[str, list[int]] = {}
    for partition in range(PARTITIONS):
        for record in log.read("counts-out", partition):
            seen.setdefault(STRING.deserialize(record.key), []).append(
                Serdes.long().deserialize(record.value)
            )
    expected = list(range(1, clicks_per_user + 1))
    return len(seen) == USERS and all(counts == expected for counts in seen.values())


def run_until(app, done, limit: int = 30) -> list:
    ran = []
    for _ in range(limit):
        ran.append(app.run_batch())
        if done(ran[-1]):
            break
    return ran


def main(workdir: str) -> None:
    started = time.monotonic()
    root = Path(workdir)
    cluster = None
    for attempt in range(2):  # registration can stall under load: retry a failed start once
        cluster = StandaloneCluster(root / f"cluster-{attempt}", workers=3)
        try:
            cluster.start(timeout=90)
            break
        except Exception:
            cluster.stop()
            if attempt:
                raise
    assert cluster is not None
    result: dict = {"cluster_start_s": round(time.monotonic() - started, 1)}
    try:
        spark = build_session(
            cluster.master_url,
            APP,
            **{
                "spark.executor.cores": "1",
                "spark.executor.memory": "512m",
                "spark.cores.max": "3",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.memory": "512m",
                # the test's executors and driver start on less CPU; nothing here runs long
                "spark.executor.extraJavaOptions": LEAN_JVM,
                "spark.driver.extraJavaOptions": LEAN_JVM,
            },
        )
        sc = spark.sparkContext
        wait_for_executors(sc, 3, timeout=120)
        result["session_s"] = round(time.monotonic() - started, 1)
        log_url = f"file://{root / 'log'}"
        log = open_log(log_url)
        log.create_topic("clicks", PARTITIONS)
        config = StreamsConfig(
            application_id=APP,
            log=log_url,
            state_dir=f"${HOST_DIR_ENV}/state",
            num_standby_replicas=1,
            cache_enabled=False,
            max_records_per_batch=1000,
        )
        app = StreamsApp(topology(), config, spark=spark)
        per_user = 0
        feed(log, 0, 20)
        per_user += 20
        before = app.run_until_caught_up(timeout=300)
        last = before[-1]
        executors = sorted(e.id for e in list_executors(sc))
        where = {e: cluster.worker_of(sc.applicationId, e) for e in executors}
        result.update(
            executors=executors,
            workers_of_executors=where,
            owners_before=last.owners,
            standbys_before=last.standbys,
            exact_before=counts_exactly_once(log, per_user),
            # each executor's stores are in its own worker's state directory
            state_on_own_host={
                e: (cluster.nodes[w].state_dir / f"client-{e}" / APP).is_dir()
                for e, w in where.items()
                if w is not None
            },
        )
        victim = last.owners["0_0"]
        victim_worker = where[victim]
        lost_tasks = sorted(t for t, owner in last.owners.items() if owner == victim)
        changelog = f"{APP}-counts-changelog"
        killed_at = time.monotonic()
        cluster.kill_worker(victim_worker)
        feed(log, 1, 10)
        per_user += 10
        after = app.run_until_caught_up(timeout=300)
        recovered = after[0]
        result.update(
            victim=victim,
            victim_worker=victim_worker,
            lost_tasks=lost_tasks,
            recovery_s=round(time.monotonic() - killed_at, 1),
            owners_after={t: recovered.owners[t] for t in lost_tasks},
            standby_holders={
                t: sorted(c for c, ts in last.standbys.items() if t in ts) for t in lost_tasks
            },
            restored_after={t: recovered.restored_by_task.get(t, 0) for t in lost_tasks},
            changelog_records={t: log.end_offset(changelog, int(t[2:])) for t in lost_tasks},
            exact_after=counts_exactly_once(log, per_user),
        )
        cluster.start_worker(victim_worker)
        deadline = time.monotonic() + 120
        while len(list_executors(sc)) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        newcomers = sorted({e.id for e in list_executors(sc)} - set(executors))
        newcomer = newcomers[0] if newcomers else None
        result.update(
            newcomer=newcomer,
            newcomer_worker=cluster.worker_of(sc.applicationId, newcomer) if newcomer else None,
        )
        rounds = 0

        def moved_back(progress) -> bool:
            return newcomer in progress.owners.values()

        back: list = []
        while newcomer is not None and rounds < 8 and not any(moved_back(p) for p in back):
            rounds += 1
            feed(log, 1 + rounds, 2)
            per_user += 2
            back += run_until(app, lambda p: moved_back(p) or not app.input_waiting(), 10)
        history = app.status(history=200)["history"]
        result.update(
            batches_back=len(back),
            owners_back=back[-1].owners if back else {},
            history=[
                {k: e.get(k) for k in ("batch", "kind", "task", "source", "target", "reason")}
                for e in history
            ],
            newcomer_state=bool(newcomer)
            and (cluster.nodes[victim_worker].state_dir / f"client-{newcomer}" / APP).is_dir(),
            exact_back=counts_exactly_once(log, per_user),
            clicks_per_user=per_user,
        )
        app.stop()
        spark.stop()
    finally:
        cluster.stop()
    result["total_s"] = round(time.monotonic() - started, 1)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
