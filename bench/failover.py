"""Failover benchmark: how long an application needs to recover when an executor dies, with
and without a standby replica of its state.

``python -m bench.failover [--keys 100000]`` starts ``local-cluster[3,1,1024]`` (three executor
JVMs of one core each), then for ``num_standby_replicas`` 1 and 0, on the same state size:

1. loads ``--keys`` distinct keys into a key-value count (``group_by_key().count()``), so every
   task holds its share of that state in RocksDB and in its changelog;
2. runs the application in the background while a feeder appends updates to existing keys;
3. SIGKILLs the JVM of the executor running task ``0_0`` (a crash, not a graceful stop);
4. measures the time from the kill to the commit of the first batch in which every task of
   the dead executor ran again elsewhere, and the changelog records those tasks restored
   between the kill and that commit;
5. waits for the replacement executor (``local-cluster`` starts one), for the assignment to
   settle and the standbys to catch up, and kills again (``--kills``, 3 by default); the
   figures are the medians over the kills.

Prints a table and, as its last line, one JSON object:
``{"state_records": N, "standby": {"recovery_s": x, "restored_records": r},
"no_standby": {"recovery_s": y, "restored_records": q}}``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from streamtide import Consumed, Materialized, Serdes, StreamsBuilder, StreamsConfig, Topology
from streamtide.engine.app import StreamsApp
from streamtide.engine.progress import BatchProgress
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing.local_cluster import kill_executor, start_local_cluster, wait_for_executors

TOPIC = "updates"
STORE = "counts"
STRING = Serdes.string()
EXECUTORS = 3


def count_topology() -> Topology:
    """A count per key: one state record per distinct key."""
    builder = StreamsBuilder()
    (
        builder.stream(TOPIC, Consumed.with_(STRING, STRING))
        .group_by_key()
        .count(Materialized.as_(STORE))
        .to_stream()
        .to("counts-out")
    )
    return builder.build()


def key_of(i: int) -> bytes:
    return STRING.serialize(f"k{i:08d}")


def append(log: Any, partitions: int, keys: list[int], timestamp: int) -> None:
    """One record per key, to the partition of its key."""
    rows: dict[int, list[LogRecord]] = {}
    for i in keys:
        key = key_of(i)
        rows.setdefault(partition_for_key(key, partitions), []).append(
            LogRecord(key, b"x", timestamp)
        )
    for partition, records in rows.items():
        log.append(TOPIC, partition, records)


class Feeder(threading.Thread):
    """Appends ``per_tick`` updates of random existing keys every ``tick`` seconds."""

    def __init__(self, log: Any, partitions: int, keys: int, per_tick: int, tick: float) -> None:
        super().__init__(name="failover-feeder", daemon=True)
        self.log, self.partitions, self.keys = log, partitions, keys
        self.per_tick, self.tick = per_tick, tick
        self.stopped = threading.Event()
        self.rnd = random.Random(7)

    def run(self) -> None:
        while not self.stopped.wait(self.tick):
            picked = [self.rnd.randrange(self.keys) for _ in range(self.per_tick)]
            append(self.log, self.partitions, picked, int(time.time() * 1000))


def wait_for(predicate: Any, timeout: float, what: str, app: StreamsApp) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        app.await_termination(timeout=0)  # re-raises the background loop's error
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def standbys_caught_up(app: StreamsApp) -> bool:
    """Every task's standby reported lag 0 in its latest batch."""
    lags = {k: v for k, v in app.metrics().items() if k.startswith("streamtide_standby_lag_")}
    return bool(lags) and not any(lags.values())


def run_case(spark: Any, root: Path, args: argparse.Namespace, standbys: int) -> dict[str, Any]:
    """Load the state, kill the executor of task 0_0 under load, measure the recovery."""
    sc = spark.sparkContext
    case = root / f"standby-{standbys}"
    log_url = f"file://{case / 'log'}"
    log = open_log(log_url)
    log.create_topic(TOPIC, args.partitions)
    began = time.monotonic()
    chunk = 200_000
    for start in range(0, args.keys, chunk):
        append(log, args.partitions, list(range(start, min(args.keys, start + chunk))), 1)
    config = StreamsConfig(
        application_id=f"failover-{standbys}",
        log=log_url,
        state_dir=str(case / "state"),
        default_key_serde=STRING,
        default_value_serde=STRING,
        num_standby_replicas=standbys,
        execution=args.execution,
        commit_interval=args.commit_interval,
    )
    app = StreamsApp(count_topology(), config, spark=spark)
    app.run_until_caught_up(timeout=3600)
    load_s = time.monotonic() - began
    changelog_records = sum(
        log.end_offset(f"{config.application_id}-{STORE}-changelog", p)
        for p in range(args.partitions)
    )
    feeder = Feeder(log, args.partitions, args.keys, args.updates_per_tick, args.tick)
    feeder.start()
    app.start()
    kills = []
    try:
        for _ in range(args.kills):
            settle(app, sc, standbys)
            kills.append(kill_and_recover(app, sc))
            print(f"  standbys={standbys}: {json.dumps(kills[-1])}", file=sys.stderr, flush=True)
    finally:
        feeder.stopped.set()
        feeder.join()
        app.stop()
    wait_for_executors(sc, EXECUTORS, timeout=180)  # local-cluster replaces the dead one
    return {
        "recovery_s": statistics.median(k["recovery_s"] for k in kills),
        "restored_records": int(statistics.median(k["restored_records"] for k in kills)),
        "kills": kills,
        "changelog_records": changelog_records,
        "load_s": round(load_s, 1),
    }


