"""Many partitions: what one batch costs when every partition has a few new records.

The sweep: for 4, 16, 64 and 256 partitions, on the file log and on Kafka (a local broker),
``deduplicate_by_key`` into ``to``, continuous execution and other defaults, ``local[2]``.
Before each batch every partition gets 5 new records (new keys, so every record flows); the
batch is run with ``run_batch`` and timed once the application is warm. Printed per log and
partition count: the batch time and, per busy task of a batch, what it wrote (segment files
and bytes, fsyncs, manifest entries and other log files, store checkpoints, RocksDB write
batches; counted by ``bench.io_counts``), the control messages and application-directory
records per batch, and where the batch's time went (``phases_ms``).

Then the latency run: 64 partitions, 20,000 records/s of unique event ids,
``deduplicate_by_key_value`` by event id into one topic and a session count of the survivors
into another, ``commit_interval=100``, producer and observer in processes of their own
(``bench/latency.py``'s run without its stateless branch).

    python -m bench partitions [--partitions 4 16 64 256] [--logs file kafka] [--batches 10]
                               [--warm-up-batches 3] [--no-latency | --latency-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.io_counts import NAMES, IOCounts, difference
from bench.latency import KAFKA_OPTIONS, RunSettings, run_rate
from bench.latency_agents import sink_for
from bench.latency_report import print_breakdown
from bench.phases import phase_lines, slots_of, write_summary
from bench.system_load import load_line
from streamtide import Consumed, Produced, Serdes, StreamsApp, StreamsBuilder, StreamsConfig
from streamtide.engine.progress import BatchProgress
from streamtide.log import open_log
from streamtide.log.partitioner import partition_for_key

STRING, JSON = Serdes.string(), Serdes.json()
PARTITIONS = (4, 16, 64, 256)
RECORDS_PER_PARTITION = 5
#: A pause after each batch (not timed), in which its work units settle it.
SETTLE_S = 0.2


class Keys:
    """New keys for each partition on demand (every record of the sweep has a new key)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._next = 0
        self._spare: list[list[str]] = [[] for _ in range(partitions)]

    def take(self, partition: int, n: int) -> list[str]:
        spare = self._spare[partition]
        while len(spare) < n:
            key = f"key-{self._next}"
            self._next += 1
            self._spare[partition_for_key(key.encode(), self.partitions)].append(key)
        taken, self._spare[partition] = spare[:n], spare[n:]
        return taken


def sweep_one(
    spark: Any,
    root: Path,
    log_url: str,
    options: dict[str, str],
    partitions: int,
    args: argparse.Namespace,
    counts: IOCounts,
) -> dict[str, Any]:
    """The warm batch time and per-task writes of one log at one partition count."""
    name = f"sweep-{'kafka' if log_url.startswith('kafka') else 'file'}-{partitions}"
    source, sink_topic = f"{name}-in", f"{name}-out"
    log = open_log(log_url, **options)
    try:
        log.create_topic(source, partitions)
        log.create_topic(sink_topic, partitions)
    finally:
        log.close()
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_(STRING, JSON))
        .deduplicate_by_key(timedelta(seconds=10))
        .to(sink_topic, Produced.with_(STRING, JSON))
    )
    config = StreamsConfig(
        application_id=name,
        log=log_url,
        log_options=dict(options),
        state_dir=str(root / f"state-{name}"),
    )
    app = StreamsApp(builder.build(), config, spark=spark)
    sink = sink_for(log_url, source)
    keys = Keys(partitions)
    measured: list[BatchProgress] = []
    warm_up_s = 0.0
    written = dict.fromkeys(NAMES, 0)
    try:
        for batch in range(args.warm_up_batches + args.batches):
            for partition in range(partitions):
                rows = [
                    (k.encode(), json.dumps({"n": batch}).encode())
                    for k in keys.take(partition, RECORDS_PER_PARTITION)
                ]
                sink.send(partition, rows)
            sink.flush()
            # counted from here until the next batch's records are appended (which are not
            # the batch's writes), so each batch's settle counts too
            before = counts.read()
            progress = app.run_batch()
            time.sleep(SETTLE_S)
            if batch < args.warm_up_batches:
                warm_up_s += progress.duration_ms / 1000
                continue
            measured.append(progress)
            for name, n in difference(counts.read(), before).items():
                written[name] += n
    finally:
        sink.close()
        app.stop()
    busy = partitions * len(measured)
    expected = partitions * RECORDS_PER_PARTITION
    short = [b.batch for b in measured if b.input_records != expected]
    durations = [b.duration_ms for b in measured]
    phases: dict[str, float] = {}
    for b in measured:
        for phase, ms in b.phases_ms.items():
            phases[phase] = phases.get(phase, 0.0) + ms / len(measured)
    return {
        "log": "kafka" if log_url.startswith("kafka") else "file",
        "partitions": partitions,
        "batches": len(measured),
        "warm_up_s": round(warm_up_s, 1),
        "batch_ms_p50": round(statistics.median(durations), 1),
        "batch_ms_max": round(max(durations), 1),
        "ms_per_busy_task": round(statistics.median(durations) / partitions, 2),
        "batches_not_all_busy": short,
        # what the batch wrote (the driver's writes too) over its busy tasks
        "per_busy_task": {k: round(v / busy, 2) for k, v in written.items()},
        "per_batch": {k: round(v / len(measured), 1) for k, v in written.items()},
        "phases_ms": {k: round(v, 2) for k, v in phases.items()},
    }


