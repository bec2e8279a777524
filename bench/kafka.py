"""Streamtide on Kafka: against the embedded file log, and against Quix Streams on the same
broker.

Starts a local Kafka-protocol broker (noida-db, a development dependency) and writes one
workload (``--events`` JSON events over 5,000 keys in 4 partitions, each with an event id,
5% of them resent; event time starting a day ago) to it and to a file log.

1. **Kafka against the file log** (one SparkSession, Python workers warmed up first): each
   operation (dedup by event id within 10 s, session count with a 30 s gap, 60 s tumbling
   count and the mixed pipeline; all every update) runs on both logs, and the changelog
   records each input event cost are reported. On Kafka every task commits each batch in a
   transaction of its own.
2. **Against Quix Streams** (installed by the benchmark into ``bench/.quix-venv``): dedup,
   tumbling count and session count, each run a fresh process per system, interleaved over
   ``--repeats``: Quix (its defaults, exactly once: ``bench/quix_runner.py``), Streamtide at its
   defaults, and Streamtide held to about Quix's commit count (fixed batches of the size that
   gives as many batches as Quix made commits) (``bench/kafka_streamtide.py``). Timed from
   the moment the application is built (Streamtide on an already running SparkSession, whose
   start is reported apart; Quix at ``Application(...)``) until all input is committed; each
   system's start-up is reported separately (Quix: to the first record processed;
   Streamtide: to the first committed batch less its work units' processing of it). The
   first repeat's outputs are compared.

    .venv/bin/python -m bench.kafka [--events N] [--only OP ...] [--repeats 2]
                                    [--skip-file-log | --skip-quix]

The last line printed is one JSON object with the results.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import peer_compare, quix_env
from bench.phases import phase_lines
from bench.streamtide_bench import run_operation
from bench.system_load import load_line
from bench.workload import (
    TOPIC,
    Workload,
    by_partition,
    generate,
    write_log,
    write_pipeline_log,
)

#: Topic settings on the broker: the users table's records carry timestamp 1, which Kafka's
#: default time retention (7 days) would delete.
KAFKA_OPTIONS = {"topic.retention.ms": "-1"}
FILE_LOG_OPERATIONS = ("dedup", "session-count", "window-count", "pipeline")
PEER_OPERATIONS = ("dedup", "window-count", "session-count")
DAY_MS = 86_400_000


def compare_logs(
    spark: Any, root: Path, logs: dict[str, tuple[str, dict[str, str]]], w: Workload, ops: list[str]
) -> dict[str, Any]:
    """Each operation on the file log and on Kafka in one run: records/s and changelog
    records per input event."""
    results: dict[str, Any] = {}
    print(
        f"{'operation':<15}{'file log rec/s':>16}{'kafka rec/s':>14}{'kafka/file':>12}"
        f"{'changelog/event':>17}{'batches file/kafka':>20}"
    )
    for op in ops:
        rates = {}
        for kind, (url, options) in logs.items():
            done = run_operation(spark, url, root / "state" / kind, op, w, options)
            rates[kind] = {
                "records_per_s": round(w.events / done.seconds),
                "seconds": round(done.seconds, 2),
                "batches": len(done.batches),
                "input_records": done.input_records,
                "changelog_records": done.changelog_records,
                "changelog_per_event": round(done.changelog_records / w.events, 3),
                "mean_batch_phases_ms": mean_phases(done.batches),
            }
        ratio = rates["kafka"]["records_per_s"] / max(rates["file"]["records_per_s"], 1)
        results[op] = {**rates, "kafka_vs_file": round(ratio, 3)}
        print(
            f"{op:<15}{rates['file']['records_per_s']:>16,}{rates['kafka']['records_per_s']:>14,}"
            f"{ratio:>11.2f}x{rates['kafka']['changelog_per_event']:>17.2f}"
            f"{rates['file']['batches']:>11}/{rates['kafka']['batches']}",
            flush=True,
        )
        for kind in logs:
            print(f"  mean {kind} batch of {op}:", flush=True)
            for line in phase_lines(rates[kind]["mean_batch_phases_ms"]):
                print(f"    {line}", flush=True)
    return results


def mean_phases(batches: list[Any]) -> dict[str, float]:
    """The mean batch's ``phases_ms`` (``bench.phases``), with its duration as ``batch``."""
    total: dict[str, float] = {"batch": 0.0}
    for batch in batches:
        total["batch"] += batch.duration_ms
        for phase, ms in batch.phases_ms.items():
            total[phase] = total.get(phase, 0.0) + ms
    return {k: round(v / max(len(batches), 1), 1) for k, v in total.items()}


