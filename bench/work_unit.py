"""The work unit alone, without Spark: records/s of one task over the benchmark workload,
against the plain-Python ceiling of the same records, all in this process (so the ratios hold
on a busy machine).

Each batch runs ``run_work_unit`` as an executor would (open and restore the stores, process,
commit, write segments, close) and its segments are sealed before the next batch, as the
driver does; Spark's job and the driver's planning are not included.

    .venv/bin/python -m bench.work_unit [--events N] [--batch-size N] [--profile [--top N]]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import ceiling
from bench.streamtide_bench import TOPOLOGIES
from bench.workload import TOPIC, Workload, generate, write_log
from streamtide import StreamsConfig
from streamtide.log import open_log
from streamtide.log.api import SegmentRef
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit


def run_task(
    root: Path,
    operation: str,
    w: Workload,
    profile: bool = False,
    top: int = 0,
) -> tuple[float, int, int]:
    """Seconds to run partition 0 of the input through the task in batches; input records and
    Python function calls (0 unless ``profile``); with ``top``, also print the ``top``
    functions by own time."""
    log = open_log(f"file://{root / 'log'}")
    topology = TOPOLOGIES[operation](w)
    for sub in topology.subtopologies():  # outputs, and a table's topic (left empty here)
        for topic in (*sub.sink_topics, *sub.source_topics):
            log.create_topic(topic, w.partitions, exist_ok=True)
    config = StreamsConfig(
        # the profiled run is an application of its own: it must not restore the timed run's
        # changelogs (restore calls would count as calls per record)
        application_id=f"wu-{operation}{'-profiled' if profile else ''}",
        log=log.url,
        state_dir=str(root / f"state-{operation}{'-profiled' * profile}"),
    )
    end_offset = log.end_offset(TOPIC, 0)
    state: dict[str, Any] = {}
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    for batch, start in enumerate(range(0, end_offset, w.batch_size)):
        end = min(start + w.batch_size, end_offset)
        spec = WorkUnitSpec(batch, 0, "c", [ActiveSpec("0_0", {TOPIC: [start, end]}, state)])
        if profiler is not None:
            profiler.enable()
        report = run_work_unit(topology, config, log, spec, make_task_stores)
        if profiler is not None:
            profiler.disable()
        (task,) = report["tasks"]
        for data in task["segments"]:
            ref = SegmentRef.from_dict(data)
            log.seal(
                ref.topic, ref.partition, ref, seal_id=f"{config.application_id}/{batch}/{ref.name}"
            )
        state = task["state"]
    seconds = time.perf_counter() - started
    calls = 0
    if profiler is not None:
        stats = pstats.Stats(profiler)
        calls = sum(stat[1] for stat in stats.stats.values())  # type: ignore[attr-defined]
        if top:
            stats.sort_stats("tottime").print_stats(top)
    log.close()
    return seconds, end_offset, calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.work_unit", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=5_000)
    parser.add_argument("--operations", nargs="*", default=sorted(TOPOLOGIES))
    parser.add_argument("--profile", action="store_true", help="also count Python calls")
    parser.add_argument(
        "--top",
        type=int,
        default=0,
        help="with --profile: print the N functions with the most own time",
    )
    args = parser.parse_args(argv)
    w = replace(Workload(), events=args.events, batch_size=args.batch_size)
    root = Path(tempfile.mkdtemp(prefix="streamtide-wu-"))
    try:
        events = generate(w)
        write_log(f"file://{root / 'log'}", events, w)
        partition0 = ceiling.in_memory(events, w)[:1]
        print(f"partition 0 of {w.events:,} events, batches of {w.batch_size:,}")
        print(
            f"{'operation':<14} {'path':<7} {'records/s':>10} {'us/rec':>7} {'vs ceiling':>10}"
            f" {'calls/rec':>9}"
        )
        for operation in args.operations:
            ceiling_s = None  # operations without a plain-Python loop (emit-final) have none
            if operation in ceiling.LOOPS:
                ceiling_s, _ = ceiling.run_loop(operation, partition0, w)
                n = len(partition0[0])
                print(
                    f"{operation:<14} {'ceiling':<7} {n / ceiling_s:>10,.0f} "
                    f"{ceiling_s / n * 1e6:>7.1f}"
                )
            else:
                print(f"{operation:<14} {'ceiling':<7} {'n/a':>10}")
            seconds, records, _ = run_task(root, operation, w)
            calls = 0
            if args.profile:
                _, _, calls = run_task(root, operation, w, profile=True, top=args.top)
            print(
                f"{'':<14} {'task':<7} {records / seconds:>10,.0f} "
                f"{seconds / records * 1e6:>7.1f} "
                f"{f'{ceiling_s / seconds:.3f}x' if ceiling_s else 'n/a':>11}"
                f" {calls / records if calls else float('nan'):>9.1f}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
