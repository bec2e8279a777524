"""End-to-end latency while the application keeps up with a steady producer.

A producer thread appends records at a fixed rate (default 20,000 records/s over 4
partitions), each stamped with the wall-clock time it was appended. The application
(deduplication by key, then a session count of the survivors, both written to output topics)
runs on ``local[2]`` with ``app.start()``. An observer thread polls the output topics and notes,
for every new output record, when it became visible; its latency is that time minus the
record's timestamp (the append time of the input record that produced it; a session result
carries its session end, the newest input of the session). Tombstones are left out (they carry
the end of the replaced session, which would overstate the latency). The first seconds are a
warm-up and are not counted.

Each commit interval runs in both execution modes (``--execution``), continuous first, so
their figures sit side by side.

    .venv/bin/python -m bench latency [--rate 20000] [--seconds 30] [--commit-interval 100 1000]
                                      [--execution continuous micro_batch]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from streamtide import (
    Consumed,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    Topology,
)
from streamtide.engine.app import StreamsApp
from streamtide.log import LogRecord
from streamtide.log.file_log import FileLog
from streamtide.log.partitioner import partition_for_key

TOPIC = "latency-in"
OUTPUTS = ("latency-unique", "latency-sessions")
STRING, JSON, INT = Serdes.string(), Serdes.json(), Serdes.int()


def topology() -> Topology:
    builder = StreamsBuilder()
    unique = builder.stream(TOPIC, Consumed.with_(STRING, JSON)).deduplicate_by_key(
        timedelta(seconds=10)
    )
    unique.to(OUTPUTS[0], Produced.with_(STRING, JSON))
    (
        unique.group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(seconds=30)))
        .count(Materialized.as_("latency-sessions-store"))
        .to_stream()
        .to(OUTPUTS[1], Produced.with_(Serdes.windowed(STRING), INT))
    )
    return builder.build()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Producer(threading.Thread):
    """Appends ``rate`` records per second in 10 ms slices until stopped."""

    def __init__(self, log: FileLog, rate: int, partitions: int, keys: int, seed: int) -> None:
        super().__init__(name="latency-producer", daemon=True)
        self.log, self.rate, self.partitions, self.keys = log, rate, partitions, keys
        self.random = random.Random(seed)
        self.stop = threading.Event()
        self.produced = 0

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate) - self.produced
            if due > 0:
                stamp = now_ms()
                parts: list[list[LogRecord]] = [[] for _ in range(self.partitions)]
                for _ in range(due):
                    key = f"user-{self.random.randrange(self.keys)}".encode()
                    value = json.dumps({"id": self.produced, "page": "/"}).encode()
                    parts[partition_for_key(key, self.partitions)].append(
                        LogRecord(key, value, stamp)
                    )
                    self.produced += 1
                for partition, records in enumerate(parts):
                    if records:
                        self.log.append(TOPIC, partition, records)
            self.stop.wait(0.01)


class Observer(threading.Thread):
    """Polls the output topics and records each new record's latency (ms)."""

    def __init__(self, log: FileLog, partitions: int, count_after_ms: int) -> None:
        super().__init__(name="latency-observer", daemon=True)
        self.log, self.partitions, self.count_after = log, partitions, count_after_ms
        self.stop = threading.Event()
        self.latencies: list[int] = []
        self._next = {(t, p): 0 for t in OUTPUTS for p in range(partitions)}

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            self.stop.wait(0.005)

    def poll(self) -> None:
        for (topic, partition), start in self._next.items():
            end = self.log.end_offset(topic, partition)
            if end <= start:
                continue
            seen = now_ms()
            for record in self.log.read(topic, partition, start, end):
                if record.value is not None and record.timestamp >= self.count_after:
                    self.latencies.append(seen - record.timestamp)
            self._next[(topic, partition)] = end


def percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) if ordered else float("nan")


def run_once(
    spark: Any, root: Path, args: argparse.Namespace, commit_ms: int, execution: str
) -> dict[str, Any]:
    """One application at one commit interval in one execution mode; its latency figures."""
    name = f"{execution}-{commit_ms}"
    log_dir = root / f"log-{name}"
    log = FileLog(str(log_dir), fsync=False)
    for topic in (TOPIC, *OUTPUTS):
        log.create_topic(topic, args.partitions)
    config = StreamsConfig(
        application_id=f"latency-{name}",
        log=f"file://{log_dir}",
        state_dir=str(root / f"state-{name}"),
        commit_interval=commit_ms,
        execution=execution,
    )
    app = StreamsApp(topology(), config, spark=spark)
    producer = Producer(log, args.rate, args.partitions, args.keys, args.seed)
    observer = Observer(log, args.partitions, now_ms() + args.warm_up * 1000)
    app.start()
    producer.start()
    observer.start()
    try:
        time.sleep(args.warm_up + args.seconds)
    finally:
        producer.stop.set()
        producer.join()
        deadline = time.monotonic() + 60
        while app.input_waiting() and time.monotonic() < deadline:
            time.sleep(0.05)
        app.stop()
        observer.stop.set()
        observer.join()
        observer.poll()
        log.close()
    latencies = observer.latencies
    batches = list(app.history)
    return {
        "execution": execution,
        "commit_interval_ms": commit_ms,
        "produced": producer.produced,
        "outputs_counted": len(latencies),
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": float(max(latencies)) if latencies else float("nan"),
        "batches": len(batches),
        "p50_batch_ms": percentile([int(b.duration_ms) for b in batches], 0.5),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench latency", description=__doc__)
    parser.add_argument("--rate", type=int, default=20_000, help="records/s (20,000)")
    parser.add_argument("--seconds", type=int, default=30, help="measured seconds (30)")
    parser.add_argument("--warm-up", type=int, default=10, help="seconds not counted (10)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--keys", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--commit-interval", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--execution", nargs="+", default=["continuous", "micro_batch"], help="modes to run"
    )
    args = parser.parse_args(argv)
    from streamtide.engine.interop import build_session

    spark = build_session(args.master, "streamtide-latency")
    root = Path(tempfile.mkdtemp(prefix="streamtide-latency-"))
    results = []
    try:
        for commit_ms in args.commit_interval:
            for execution in args.execution:
                result = run_once(spark, root, args, commit_ms, execution)
                results.append(result)
                print(
                    f"{execution}, commit_interval {commit_ms} ms, {args.rate:,} records/s: "
                    f"p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms, "
                    f"max {result['max_ms']:.0f} ms over {result['outputs_counted']:,} outputs; "
                    f"{result['batches']} batches, p50 batch {result['p50_batch_ms']:.0f} ms",
                    flush=True,
                )
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"rate": args.rate, "results": results}))


if __name__ == "__main__":
    main()