def _run_json(command: list[str], what: str) -> dict[str, Any]:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def run_quix(python: Path, broker: Any, root: Path, op: str, repeat: int, w: Workload) -> dict:
    from streamtide.log import open_log

    output = f"quix-{op}-{repeat}-out"
    log = open_log(broker.url, **KAFKA_OPTIONS)
    try:
        log.create_topic(output, w.partitions)
    finally:
        log.close()
    emitted = root / f"emitted-quix-{op}-{repeat}.json"
    result = _run_json(
        [
            str(python),
            str(quix_env.RUNNER),
            "--broker",
            broker.bootstrap,
            "--topic",
            TOPIC,
            "--partitions",
            str(w.partitions),
            "--operation",
            op,
            "--group",
            f"quix-{op}-{repeat}",
            "--output",
            output,
            "--state-dir",
            str(root / "quix-state" / f"{op}-{repeat}"),
            "--emitted",
            str(emitted),
        ],
        f"Quix {op}",
    )
    return {**result, "emitted": str(emitted)}


def run_streamtide(
    broker: Any, root: Path, op: str, name: str, w: Workload, batch: int | None, master: str
) -> dict:
    emitted = root / f"emitted-{name}.json"
    command = [
        sys.executable,
        "-m",
        "bench.kafka_streamtide",
        "--log",
        broker.url,
        "--operation",
        op,
        "--application-id",
        name,
        "--state-dir",
        str(root / "peer-state"),
        "--workload",
        json.dumps(w.describe()),
        "--emitted",
        str(emitted),
        "--master",
        master,
    ]
    if batch is not None:
        command += ["--max-records-per-batch", str(batch), "--fixed-batch-size"]
    return {**_run_json(command, f"Streamtide {op}"), "emitted": str(emitted)}


def compare_quix(
    broker: Any, root: Path, w: Workload, ops: list[str], repeats: int, master: str
) -> dict[str, Any]:
    """Quix, Streamtide at its defaults and Streamtide held to Quix's commit count, each a
    fresh process, interleaved; the first repeat's outputs compared."""
    python = quix_env.quix_python()
    version = quix_env.quix_version(python)
    print(f"Quix Streams {version} ({python})", flush=True)
    longest = max(len(p) for p in by_partition(generate(w), w.partitions))
    runs: dict[str, dict[str, list[dict]]] = {op: {} for op in ops}
    checks: dict[str, Any] = {}
    for repeat in range(repeats):
        for op in ops:
            quix = run_quix(python, broker, root, op, repeat, w)
            batch = math.ceil(longest / max(quix["commits"], 1))
            mine = run_streamtide(broker, root, op, f"st-{op}-{repeat}", w, None, master)
            held = run_streamtide(broker, root, op, f"st-held-{op}-{repeat}", w, batch, master)
            for system, result in (("quix", quix), ("streamtide", mine), ("held", held)):
                runs[op].setdefault(system, []).append(result)
                print(
                    f"  repeat {repeat} {op} {system}: {result['seconds']:.1f} s "
                    f"(start-up {result['startup_s']} s, first commit "
                    f"{result['first_commit_s']} s), {result['commits']} commits",
                    flush=True,
                )
            if repeat == 0:
                checks[op] = peer_compare.compare(
                    op, _load(mine["emitted"]), _load(quix["emitted"])
                )
    return {"quix_version": version, "runs": runs, "checks": checks}


