"""Throughput of the embedded file log next to a baseline measured in the same run.

Run: ``.venv/bin/python bench/log_bench.py [--records N]``

- append: ``FileLog.append`` in batches of 1,000 and 10,000 records (each batch one sealed
  segment: Arrow IPC file, fsync, manifest entry), with and without fsync; baselines: extending
  an in-memory list, and pickling each batch to its own file (the cheapest durable-ish
  equivalent of a segment without a manifest, atomic rename or fsync).
- read: ``FileLog.read`` (one LogRecord per record), ``FileLog.read_table`` (one Arrow table,
  no per-record objects); baseline: unpickling the batch files and iterating their tuples.
- end_offset: cost of one call when nothing changed (a probe for the next manifest entry).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable

from streamtide.log import FileLog, LogRecord


def make_records(n: int) -> list[LogRecord]:
    value = b"x" * 100
    return [LogRecord(f"key-{i:06d}".encode(), value, 1_700_000_000_000 + i) for i in range(n)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_append(root: str, records: list[LogRecord], batch: int, fsync: bool) -> float:
    log = FileLog(root, fsync=fsync)
    topic = f"append-{batch}-{int(fsync)}"
    log.create_topic(topic, 1)
    batches = [records[i : i + batch] for i in range(0, len(records), batch)]

    def run() -> None:
        for chunk in batches:
            log.append(topic, 0, chunk)

    return len(records) / timed(run)


def bench_pickle_write(root: str, records: list[LogRecord], batch: int) -> float:
    folder = os.path.join(root, f"pickle-{batch}")
    os.makedirs(folder)
    rows = [(r.key, r.value, r.timestamp, r.headers) for r in records]

    def run() -> None:
        for n, i in enumerate(range(0, len(rows), batch)):
            with open(os.path.join(folder, f"{n:08d}.pkl"), "wb") as f:
                pickle.dump(rows[i : i + batch], f, protocol=pickle.HIGHEST_PROTOCOL)

    return len(rows) / timed(run)


def bench_list_append(records: list[LogRecord], batch: int) -> float:
    rows = [(r.key, r.value, r.timestamp, r.headers) for r in records]

    def run() -> None:
        out: list[tuple[object, ...]] = []
        for i in range(0, len(rows), batch):
            out.extend(rows[i : i + batch])

    return len(rows) / timed(run)


def bench_reads(root: str, n: int, batch: int) -> dict[str, float]:
    log = FileLog(root)
    topic = f"append-{batch}-1"

    def read_records() -> None:
        count = 0
        for r in log.read(topic, 0):
            count += len(r.value)

    def read_table() -> None:
        assert log.read_table(topic, 0).num_rows == n

    def read_pickles() -> None:
        folder = os.path.join(root, f"pickle-{batch}")
        count = 0
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), "rb") as f:
                for row in pickle.load(f):
                    count += len(row[1])

    return {
        "log.read (LogRecord)": n / timed(read_records),
        "log.read_table (Arrow)": n / timed(read_table),
        "baseline: unpickle files": n / timed(read_pickles),
    }


def bench_end_offset(root: str, calls: int = 20_000) -> float:
    log = FileLog(root)
    log.end_offset("append-1000-1", 0)
    elapsed = timed(lambda: [log.end_offset("append-1000-1", 0) for _ in range(calls)])
    return elapsed / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    records = make_records(args.records)
    root = tempfile.mkdtemp(prefix="streamtide-log-bench-")
    try:
        print(f"{args.records:,} records, key 10 B, value 100 B; root {root}\n")
        print(f"{'append':<42}{'records/s':>14}{'vs list':>10}{'vs pickle':>11}")
        for batch in (1_000, 10_000):
            base_list = bench_list_append(records, batch)
            base_pickle = bench_pickle_write(root, records, batch)
            rows = [
                (f"log.append, batch {batch:,}, fsync", bench_append(root, records, batch, True)),
                (
                    f"log.append, batch {batch:,}, no fsync",
                    bench_append(root, records, batch, False),
                ),
                (f"baseline: pickle files, batch {batch:,}", base_pickle),
                (f"baseline: list.extend, batch {batch:,}", base_list),
            ]
            for label, rate in rows:
                print(
                    f"{label:<42}{rate:>14,.0f}{rate / base_list:>10.3f}{rate / base_pickle:>11.2f}"
                )
        print(f"\n{'read (all records of one partition)':<42}{'records/s':>14}{'vs pickle':>11}")
        for batch in (1_000, 10_000):
            rates = bench_reads(root, args.records, batch)
            base = rates["baseline: unpickle files"]
            for label, rate in rates.items():
                print(f"{label + f', {batch:,}/segment':<42}{rate:>14,.0f}{rate / base:>11.2f}")
        print(f"\nend_offset when nothing changed: {bench_end_offset(root):.1f} us per call")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