def settle(app: StreamsApp, sc: Any, standbys: int) -> None:
    """Wait for three executors, an assignment that stopped changing (three batches with
    the same owners) and, with standbys, every standby caught up."""
    wait_for_executors(sc, EXECUTORS, timeout=180)

    def stable() -> bool:
        last = list(app.history)[-3:]
        return (
            len(last) == 3
            and len({e for p in last for e in p.ran_on.values()}) == EXECUTORS
            and last[0].owners == last[1].owners == last[2].owners
            and (not standbys or standbys_caught_up(app))
        )

    wait_for(stable, 1800, "a stable assignment", app)


def kill_and_recover(app: StreamsApp, sc: Any) -> dict[str, Any]:
    """Kill the executor running task 0_0; wait for the first batch in which all its tasks
    ran elsewhere; the time from the kill to that batch's commit and what those tasks
    restored."""
    owners = dict(app.history[-1].owners)
    victim = owners["0_0"]
    moved = sorted(t for t, owner in owners.items() if owner == victim)
    killed_at = kill_executor(sc, victim)

    def recovered() -> BatchProgress | None:
        for p in list(app.history):
            if p.committed_at >= killed_at * 1000 and all(
                p.ran_on.get(t) not in (None, victim) for t in moved
            ):
                return p
        return None

    wait_for(lambda: recovered() is not None, 1800, "recovery", app)
    done = recovered()
    assert done is not None
    after = [p for p in app.history if killed_at * 1000 <= p.committed_at <= done.committed_at]
    return {
        "recovery_s": round(done.committed_at / 1000 - killed_at, 3),
        "restored_records": sum(p.restored_by_task.get(t, 0) for p in after for t in moved),
        "moved_tasks": moved,
        "victim": victim,
        "batches": len(after),
        "recovery_batch_ms": done.duration_ms,
    }


def print_table(keys: int, results: dict[str, dict[str, Any]]) -> None:
    header = (
        f"{'case':<11} {'state':>10} {'kill':>5} {'moved tasks':>12} {'recovery s':>11} "
        f"{'restored':>10} {'% of state':>10} {'batches':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        rows = [(str(i + 1), k) for i, k in enumerate(r["kills"])]
        rows.append(("median", {**r, "moved_tasks": [], "batches": ""}))
        for label, k in rows:
            print(
                f"{name:<11} {keys:>10,} {label:>5} {','.join(k['moved_tasks']):>12} "
                f"{k['recovery_s']:>11.2f} {k['restored_records']:>10,} "
                f"{100 * k['restored_records'] / keys:>9.1f}% {k['batches']:>8}"
            )
        print(f"{name:<11} loaded in {r['load_s']:.1f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--keys", type=int, default=100_000, help="state records (100,000)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kills", type=int, default=3, help="executor kills per case (3)")
    parser.add_argument("--execution", choices=("continuous", "micro_batch"), default="continuous")
    parser.add_argument(
        "--commit-interval",
        type=int,
        default=100,
        help="ms (100): an idle loop waits this long for input, which a recovery then includes",
    )
    parser.add_argument("--updates-per-tick", type=int, default=300)
    parser.add_argument("--tick", type=float, default=0.1, help="seconds between updates")
    parser.add_argument("--workdir", help="keep the logs and state here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.keys < 1 or args.kills < 1 or args.partitions < EXECUTORS:
        parser.error(f"--keys and --kills must be >= 1 and --partitions >= {EXECUTORS}")
    root = Path(args.workdir or tempfile.mkdtemp(prefix="streamtide-failover-"))
    spark = start_local_cluster(EXECUTORS, "streamtide-failover")
    results: dict[str, dict[str, Any]] = {}
    try:
        for name, standbys in (("standby", 1), ("no_standby", 0)):
            results[name] = run_case(spark, root, args, standbys)
            print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    finally:
        spark.stop()
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    print_table(args.keys, results)
    print(
        json.dumps(
            {
                "state_records": args.keys,
                **{
                    name: {k: r[k] for k in ("recovery_s", "restored_records")}
                    for name, r in results.items()
                },
            }
        )
    )


if __name__ == "__main__":
    main()