def _load(path: str) -> list[list[Any]]:
    return json.loads(Path(path).read_text())


def print_peers(peers: dict[str, Any], events: int) -> None:
    print(
        f"\n{'operation':<15}{'Quix rec/s':>12}{'Streamtide':>12}{'ratio':>8}{'ST held':>10}"
        f"{'ratio':>8}{'commits Q/ST/held':>19}{'start-up s Q/ST (Spark)':>26}"
    )
    for op, systems in peers["runs"].items():
        rate = {
            s: events / statistics.median(r["seconds"] for r in rs) for s, rs in systems.items()
        }
        commits = "/".join(str(systems[s][0]["commits"]) for s in ("quix", "streamtide", "held"))
        startup = (
            f"{statistics.median(r['startup_s'] for r in systems['quix']):.1f}/"
            f"{statistics.median(r['startup_s'] for r in systems['streamtide']):.1f} "
            f"({statistics.median(r['spark_start_s'] for r in systems['streamtide']):.1f})"
        )
        print(
            f"{op:<15}{rate['quix']:>12,.0f}{rate['streamtide']:>12,.0f}"
            f"{rate['streamtide'] / rate['quix']:>7.2f}x{rate['held']:>10,.0f}"
            f"{rate['held'] / rate['quix']:>7.2f}x{commits:>19}{startup:>26}"
        )
    for op, check in peers["checks"].items():
        print(f"{op}: {peer_compare.describe(op, check)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000, help="events (1,000,000)")
    parser.add_argument("--keys", type=int, default=5_000, help="distinct keys (5,000)")
    parser.add_argument("--partitions", type=int, default=4, help="input partitions (4)")
    parser.add_argument("--only", nargs="+", choices=FILE_LOG_OPERATIONS, help="operations")
    parser.add_argument(
        "--dedup-on", choices=["key", "event-id"], default="event-id", help="(event-id)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="peer runs per system (2)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--skip-file-log", action="store_true", help="only the peer comparison")
    group.add_argument("--skip-quix", action="store_true", help="only Kafka against file log")
    parser.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    load = load_line()
    w = Workload(
        events=args.events,
        keys=args.keys,
        partitions=args.partitions,
        dedup_on=args.dedup_on,
        epoch=int(time.time() * 1000) - DAY_MS,
    )
    ops = args.only or list(FILE_LOG_OPERATIONS)
    from streamtide.engine.interop import build_session
    from streamtide.testing.kafka_broker import start_broker

    summary: dict[str, Any] = {"events": w.events, "master": args.master}
    with tempfile.TemporaryDirectory(prefix="streamtide-bench-kafka-") as tmp:
        root = Path(tmp)
        broker = start_broker(root / "kafka")
        try:
            events = generate(w)
            logs = {"file": (f"file://{root / 'log'}", {}), "kafka": (broker.url, KAFKA_OPTIONS)}
            for url, options in logs.values():
                write_log(url, events, w, options)
                if "pipeline" in ops:
                    write_pipeline_log(url, events, w, options)
            print(
                f"{len(events):,} events, {w.keys:,} keys, {w.partitions} partitions, "
                f"dedup by {w.dedup_on}, {args.master}",
                flush=True,
            )
            if not args.skip_file_log:
                spark = build_session(args.master, "streamtide-bench-kafka")
                try:
                    warm = replace(w, events=5_000)
                    write_log(f"file://{root / 'warm-up'}", generate(warm), warm)
                    run_operation(
                        spark, f"file://{root / 'warm-up'}", root / "warm-state", "dedup", warm
                    )
                    summary["file_vs_kafka"] = compare_logs(spark, root, logs, w, ops)
                finally:
                    spark.stop()
            if not args.skip_quix:
                peers = compare_quix(
                    broker, root, w, list(PEER_OPERATIONS), args.repeats, args.master
                )
                print_peers(peers, w.events)
                summary["peers"] = peers
        finally:
            broker.stop()
    print(load.describe())
    summary["load_at_start"] = load.as_json()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
