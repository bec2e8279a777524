"""Where a batch's time goes on Kafka against the file log: the work unit alone, without Spark.

Runs partition 0 of the benchmark workload through each operation's tasks batch by batch
(``bench.work_unit.run_task``: continuous execution, one ``TaskHost`` for the whole run), once
on the embedded file log and once on a local Kafka-protocol broker (noida-db), interleaved
over ``--repeats``, all in this process (so the ratios hold on a busy machine). Each batch's
time is split into reading, processing, the stores' commit and writing; on Kafka the writing
is split further into the calls of the work unit's transaction (begin, producing the records,
waiting for their acknowledgements, sending the offsets, the commit, reading the offsets
back) and applying the committed writes to the stores; on the file log into writing the
segments and sealing them (the driver's part, here done in this process).

    .venv/bin/python -m bench.kafka_unit [--events N] [--batch-size N] [--operations OP ...]
                                         [--repeats N] [--option KEY=VALUE ...]

``--option`` passes a client setting to the Kafka log (``linger.ms=5``, ...). The last line
printed is one JSON object with the results.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.kafka import DAY_MS, KAFKA_OPTIONS
from bench.streamtide_bench import TOPOLOGIES
from bench.system_load import load_line
from bench.work_unit import run_task
from bench.workload import Workload, generate, write_log, write_pipeline_log

#: The phases every report has (``TaskHost.run_active``), in the order printed.
TASK_PHASES = ("restore", "read", "process", "commit", "write")


class Timers:
    """Wall time and calls per named part, summed over a run."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.counts: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, name: str, part: str | Callable[..., str]) -> Callable[[], None]:
        """Time every call of ``owner.name`` as ``part`` (a function of the call's arguments
        for a name chosen per call); returns the function that undoes it."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            label = part if isinstance(part, str) else part(*args, **kwargs)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.ms[label] += (time.perf_counter() - started) * 1000
                self.calls[label] += 1

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)


def _call_part(_self: Any, _call: Any, what: str) -> str:
    """The part of the transaction a ``KafkaTransaction.call`` is (by its description)."""
    return "txn." + what.split()[0]


@contextmanager
def instrumented(timers: Timers) -> Iterator[None]:
    """Time the log's reads and appends, the transaction's calls and the offset reads."""
    from streamtide.log import kafka_log
    from streamtide.log.file_log import FileLog
    from streamtide.log.kafka_group import GroupOffsets
    from streamtide.log.kafka_log import KafkaLog
    from streamtide.log.kafka_read import PartitionReader
    from streamtide.log.kafka_transaction import KafkaTransaction
    from streamtide.runtime.kafka_unit_commit import KafkaUnitCommit

    def produced(_self: Any, topic: str, partition: int, keys: list[Any], *rest: Any) -> str:
        timers.counts["records produced"] += len(keys)
        return "txn.produce (queueing)"

    undo = [
        timers.wrap(KafkaLog, "read_table", "read_table"),
        timers.wrap(KafkaLog, "_watermarks", "read_table: watermarks"),
        timers.wrap(PartitionReader, "fetch", "read_table: consuming"),
        timers.wrap(kafka_log, "to_table", "read_table: to columns"),
        timers.wrap(FileLog, "read_table", "read_table"),
        timers.wrap(FileLog, "seal", "file.seal (the driver's part)"),
        timers.wrap(KafkaTransaction, "begin", "txn.begin"),
        timers.wrap(KafkaTransaction, "produce_many", produced),
        timers.wrap(KafkaTransaction, "call", _call_part),
        timers.wrap(GroupOffsets, "committed", "group.committed (reads)"),
        timers.wrap(KafkaUnitCommit, "commit", "unit commit (all of it)"),
    ]
    try:
        yield
    finally:
        for step in reversed(undo):
            step()


def measure(
    root: Path, op: str, w: Workload, url: str | None, options: dict[str, str], name: str
) -> dict[str, Any]:
    """One run of ``op`` as application ``name`` on the log ``url`` (the file log under
    ``root`` if None): seconds, batches, and the mean batch's phases and timed parts in ms."""
    timers = Timers()
    phases: dict[str, float] = defaultdict(float)
    runs = 0

    def on_report(report: dict[str, Any]) -> None:
        nonlocal runs
        runs += 1
        for task in report["tasks"]:
            for phase, ms in task.get("phases_ms", {}).items():
                phases[phase] += ms

    with instrumented(timers):
        seconds, records, _ = run_task(
            root,
            op,
            w,
            log_url=url,
            log_options=options,
            on_report=on_report,
            application_id=name,
        )
    batches = max(1, -(-records // w.batch_size))
    return {
        "seconds": seconds,
        "records": records,
        "batches": batches,
        "runs": runs,
        "phases_ms": {k: v / batches for k, v in phases.items()},
        "parts_ms": {k: v / batches for k, v in timers.ms.items()},
        "calls": {k: v / batches for k, v in timers.calls.items()},
        "counts": {k: v / batches for k, v in timers.counts.items()},
    }


def _median(runs: list[dict[str, Any]], path: tuple[str, ...]) -> float:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value.get(key, 0.0) if isinstance(value, dict) else 0.0
        values.append(float(value))
    return statistics.median(values)


def report(op: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    """Print one operation's mean batch on both logs, medians over the repeats."""
    file_s, kafka_s = (_median(runs[k], ("seconds",)) for k in ("file", "kafka"))
    records = runs["file"][0]["records"]
    print(
        f"\n{op}: {records:,} records in {runs['file'][0]['batches']} batches of "
        f"<= {records // runs['file'][0]['batches']:,}; file log {records / file_s:,.0f} rec/s, "
        f"Kafka {records / kafka_s:,.0f} rec/s ({file_s / kafka_s:.2f}x)"
    )
    print(f"  {'ms per batch':<44}{'file log':>10}{'Kafka':>10}")
    for phase in TASK_PHASES:
        f, k = (_median(runs[x], ("phases_ms", phase)) for x in ("file", "kafka"))
        print(f"  {'task ' + phase:<44}{f:>10.1f}{k:>10.1f}")
    parts = sorted({p for kind in runs.values() for run in kind for p in run["parts_ms"]})
    for part in parts:
        f, k = (_median(runs[x], ("parts_ms", part)) for x in ("file", "kafka"))
        calls = _median(runs["kafka"] if k else runs["file"], ("calls", part))
        print(f"    {part:<42}{f:>10.1f}{k:>10.1f}   ({calls:.1f} calls)")
    produced = _median(runs["kafka"], ("counts", "records produced"))
    print(f"  records produced per batch on Kafka: {produced:,.0f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_unit", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=5_000)
    parser.add_argument("--operations", nargs="*", default=["dedup", "session-count"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--option", action="append", default=[], help="Kafka client KEY=VALUE")
    args = parser.parse_args(argv)
    unknown = set(args.operations) - set(TOPOLOGIES)
    if unknown:
        parser.error(f"unknown operations {sorted(unknown)}; choose from {sorted(TOPOLOGIES)}")
    load = load_line()
    options = {**KAFKA_OPTIONS, **dict(o.split("=", 1) for o in args.option)}
    epoch = int(time.time() * 1000) - DAY_MS  # recent: the broker's time retention keeps it
    w = replace(Workload(), events=args.events, batch_size=args.batch_size, epoch=epoch)
    from streamtide.testing.kafka_broker import start_broker

    results: dict[str, Any] = {"events": w.events, "batch_size": w.batch_size, "options": options}
    with tempfile.TemporaryDirectory(prefix="streamtide-kafka-unit-") as tmp:
        root = Path(tmp)
        broker = start_broker(root / "kafka")
        try:
            events = generate(w)
            for url, opts in ((f"file://{root / 'log'}", {}), (broker.url, options)):
                write_log(url, events, w, opts)
                if "pipeline" in args.operations:
                    write_pipeline_log(url, events, w, opts)
            for op in args.operations:
                runs: dict[str, list[dict[str, Any]]] = {"file": [], "kafka": []}
                for repeat in range(args.repeats):
                    name = f"ku-{op}-{repeat}"
                    runs["file"].append(measure(root, op, w, None, {}, name))
                    runs["kafka"].append(measure(root, op, w, broker.url, options, name))
                report(op, runs)
                results[op] = runs
        finally:
            broker.stop()
    print(load.describe())
    results["load_at_start"] = load.as_json()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
