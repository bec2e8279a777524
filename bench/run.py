"""Streamtide next to Spark's native streaming operators and a plain-Python ceiling, on one
generated workload, in one run on ``local[2]``.

Run from the repository root: ``.venv/bin/python -m bench`` (or ``.venv/bin/python
bench/run.py``) with ``--events N --keys K --dup-rate R --partitions P --batch-size B``,
``--quick`` for a small smoke run, ``--profile OPERATION [--in-process]`` to run one
Streamtide operation under cProfile instead. Prints a table and writes
``bench/results/latest.json``.

Measured, in this order:

1. the ceiling: each operation as a Python loop over deserialized records in memory, and a
   raw read of the input topic from the log (no Spark);
   and, for the pipeline, the same logic as a hand-written single-core consumer loop over the
   raw bytes with the standard ``json`` module (``bench/hand_loop.py``);
2. Streamtide: ``deduplicate_by_key``, a session ``count`` (every update, and emit-final:
   one row per session when it closes), a punctuating processor, a stream-table join with
   a users table and the mixed pipeline (filter, map_values, join, select_key, a windowed
   count after a repartition, a second output and a Processor API node), each its own
   application over the input topic, through ``StreamsApp.run_until_caught_up``;
3. Spark native: ``dropDuplicatesWithinWatermark``, ``groupBy(session_window).count()`` (append
   mode: one row per session when the watermark closes it, the contract of the emit-final
   session count), a stream-static join with the same users table and the pipeline's closest
   query (filter, withColumn, stream-static join, ``groupBy(window).count()`` in update mode),
   in Structured Streaming over a Parquet copy of the same events.

``--only OPERATION`` (repeatable) measures only those operations.

One SparkSession serves 2 and 3. Its start, and one warm-up job that starts the Python
workers and the JVM's SQL engine, are timed separately and not counted in any rate.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from bench import ceiling, hand_loop, spark_native, streamtide_bench
from bench.report import Result, print_notes, print_table, ratios, write_json
from bench.system_load import load_line
from bench.workload import (
    Workload,
    generate,
    pipeline_fields,
    summary,
    write_log,
    write_parquet,
    write_pipeline_log,
    write_pipeline_parquet,
    write_users_parquet,
)

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
DEFAULTS = Workload()
QUICK = dict(events=10_000, keys=200, batch_size=1_000)

CEILING_NOTE = (
    "plain Python loop, dict state, records already deserialized in memory, one partition "
    "at a time; no serdes, no state store, no record cache, no commits"
)
READ_NOTE = "log.read_table of every input partition (Arrow tables; files in the page cache)"
HAND_LOOP_NOTE = (
    "the pipeline as one hand-written single-core loop over the raw bytes of every partition "
    "(merged by timestamp as a task's partition group does), standard json decoding and "
    "encoding, dict state; no commits, no RocksDB, no changelogs"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, help=f"events, resends included ({DEFAULTS.events:,})")
    p.add_argument("--keys", type=int, help=f"distinct keys ({DEFAULTS.keys:,})")
    p.add_argument("--dup-rate", type=float, help=f"resends per event ({DEFAULTS.dup_rate})")
    p.add_argument("--late-rate", type=float, help=f"share of late events ({DEFAULTS.late_rate})")
    p.add_argument("--partitions", type=int, help=f"input partitions ({DEFAULTS.partitions})")
    p.add_argument(
        "--batch-size",
        type=int,
        help=f"max_records_per_batch per partition ({DEFAULTS.batch_size:,}); Spark reads "
        "files of batch-size x partitions rows, one per micro-batch",
    )
    p.add_argument(
        "--dedup-on",
        choices=["key", "event-id"],
        help="dedup by record key (deduplicate_by_key, the default) or by key and event id "
        "(deduplicate_by_key_value)",
    )
    p.add_argument("--seed", type=int, help=f"workload seed ({DEFAULTS.seed})")
    p.add_argument(
        "--only",
        action="append",
        choices=streamtide_bench.OPERATIONS,
        help="measure only this operation (repeatable; default: all)",
    )
    p.add_argument("--quick", action="store_true", help="a small smoke run (10,000 events)")
    p.add_argument(
        "--profile",
        choices=streamtide_bench.OPERATIONS,
        help="run only this Streamtide operation under cProfile (driver process) and print "
        "the top 25 cumulative entries; writes no results",
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="with --profile: run the work units in the driver process instead of Spark's "
        "workers, so the profile shows the per-record work (slower, single-threaded)",
    )
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON")
    return p.parse_args(argv)


def workload_from(args: argparse.Namespace) -> Workload:
    settings: dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("events", "keys", "dup_rate", "late_rate", "partitions", "batch_size", "seed"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    if args.dedup_on is not None:
        settings["dedup_on"] = args.dedup_on
    return replace(DEFAULTS, **settings)


def warm_up(spark: Any, parquet_dir: Path) -> None:
    """Start the Python workers with Streamtide's worker modules imported, and run one SQL
    aggregation, so that no measured run pays for either."""

    def load(_: Any) -> Any:
        import streamtide.engine.worker
        import streamtide.runtime.work_unit  # noqa: F401

        yield os.getpid()

    spark.sparkContext.parallelize(range(2), 2).mapPartitions(load).collect()
    spark.read.parquet(str(parquet_dir)).groupBy("key").count().collect()


def measure_ceiling(
    console: Console, events: list, w: Workload, log_url: str, operations: list[str]
) -> list[Result]:
    results = []
    partitions = ceiling.in_memory(events, w)
    for op in operations:
        if op not in ceiling.LOOPS:
            continue
        seconds, outputs = ceiling.run_loop(op, partitions, w)
        results.append(
            Result("python-ceiling", op, len(events), seconds, None, outputs, CEILING_NOTE)
        )
        console.print(f"  python-ceiling {op}: {seconds:.2f} s, {outputs:,} out")
    if "pipeline" in operations:
        seconds, read, outputs = hand_loop.run_pipeline(log_url, w.partitions, w.batch_size)
        results.append(
            Result("python-hand-loop", "pipeline", read, seconds, None, outputs, HAND_LOOP_NOTE)
        )
        console.print(f"  python-hand-loop pipeline: {seconds:.2f} s, {outputs:,} out")
    seconds, rows = ceiling.read_log(log_url, w.partitions)
    results.append(Result("log-read", "read", rows, seconds, None, None, READ_NOTE))
    console.print(f"  log-read: {seconds:.3f} s, {rows:,} rows")
    return results


def expected_input(op: str, events: list, w: Workload) -> int:
    """The input records the engine should report for ``op``: the events, plus the users
    table's records for the joins, plus the repartitioned records for the pipeline."""
    if op == "stream-table-join":
        return len(events) + w.keys
    if op == "pipeline":
        fields = pipeline_fields(events, w)
        kept = sum(1 for e in events if fields[e.event_id][1] != "bot")
        return len(events) + w.keys + kept
    return len(events)


