"""Throughput of the state stores and the file log, next to an in-memory dict baseline measured
in the same run.

Run: ``.venv/bin/python bench/state_and_log.py [--records N]``

- stores: put (per record, and batched: a dict ``update`` / RocksDB WriteBatch), get, full scans
  and short range scans (100 keys), for a plain dict (the baseline), the in-memory store, the
  RocksDB store, and a changelogged RocksDB store (writes buffered, then sent and applied at a
  commit every 1,000 records, as a task does);
- restore: replaying a changelog from the log into an empty RocksDB store, and taking/loading a
  snapshot;
- log: append and read (the functions of ``bench/log_bench.py``).
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from streamtide.log import FileLog, LogRecord
from streamtide.state import (
    ChangeLoggingKeyValueBytesStore,
    InMemoryKeyValueBytesStore,
    KeyValueBytesStore,
    RocksDBKeyValueBytesStore,
)
from streamtide.state.changelogging import apply_changelog
from streamtide.state.snapshots import SnapshotStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import log_bench

COMMIT_EVERY = 1_000
RANGE_SIZE = 100


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rate(n: int, fn: Callable[[], object]) -> float:
    return n / timed(fn)


def entries(n: int) -> list[tuple[bytes, bytes]]:
    value = b"x" * 100
    keys = [f"key-{i:06d}".encode() for i in range(n)]
    order = sorted(range(n), key=lambda i: (i * 7919) % n)  # writes in a scattered order
    return [(keys[i], value) for i in order]


# ---- the dict baseline ----------------------------------------------------------------------


def dict_rates(data: list[tuple[bytes, bytes]], probes: list[bytes], starts: list[bytes]) -> dict:
    d: dict[bytes, bytes] = {}

    def put() -> None:
        for k, v in data:
            d[k] = v

    def batched() -> None:
        d.clear()
        d.update(data)

    def get() -> None:
        for k in probes:
            d.get(k)

    def scan() -> None:
        for k in sorted(d):
            d[k]

    sorted_keys: list[bytes] = []

    def ranges() -> None:
        for start in starts:
            i = bisect.bisect_left(sorted_keys, start)
            for k in sorted_keys[i : i + RANGE_SIZE]:
                d[k]

    n = len(data)
    result = {
        "put": rate(n, put),
        "put (batched)": rate(n, batched),
        "get": rate(len(probes), get),
        "scan all": rate(n, scan),
    }
    sorted_keys.extend(sorted(d))  # a sorted key list kept next to the dict, built untimed
    result["range of 100"] = rate(len(starts), ranges)
    return result


# ---- stores ---------------------------------------------------------------------------------


def store_rates(
    make: Callable[[str], KeyValueBytesStore],
    data: list[tuple[bytes, bytes]],
    probes: list[bytes],
    starts: list[bytes],
) -> dict:
    """Per-record puts into one fresh store, batched puts into another, then reads."""
    n = len(data)
    store = make("a")
    logged = isinstance(store, ChangeLoggingKeyValueBytesStore)

    def commit() -> None:
        if logged:
            store.take_changelog()  # type: ignore[attr-defined]
            store.apply_sent()  # type: ignore[attr-defined]

    def put() -> None:
        for i, (k, v) in enumerate(data, 1):
            store.put(k, v)
            if i % COMMIT_EVERY == 0:
                commit()
        commit()

    def batched() -> None:
        for i in range(0, n, COMMIT_EVERY):
            store.put_all(data[i : i + COMMIT_EVERY])
            commit()

    def get() -> None:
        for k in probes:
            store.get(k)

    def scan() -> None:
        for _ in store.all():
            pass

    def ranges() -> None:
        for start in starts:
            it = store.range(start, None)
            for _ in zip(range(RANGE_SIZE), it):
                pass

    result = {"put": rate(n, put)}
    store.close()
    store = make("b")
    result["put (batched)"] = rate(n, batched)
    result["get"] = rate(len(probes), get)
    result["scan all"] = rate(n, scan)
    result["range of 100"] = rate(len(starts), ranges)
    store.close()
    return result


def restore_rates(root: Path, data: list[tuple[bytes, bytes]]) -> dict:
    """Replay a changelog from the log into RocksDB; snapshot and load it."""
    log = FileLog(str(root / "log"), fsync=False)
    log.create_topic("bench-changelog", 1)
    for i in range(0, len(data), 10_000):
        log.append("bench-changelog", 0, [LogRecord(k, v, 0) for k, v in data[i : i + 10_000]])
    store = RocksDBKeyValueBytesStore("restore").open_standalone(root / "restore-db")

    def replay() -> None:
        start = 0
        while start < len(data):
            table = log.read_table("bench-changelog", 0, start, None, max_records=10_000)
            keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
            apply_changelog(store, zip(keys, values, [()] * len(keys)))
            start += table.num_rows

    n = len(data)
    result = {"replay changelog into RocksDB": rate(n, replay)}
    snapshots = SnapshotStore(root / "snapshots")
    result["take snapshot (RocksDB checkpoint + tar)"] = rate(
        n, lambda: snapshots.take("app", "0_0", store, n)
    )
    store.close()
    target = RocksDBKeyValueBytesStore("restore").open_standalone(root / "target-db")
    result["load snapshot into RocksDB"] = rate(
        n, lambda: snapshots.restore_into("app", "0_0", target, n)
    )
    target.close()
    return result


def print_table(title: str, rows: dict[str, dict], unit: str) -> None:
    ops = list(next(iter(rows.values())))
    base = rows["dict (baseline)"]
    print(f"\n{title} ({unit}; x = ratio to the dict)")
    print(f"{'store':<28}" + "".join(f"{op:>22}" for op in ops))
    for label, values in rows.items():
        cells = "".join(f"{values[op]:>13,.0f} {values[op] / base[op]:>7.3f}x" for op in ops)
        print(f"{label:<28}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    n = args.records
    data = entries(n)
    probes = [k for k, _ in data[: min(n, 50_000)]]
    starts = [k for k, _ in data[:2_000]]
    root = Path(tempfile.mkdtemp(prefix="streamtide-state-bench-"))
    try:
        print(f"{n:,} entries, key 10 B, value 100 B; commit every {COMMIT_EVERY:,}; {root}")
        rows = {
            "dict (baseline)": dict_rates(data, probes, starts),
            "in-memory store": store_rates(
                lambda _: InMemoryKeyValueBytesStore("m").open_standalone(), data, probes, starts
            ),
            "RocksDB store": store_rates(
                lambda tag: RocksDBKeyValueBytesStore("r").open_standalone(root / f"r{tag}"),
                data,
                probes,
                starts,
            ),
            "RocksDB, changelogged": store_rates(
                lambda tag: ChangeLoggingKeyValueBytesStore(
                    RocksDBKeyValueBytesStore("l")
                ).open_standalone(root / f"l{tag}", buffered=True),
                data,
                probes,
                starts,
            ),
        }
        print_table("state stores", rows, "ops/s; a scan counts entries")
        print(f"\n{'restore and snapshots':<44}{'entries/s':>14}")
        for label, value in restore_rates(root, data).items():
            print(f"{label:<44}{value:>14,.0f}")
        records = log_bench.make_records(n)
        base_list = log_bench.bench_list_append(records, 10_000)
        print(f"\n{'log (batch 10,000)':<44}{'records/s':>14}{'vs list':>10}")
        for label, value in (
            ("log.append, fsync", log_bench.bench_append(str(root / "lb"), records, 10_000, True)),
            (
                "log.append, no fsync",
                log_bench.bench_append(str(root / "lb"), records, 10_000, False),
            ),
            ("baseline: list.extend", base_list),
        ):
            print(f"{label:<44}{value:>14,.0f}{value / base_list:>10.3f}")
        log_bench.bench_pickle_write(str(root / "lb"), records, 10_000)
        for label, value in log_bench.bench_reads(str(root / "lb"), n, 10_000).items():
            print(f"{label:<44}{value:>14,.0f}{value / base_list:>10.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