def print_sweep(results: list[dict[str, Any]], slots: int) -> None:
    print(
        f"{'log':<6}{'partitions':>11}{'batch p50 ms':>14}{'max ms':>9}{'ms/busy task':>14}"
        f"{'fsyncs/task':>13}{'segments/task':>15}{'KiB/task':>10}{'messages/batch':>16}"
    )
    for r in results:
        task = r["per_busy_task"]
        print(
            f"{r['log']:<6}{r['partitions']:>11}{r['batch_ms_p50']:>14,.1f}"
            f"{r['batch_ms_max']:>9,.1f}{r['ms_per_busy_task']:>14,.2f}{task['fsync']:>13,.1f}"
            f"{task['segment_files']:>15,.1f}{task['segment_bytes'] / 1024:>10,.1f}"
            f"{r['per_batch']['messages_sent']:>16,.1f}"
            + (
                f"  (not all busy in batches {r['batches_not_all_busy']})"
                if r["batches_not_all_busy"]
                else ""
            )
        )
    for r in results:
        print(f"{r['log']} log, {r['partitions']} partitions:")
        print("  per busy task of a batch (all of a batch's writes over its busy tasks): ")
        print("    " + write_summary(r["per_busy_task"]))
        print("  per batch: " + write_summary(r["per_batch"]))
        for line in phase_lines(r["phases_ms"], None, slots):
            print("  " + line)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench partitions", description=__doc__)
    p.add_argument("--partitions", type=int, nargs="+", default=list(PARTITIONS))
    p.add_argument("--logs", nargs="+", choices=["file", "kafka"], default=["file", "kafka"])
    p.add_argument("--batches", type=int, default=10, help="measured batches (10)")
    p.add_argument("--warm-up-batches", type=int, default=3)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--no-latency", action="store_true", help="only the sweep")
    group.add_argument("--latency-only", action="store_true", help="only the latency run")
    p.add_argument("--latency-partitions", type=int, default=64)
    p.add_argument("--latency-rate", type=int, default=20_000)
    p.add_argument("--latency-seconds", type=float, default=20)
    p.add_argument("--latency-warm-up", type=float, default=5)
    p.add_argument("--master", default="local[2]")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load = load_line()
    root = Path(tempfile.mkdtemp(prefix="streamtide-partitions-"))
    counts = IOCounts.start(root / "io-counts")
    from streamtide.engine.interop import build_session

    spark = build_session(args.master, "streamtide-partitions", **counts.spark_conf())
    broker = None
    results: list[dict[str, Any]] = []
    latency = None
    slots = slots_of(args.master)
    try:
        logs: dict[str, tuple[str, dict[str, str]]] = {"file": (f"file://{root / 'log'}", {})}
        if "kafka" in args.logs:
            from streamtide.testing.kafka_broker import start_broker

            broker = start_broker(root / "kafka")
            logs["kafka"] = (broker.url, dict(KAFKA_OPTIONS))
        if not args.latency_only:
            for kind in args.logs:
                url, options = logs[kind]
                for partitions in args.partitions:
                    result = sweep_one(spark, root, url, options, partitions, args, counts)
                    results.append(result)
                    print(
                        f"  {kind} {partitions} partitions: batch p50 {result['batch_ms_p50']} ms "
                        f"(warm-up {result['warm_up_s']} s)",
                        flush=True,
                    )
        if not args.no_latency:
            settings = RunSettings(
                root,
                logs["file"][0],
                {},
                args.latency_partitions,
                5_000,
                args.latency_seconds,
                args.latency_warm_up,
                100,
                stateless=False,
                counts=counts,
            )
            latency = run_rate(spark, settings, args.latency_rate, "continuous")
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print()
    if results:
        print(
            f"all partitions busy, {RECORDS_PER_PARTITION} new records each per batch, "
            f"deduplicate_by_key into to, continuous, {args.master}; {args.batches} batches "
            f"after {args.warm_up_batches} warm-up batches"
        )
        print_sweep(results, slots)
    if latency is not None:
        print(
            f"latency, {args.latency_partitions} partitions, {args.latency_rate:,} records/s of "
            f"unique event ids, dedup by event id + session count, commit_interval 100 ms, file "
            f"log: p50 {latency['p50_ms']} ms, p99 {latency['p99_ms']} ms, max "
            f"{latency['max_ms']} ms over {sum(latency['outputs_counted'].values()):,} outputs"
            + ("" if latency["kept_up"] else " (fell behind)")
        )
        print_breakdown(latency, slots)
    print(load.describe())
    summary = {"load_at_start": load.as_json(), "sweep": results}
    if latency is not None:
        summary["latency"] = {k: v for k, v in latency.items() if k != "batch_ms_measured"}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