def measure_streamtide(
    console: Console,
    spark: Any,
    log_url: str,
    root: Path,
    events: list,
    w: Workload,
    operations: list[str],
) -> list[Result]:
    results = []
    n = len(events)
    for op in operations:
        run = streamtide_bench.run_operation(spark, log_url, root / "state", op, w)
        note = streamtide_bench.note(op, w)
        expected = expected_input(op, events, w)
        if run.input_records != expected:
            problem = (
                f"the engine reported {run.input_records:,} input records, expected {expected:,}"
            )
            console.print(f"[red]  {problem}[/]")
            note += f" ({problem})"
        results.append(
            Result("streamtide", op, n, run.seconds, run.batch_ms, run.output_records, note)
        )
        console.print(
            f"  streamtide {op}: {run.seconds:.1f} s, {len(run.batches)} batches, "
            f"{run.output_records:,} out"
        )
    return results


def measure_spark(
    console: Console,
    spark: Any,
    parquet_dir: Path,
    root: Path,
    n: int,
    w: Workload,
    operations: list[str],
) -> list[Result]:
    results = []
    queries = [o for o in operations if o not in ("punctuation", "session-count-final")]
    if "session-count-final" in operations and "session-count" not in queries:
        queries.append("session-count")
    for op in queries:
        run = spark_native.run_query(spark, parquet_dir, root / "checkpoints", op, w)
        note = spark_native.note(op, w, run.provider)
        if run.input_records != n:
            note += f" (Spark reported {run.input_records:,} input rows, expected {n:,})"
        results.append(
            Result("spark-native", op, n, run.seconds, run.batch_ms, run.output_records, note)
        )
        out = "?" if run.output_records is None else f"{run.output_records:,}"
        console.print(
            f"  spark-native {op}: {run.seconds:.1f} s, {len(run.batch_ms)} batches, {out} out"
        )
        if op == "session-count" and "session-count-final" in operations:
            # append mode is the emit-final contract: the same run stands for both
            final_note = "the session-count query above (append mode: one row per session)"
            results.append(replace(results[-1], operation="session-count-final", note=final_note))
    if "punctuation" in operations:
        results.append(
            Result(
                "spark-native",
                "punctuation",
                n,
                None,
                None,
                None,
                spark_native.note("punctuation", w),
            )
        )
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    w = workload_from(args)
    operations = [op for op in streamtide_bench.OPERATIONS if op in (args.only or [op])]
    console = Console(width=max(Console().width, 150))
    logging.basicConfig(level=logging.WARNING)
    load = load_line(console)
    began = time.perf_counter()
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="streamtide-bench-") as tmp:
        root = Path(tmp)
        log_url = f"file://{root / 'log'}"
        parquet_dir = root / "parquet"
        events = generate(w)
        write_log(log_url, events, w)
        files = write_parquet(parquet_dir, events, w.batch_size * w.partitions)
        write_users_parquet(spark_native.users_parquet(parquet_dir), w)
        if "pipeline" in operations:
            write_pipeline_log(log_url, events, w)
            write_pipeline_parquet(
                spark_native.pipeline_parquet(parquet_dir), events, w.batch_size * w.partitions, w
            )
        timings["generate_and_write_s"] = time.perf_counter() - began
        facts = summary(events, w)
        console.print(
            f"[bold]workload[/]: {len(events):,} events, {w.keys:,} keys, {facts['resends']:,} "
            f"resends, {facts['late_beyond_dedup_interval']:,} late by > "
            f"{w.dedup_interval_ms // 1000} s, {facts['event_time_span_s']:,} s of event time, "
            f"{w.partitions} partitions {facts['records_per_partition']}, batch "
            f"{w.batch_size:,}/partition, {files} Parquet files",
            highlight=False,
        )
        results: list[Result] = []
        if not args.profile:
            console.print("[bold]ceiling[/] (no Spark)")
            results += measure_ceiling(console, events, w, log_url, operations)
        started = time.perf_counter()
        from streamtide.engine.interop import build_session

        spark = build_session(args.master, "streamtide-bench")
        timings["spark_startup_s"] = time.perf_counter() - started
        started = time.perf_counter()
        warm_up(spark, parquet_dir)
        timings["warm_up_s"] = time.perf_counter() - started
        try:
            if args.profile:
                run, text, calls = streamtide_bench.profile_operation(
                    spark, log_url, root / "state", args.profile, w, in_process=args.in_process
                )
                where = "in the driver" if args.in_process else f"on {args.master}"
                console.print(
                    f"streamtide {args.profile} {where} under cProfile: {run.seconds:.1f} s, "
                    f"{len(run.batches)} batches, {run.input_records:,} in"
                )
                if args.in_process:
                    console.print(
                        f"{calls / max(run.input_records, 1):.1f} Python calls per input record "
                        "(driver and work units; without --in-process only the driver's show)"
                    )
                print(text)
                return
            console.print(f"[bold]streamtide[/] ({args.master})")
            results += measure_streamtide(console, spark, log_url, root, events, w, operations)
            console.print(f"[bold]spark-native[/] ({args.master})")
            results += measure_spark(console, spark, parquet_dir, root, len(events), w, operations)
        finally:
            spark.stop()
    timings["total_s"] = time.perf_counter() - began
    print_table(console, results, f"{len(events):,} events on {args.master} (records/s)")
    final = ratios(results).get("session-count-final", {}).get("streamtide_vs_spark_native")
    if final is not None:
        console.print(
            f"emit-final session count, one row per closed session: Streamtide / Spark "
            f"append mode = {final:.2f}x",
            highlight=False,
        )
    print_notes(console, results)
    console.print(
        "timings: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()), highlight=False
    )
    console.print(load.describe(), highlight=False)
    workload = {**w.describe(), **facts, "parquet_files": files, "operations": operations}
    environment = {
        "load_at_start": load.as_json(),
        "master": args.master,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "pyspark": _version("pyspark"),
        "platform": platform.platform(),
        **_source_state(),
    }
    write_json(
        args.output,
        workload,
        results,
        {"timings": {k: round(v, 1) for k, v in timings.items()}, "environment": environment},
    )
    console.print(f"wrote {args.output}")


def _source_state() -> dict[str, Any]:
    """The commit measured, and whether ``src/`` had uncommitted changes (read-only git)."""
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--", "src")
    return {
        "commit": git("rev-parse", "HEAD"),
        "src_modified": None if status is None else bool(status),
    }


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
