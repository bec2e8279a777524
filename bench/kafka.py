"""Streamtide with Kafka as the log against the embedded file log, in one run.

Starts a local Kafka-protocol broker (noida-db, a development dependency), writes the same
workload to it and to a file log, and runs each operation (dedup and session count by
default) on both, one application per operation and log, on one SparkSession. On Kafka every
task commits each batch in its own transaction (outputs, changelog, input offsets), so the
ratio shows what exactly-once on Kafka costs against sealing file segments.

    .venv/bin/python -m bench.kafka [--events N] [--only dedup ...]

The last line printed is one JSON object with the results.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from bench.streamtide_bench import TOPOLOGIES, run_operation
from bench.workload import Workload, generate, write_log

#: Topic settings on the broker: the workload's events carry old timestamps, which Kafka's
#: default time retention (7 days) would delete.
KAFKA_OPTIONS = {"topic.retention.ms": "-1"}
DEFAULT_OPERATIONS = ("dedup", "session-count")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000, help="events (200,000)")
    parser.add_argument("--keys", type=int, default=5_000, help="distinct keys (5,000)")
    parser.add_argument("--partitions", type=int, default=4, help="input partitions (4)")
    parser.add_argument("--only", nargs="+", choices=sorted(TOPOLOGIES), help="operations")
    parser.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    w = Workload(events=args.events, keys=args.keys, partitions=args.partitions)
    operations = args.only or list(DEFAULT_OPERATIONS)
    from streamtide.engine.interop import build_session
    from streamtide.testing.kafka_broker import start_broker

    with tempfile.TemporaryDirectory(prefix="streamtide-bench-kafka-") as tmp:
        root = Path(tmp)
        broker = start_broker(root / "kafka")
        spark = build_session(args.master, "streamtide-bench-kafka")
        try:
            events = generate(w)
            logs = {"file": (f"file://{root / 'log'}", {}), "kafka": (broker.url, KAFKA_OPTIONS)}
            for url, options in logs.values():
                write_log(url, events, w, options)
            # warm up Spark's Python workers on a log of its own, so no measured run pays it
            warm = Workload(events=5_000, keys=w.keys, partitions=w.partitions)
            write_log(f"file://{root / 'warm-up'}", generate(warm), warm)
            run_operation(spark, f"file://{root / 'warm-up'}", root / "warm-state", "dedup", warm)
            results: dict[str, dict[str, Any]] = {}
            print(
                f"{len(events):,} events, {w.keys:,} keys, {w.partitions} partitions, {args.master}"
            )
            print(f"{'operation':<16}{'file log rec/s':>16}{'kafka rec/s':>14}{'kafka/file':>12}")
            for op in operations:
                rates = {}
                for kind, (url, options) in logs.items():
                    state = root / "state" / kind
                    done = run_operation(spark, url, state, op, w, options)
                    rates[kind] = {
                        "records_per_s": round(done.input_records / done.seconds),
                        "seconds": round(done.seconds, 2),
                        "batches": len(done.batches),
                        "input_records": done.input_records,
                    }
                ratio = rates["kafka"]["records_per_s"] / max(rates["file"]["records_per_s"], 1)
                results[op] = {**rates, "kafka_vs_file": round(ratio, 3)}
                print(
                    f"{op:<16}{rates['file']['records_per_s']:>16,}"
                    f"{rates['kafka']['records_per_s']:>14,}{ratio:>11.2f}x"
                )
        finally:
            spark.stop()
            broker.stop()
    print(json.dumps({"events": len(events), "master": args.master, "results": results}))


if __name__ == "__main__":
    main()
