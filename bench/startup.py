"""Start-up: ``StreamsApp(...).start()`` on a running SparkSession to the first committed batch.

Each round runs in a fresh process (``--one``): it builds a SparkSession (Spark's own start,
reported separately: a streaming application pays it once), then starts the first
application of the session (its work units pay for the Python workers' first job: a fresh
interpreter, its imports) and, once that one stopped, a later application on the same
session (the Python workers are running by then). Both run the latency workload
(``bench.latency.topology``) in continuous execution with a few hundred records waiting, on
the file log and on Kafka (the local test broker). Rounds alternate the logs.

Printed per log and application: the median time from ``StreamsApp(...)`` to the first
committed batch, and where it went: building the application, the first batch's planning,
launching the work units until they connected, their run, sealing and the commit; and the
imports of a work unit's Python worker (``streamtide.engine.worker`` and the log, in a fresh
interpreter).

    python -m bench startup [--rounds 3] [--logs file kafka] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.system_load import load_line

APPS = ("first", "later")
#: Records waiting when each application starts (its first batch has work to do).
WAITING = 400
#: The first batch's phases printed, in order (``BatchProgress.phases_ms``).
PHASES = ("plan", "unit.longest", "task.restore", "seal", "commit")


def _write_input(log_url: str, topic: str, partitions: int, count: int) -> None:
    import random

    from bench.latency_agents import event
    from streamtide.log import LogRecord, open_log
    from streamtide.log.partitioner import partition_for_key

    log = open_log(log_url, **_options(log_url))
    try:
        rnd = random.Random(7)
        now = int(time.time() * 1000)
        by_partition: dict[int, list[LogRecord]] = {}
        for i in range(count):
            key = f"user-{i % 50}".encode()
            record = LogRecord(key=key, value=event(rnd, i), timestamp=now)
            by_partition.setdefault(partition_for_key(key, partitions), []).append(record)
        for partition, records in by_partition.items():
            log.append(topic, partition, records)
    finally:
        log.close()


def _options(log_url: str) -> dict[str, str]:
    from bench.latency import KAFKA_OPTIONS

    return dict(KAFKA_OPTIONS) if log_url.startswith("kafka://") else {}


def one_app(spark: Any, log_url: str, root: Path, name: str, partitions: int) -> dict[str, Any]:
    """Start one application of the latency workload with ``WAITING`` records waiting;
    the time to its first committed batch and that batch's breakdown."""
    from bench.latency import Topics, topology
    from streamtide import StreamsApp, StreamsConfig
    from streamtide.log import open_log

    topics = Topics(name)
    log = open_log(log_url, **_options(log_url))
    try:
        for topic in (topics.source, *topics.outputs(True)):
            log.create_topic(topic, partitions)
    finally:
        log.close()
    _write_input(log_url, topics.source, partitions, WAITING)
    config = StreamsConfig(
        application_id=name,
        log=log_url,
        log_options=_options(log_url),
        state_dir=str(root / f"state-{name}"),
        commit_interval=100,
        execution="continuous",
    )
    began = time.perf_counter()
    app = StreamsApp(topology(topics), config, spark=spark)
    built = time.perf_counter()
    app.start()
    try:
        while app.last_progress is None:
            app.await_termination(0.005)  # raises what stopped the app
            if time.perf_counter() - began > 300:
                raise TimeoutError(f"{name}: no batch committed within 300 s")
        first_s = time.perf_counter() - began
        first = app.history[0]
    finally:
        stop_began = time.perf_counter()
        app.stop()
        stopped_s = time.perf_counter() - stop_began
    phases = dict(first.phases_ms)
    wait_ms = first.work_unit_wait_ms
    return {
        "first_commit_s": round(first_s, 3),
        "build_s": round(built - began, 3),
        "batch_ms": first.duration_ms,
        "records": first.input_records,
        "phases_ms": phases,
        # what the driver waited for its work units beyond their own run: launching the
        # Spark jobs, the Python workers' start, connecting, the messages
        "launch_ms": round(max(0.0, wait_ms - phases.get("unit.longest", 0.0)), 3),
        "stop_s": round(stopped_s, 3),
    }


