"""The work unit alone, without Spark: records/s of one task over the benchmark workload,
against the plain-Python ceiling of the same records (for the pipeline: the hand-written loop
over raw bytes), all in this process (so the ratios hold on a busy machine), and with
``--profile`` the Python calls per input record.

Each batch runs ``run_work_unit`` as an executor would and its segments are sealed before the
next batch, as the driver does: by default as in continuous execution (the application's
default), one ``TaskHost`` keeps every task and its stores open from batch to batch and
settles each run once it is sealed; with ``--execution micro_batch`` each run opens and
restores its stores and closes them again. Spark's job and the driver's planning are not
included. The stream-table join and the pipeline read the users table's partition first
(every lookup hits); the pipeline's windowed count runs on every partition of its
repartition topic after each batch.

    .venv/bin/python -m bench.work_unit [--events N] [--batch-size N] [--operations OP ...]
                                        [--execution continuous|micro_batch]
                                        [--profile [--top N]]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import ceiling, hand_loop
from bench.streamtide_bench import TOPOLOGIES
from bench.workload import (
    PIPELINE_TOPIC,
    USERS_TOPIC,
    Workload,
    generate,
    write_log,
    write_pipeline_log,
)
from streamtide import StreamsConfig
from streamtide.engine.plan import make_plan
from streamtide.log import open_log
from streamtide.log.api import SegmentRef
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.task_host import TaskHost
from streamtide.runtime.work_unit import (
    ActiveSpec,
    WorkUnitSpec,
    client_state_dir,
    run_work_unit,
)


def _config(
    root: Path,
    operation: str,
    profile: bool,
    log_url: str,
    log_options: dict[str, str],
    name: str | None = None,
) -> StreamsConfig:
    name = name or f"wu-{operation}{'-profiled' if profile else ''}"
    return StreamsConfig(
        # the profiled run is an application of its own: it must not restore the timed run's
        # changelogs (restore calls would count as calls per record)
        application_id=name,
        log=log_url,
        log_options=log_options,
        state_dir=str(root / f"state-{name}-{log_url.partition(':')[0]}"),
    )


class _Task:
    """One task of the application: its committed state and where its inputs stand."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.state: dict[str, Any] = {}
        self.read: dict[str, int] = {}


def run_task(
    root: Path,
    operation: str,
    w: Workload,
    profile: bool = False,
    top: int = 0,
    execution: str = "continuous",
    log_url: str | None = None,
    log_options: dict[str, str] | None = None,
    on_report: Callable[[dict[str, Any]], None] | None = None,
    application_id: str | None = None,
) -> tuple[float, int, int]:
    """Seconds to run partition 0 of the input through the operation's tasks in batches;
    input records and Python function calls (0 unless ``profile``); with ``top``, also print
    the ``top`` functions by own time.

    Task ``0_0`` reads partition 0 of the input in batches of ``w.batch_size``, and the users
    table's partition 0 whole in its first batch (its keys are those of the input's partition
    0, so every join lookup hits). A sub-topology after a repartition runs one task per
    partition of the repartition topic over what the batch wrote there, so the calls per
    record cover the whole topology.

    ``log_url`` (the file log under ``root`` by default) and ``log_options`` name the log; on
    Kafka each run commits in its work unit's transaction. ``on_report`` gets each run's
    report; ``application_id`` replaces the default one (``wu-<operation>``)."""
    url = log_url or f"file://{root / 'log'}"
    log = open_log(url, **(log_options or {}))
    topology = TOPOLOGIES[operation](w)
    config = _config(root, operation, profile, url, dict(log_options or {}), application_id)
    app = config.application_id
    if log.transactional:  # changelog topics as the engine creates them (no auto-creation)
        make_plan(topology, config, log)
    for sub in topology.subtopologies():  # outputs and repartition topics
        for topic in (*sub.sink_topics, *sub.source_topics):
            log.create_topic(topology.resolve_topic(topic, app), w.partitions, exist_ok=True)
    internal = {topology.resolve_topic(t, app) for t in topology.internal_topics}
    subs = [
        (sub.id, [topology.resolve_topic(t, app) for t in sub.source_topics])
        for sub in topology.subtopologies()
    ]
    (main_topic,) = [t for t in subs[0][1] if t != USERS_TOPIC]
    end_offset = log.end_offset(main_topic, 0)
    tasks: dict[str, _Task] = {}
    host = None
    if execution == "continuous":
        state_dir = client_state_dir(config, "c")
        host = TaskHost(topology, config, log, make_task_stores, state_dir, keep_open=True)
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    for batch, start in enumerate(range(0, end_offset, w.batch_size)):
        end = min(start + w.batch_size, end_offset)
        for sub_id, sources in subs:
            partitions = range(w.partitions) if internal & set(sources) else range(1)
            for partition in partitions:
                task = tasks.setdefault(f"{sub_id}_{partition}", _Task(f"{sub_id}_{partition}"))
                ranges = {}
                for topic in sources:
                    if topic == main_topic:
                        ranges[topic] = [start, end]
                    else:  # the table (read whole, once) or a repartition topic (what's new)
                        first, last = task.read.get(topic, 0), log.end_offset(topic, partition)
                        ranges[topic] = [first, last]
                        task.read[topic] = last
                spec = WorkUnitSpec(
                    batch, sub_id, "c", [ActiveSpec(task.task_id, ranges, task.state)]
                )
                if profiler is not None:
                    profiler.enable()
                report = run_work_unit(topology, config, log, spec, make_task_stores, host=host)
                if host is not None:  # what a long-running work unit does once it replied
                    host.checkpoint_due()
                if profiler is not None:
                    profiler.disable()
                if on_report is not None:
                    on_report(report)
                (result,) = report["tasks"]
                for data in result["segments"]:  # sealed before the next task reads them
                    ref = SegmentRef.from_dict(data)
                    seal_id = f"{app}/{batch}/{task.task_id}/{ref.name}"
                    log.seal(ref.topic, ref.partition, ref, seal_id=seal_id)
                task.state = result["state"]
                if host is not None:  # the driver's settle after the seal
                    if profiler is not None:
                        profiler.enable()
                    host.settle({task.task_id: result["writer"]})
                    if profiler is not None:
                        profiler.disable()
    seconds = time.perf_counter() - started
    calls = 0
    if profiler is not None:
        stats = pstats.Stats(profiler)
        calls = sum(stat[1] for stat in stats.stats.values())  # type: ignore[attr-defined]
        if top:
            stats.sort_stats("tottime").print_stats(top)
    if host is not None:
        host.close()
    log.close()
    return seconds, end_offset, calls


def hand_loop_seconds(root: Path, w: Workload) -> float:
    """Seconds of the hand-written pipeline loop over partition 0 of the pipeline's input."""
    url = f"file://{root / 'log'}"
    records = hand_loop.read_raw(url, PIPELINE_TOPIC, w.partitions)[0]
    users = hand_loop.read_raw(url, USERS_TOPIC, w.partitions)[0]
    started = time.perf_counter()
    hand_loop.pipeline(records, users, w.batch_size)
    return time.perf_counter() - started


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
        help="with --profile: print the N functions by own time",
    )
    parser.add_argument(
        "--execution",
        choices=("continuous", "micro_batch"),
        default="continuous",
        help="keep the tasks open between batches (the default) or open them per batch",
    )
    args = parser.parse_args(argv)
    w = replace(Workload(), events=args.events, batch_size=args.batch_size)
    root = Path(tempfile.mkdtemp(prefix="streamtide-wu-"))
    try:
        events = generate(w)
        write_log(f"file://{root / 'log'}", events, w)
        if "pipeline" in args.operations:
            write_pipeline_log(f"file://{root / 'log'}", events, w)
        partition0 = ceiling.in_memory(events, w)[:1]
        print(f"partition 0 of {w.events:,} events, batches of {w.batch_size:,}")
        print(
            f"{'operation':<14} {'run':<7} {'records/s':>10} {'us/rec':>7} {'vs ceiling':>10}"
            f" {'calls/rec':>9}"
        )
        for operation in args.operations:
            ceiling_s = None  # operations without a plain-Python loop (emit-final) have none
            if operation == "pipeline":
                ceiling_s = hand_loop_seconds(root, w)
                print(f"{operation:<14} {'hand':<7} {len(partition0[0]) / ceiling_s:>10,.0f}")
            elif operation in ceiling.LOOPS:
                ceiling_s, _ = ceiling.run_loop(operation, partition0, w)
                n = len(partition0[0])
                print(
                    f"{operation:<14} {'ceiling':<7} {n / ceiling_s:>10,.0f} "
                    f"{ceiling_s / n * 1e6:>7.1f}"
                )
            else:
                print(f"{operation:<14} {'ceiling':<7} {'n/a':>10}")
            seconds, records, _ = run_task(root, operation, w, execution=args.execution)
            calls = 0
            if args.profile:
                _, _, calls = run_task(
                    root, operation, w, profile=True, top=args.top, execution=args.execution
                )
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