def worker_imports_s(log_url: str) -> float:
    """Seconds a fresh interpreter takes to import what a work unit imports before its first
    run: ``streamtide.engine.worker`` and the log's module."""
    module = "kafka_log" if log_url.startswith("kafka://") else "file_log"
    code = (
        "import time; t = time.perf_counter(); import streamtide.engine.worker; "
        f"import streamtide.log.{module}; print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def round_in_process(log_url: str, root: Path, master: str, partitions: int) -> dict[str, Any]:
    """One round (``--one``): Spark's start, the first application, a later application."""
    began = time.perf_counter()
    from streamtide.engine.interop import build_session

    spark = build_session(master, "streamtide-startup")
    spark.range(1).count()  # the JVM's first job (no Python worker starts for it)
    result: dict[str, Any] = {"spark_start_s": round(time.perf_counter() - began, 3)}
    try:
        tag = f"{os.getpid()}"
        for which in APPS:
            result[which] = one_app(spark, log_url, root, f"start-{which}-{tag}", partitions)
    finally:
        spark.stop()
    result["worker_imports_s"] = round(worker_imports_s(log_url), 3)
    return result


def _round(log_url: str, root: Path, master: str, partitions: int) -> dict[str, Any]:
    bench_root = str(Path(__file__).resolve().parent.parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([bench_root, os.environ.get("PYTHONPATH", "")]),
    }
    args = ["--one", log_url, "--root", str(root), "--master", master]
    args += ["--partitions", str(partitions)]
    out = subprocess.run(
        [sys.executable, "-m", "bench.startup", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"a start-up round failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds of one log."""
    out: dict[str, Any] = {
        "spark_start_s": _median([r["spark_start_s"] for r in rounds]),
        "worker_imports_s": _median([r["worker_imports_s"] for r in rounds]),
    }
    for which in APPS:
        apps = [r[which] for r in rounds]
        out[which] = {
            "first_commit_s": _median([a["first_commit_s"] for a in apps]),
            "build_s": _median([a["build_s"] for a in apps]),
            "launch_ms": _median([a["launch_ms"] for a in apps]),
            "phases_ms": {p: _median([a["phases_ms"].get(p, 0.0) for a in apps]) for p in PHASES},
            "stop_s": _median([a["stop_s"] for a in apps]),
        }
    return out


def print_summary(log: str, s: dict[str, Any], rounds: int) -> None:
    print(
        f"{log} log ({rounds} rounds, medians): Spark's own start {s['spark_start_s']:.2f} s; "
        f"a work unit's imports in a fresh interpreter {s['worker_imports_s']:.2f} s"
    )
    for which in APPS:
        a = s[which]
        parts = [f"build {a['build_s'] * 1000:.0f}", f"launch+connect {a['launch_ms']:.0f}"]
        parts += [f"{p} {a['phases_ms'][p]:.0f}" for p in PHASES]
        print(
            f"  {which} application of the session: start to first commit "
            f"{a['first_commit_s']:.2f} s ({', '.join(parts)} ms); stop {a['stop_s']:.2f} s"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--logs", nargs="+", choices=["file", "kafka"], default=["file", "kafka"])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--output", type=Path, help="also write the results as JSON here")
    p.add_argument("--one", metavar="LOG_URL", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.one:
        print(json.dumps(round_in_process(args.one, args.root, args.master, args.partitions)))
        return
    load = load_line()
    root = Path(tempfile.mkdtemp(prefix="streamtide-startup-"))
    broker = None
    results: dict[str, list[dict[str, Any]]] = {log: [] for log in args.logs}
    try:
        urls = {"file": f"file://{root / 'log'}"}
        if "kafka" in args.logs:
            from streamtide.testing.kafka_broker import start_broker

            broker = start_broker(root / "kafka")
            urls["kafka"] = broker.url
        for n in range(args.rounds):
            for log in args.logs:
                results[log].append(
                    _round(urls[log], root / f"{log}-{n}", args.master, args.partitions)
                )
                print(f"  round {n + 1} {log}: {json.dumps(results[log][-1])}", flush=True)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print()
    summaries = {log: summary(rounds) for log, rounds in results.items()}
    for log, s in summaries.items():
        print_summary(log, s, len(results[log]))
    print(load.describe())
    out = {"load_at_start": load.as_json(), "summary": summaries, "rounds": results}
    if args.output:
        args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"load_at_start": load.as_json(), "summary": summaries}))


if __name__ == "__main__":
    main()
