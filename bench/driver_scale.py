"""What a batch costs the driver as partitions, sub-topologies and work units grow.

``python -m bench.driver_scale`` runs the real driver (``StreamsApp``: planning, assignment,
input ranges, the control protocol of continuous execution, the commit on the file log and
on Kafka) against simulated work units (``bench/simulated_executors.py``) that process no
records and answer at once (or after ``--delay-ms``), in processes of their own. Between
batches one record is appended to every input partition, so every task has input and
writes its segments or records, as under a steady load.

For each log, partition count and number of sub-topologies it starts one application,
then grows it through the work-unit counts (the new executors take their tasks through
standbys, as a scale-out does), runs ``--settle`` batches, and measures ``--batches``
batches: the driver's wall time, the time it waited for work units' replies, its own time
(the difference), CPU and own time by phase (``bench/driver_meter.py``), control messages
and bytes, fsyncs and files written (file log), broker calls (Kafka), and memory.

It also times the assignor at 200 clients and 4,000 stateful tasks with one standby
(``assignment_step_ms``).

Writes ``bench/results/driver_scale.json`` (medians per point; ``--raw`` keeps each measured
batch too) and ``bench/results/driver_scale.png`` (driver time per batch against partitions),
prints the table and, last, one JSON line with the medians at 1,024 partitions, 3
sub-topologies and 64 work units. ``--report`` prints the same from the results already
written, without measuring (``--markdown`` adds the tables of docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.driver_meter import DriverMeter
from bench.scale_assign import assignment_step_ms
from bench.scale_chart import draw_chart
from bench.scale_report import HEADER, growth, line, markdown, summarize
from bench.simulated_executors import SimulatedExecutors, simulator_settings

PARTITIONS = (4, 64, 256, 1024, 4096)
SUBTOPOLOGIES = (1, 3)
WORK_UNITS = (2, 16, 64, 128)
LOGS = ("kafka", "file")
TARGET = {"partitions": 1024, "subtopologies": 3, "work_units": 64}
INPUT = "in"
RESULTS = Path(__file__).parent / "results"


def topology(subtopologies: int, partitions: int) -> Any:
    """1 sub-topology: a count per key into ``out-<partitions>``; 3: re-key, count, re-key,
    count (reading ``in-<partitions>``)."""
    from streamtide import Consumed, Grouped, Materialized, Serdes, StreamsBuilder

    builder = StreamsBuilder()
    stream = builder.stream(f"{INPUT}-{partitions}", Consumed.with_(Serdes.bytes(), Serdes.bytes()))
    out = f"out-{partitions}"
    if subtopologies == 1:
        stream.group_by_key().count(Materialized.as_("counts")).to_stream().to(out)
        return builder.build()
    users = (
        stream.select_key(lambda k, v: k)
        .group_by_key(Grouped.as_("by-user"))
        .count(Materialized.as_("users"))
    )
    (
        users.to_stream()
        .select_key(lambda k, v: k)
        .group_by_key(Grouped.as_("by-count"))
        .count(Materialized.as_("counts"))
        .to_stream()
        .to(out)
    )
    return builder.build()


def run_application(
    kind: str,
    url: str,
    state_dir: str,
    partitions: int,
    subtopologies: int,
    work_units: list[int],
    sim: SimulatedExecutors,
    args: argparse.Namespace,
    plan: tuple[int, int],
) -> list[dict[str, Any]]:
    """One application on ``url``: grown through ``work_units``, measured at each after
    ``plan = (settle, measured)`` batches."""
    from streamtide import StreamsConfig
    from streamtide.engine.app import StreamsApp
    from streamtide.log import open_log

    app_id = f"scale-{kind}-{partitions}-{subtopologies}"
    setup = open_log(url)
    source = f"{INPUT}-{partitions}"
    setup.create_topic(source, partitions, exist_ok=True)
    setup.close()
    config = StreamsConfig(
        application_id=app_id,
        log=url,
        state_dir=state_dir,
        num_standby_replicas=1,
        execution="continuous",
        adaptive_batch_size=False,
        max_records_per_batch=100_000,
    )
    rows = []
    sim.set_executors(work_units[0])
    app = StreamsApp(topology(subtopologies, partitions), config, launcher=sim)
    try:
        started = time.perf_counter()
        app._ensure_started()
        start_s = time.perf_counter() - started
        sim.configure(simulator_settings(app, args.delay_ms))
        meter = DriverMeter(app)
        for units in work_units:
            sim.set_executors(units)
            for _ in range(plan[0]):
                sim.feed(source, partitions)
                app.run_batch()
            costs = []
            for _ in range(plan[1]):
                sim.feed(source, partitions)
                costs.append(meter.measure(app.run_batch))
            row = summarize(kind, partitions, subtopologies, units, costs)
            if args.profile:
                sim.feed(source, partitions)
                row["profile"] = profiled(app.run_batch, args.profile, args.profile_sort)
            row["start_s"] = round(start_s, 2)
            row["app_s"] = round(time.perf_counter() - started, 2)  # so far, start included
            rows.append(row)
            print(line(row), flush=True)
    finally:
        app.stop()
    if rows:  # stopping (its work units, its clients) is part of the application's time
        rows[-1]["app_s"] = round(time.perf_counter() - started, 2)
    return rows


def profiled(run: Any, top: int, sort: str = "tottime") -> list[str]:
    """The ``top`` functions of one batch by ``sort`` (own time by default; cProfile), as
    text lines."""
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    profile.runcall(run)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats(sort).print_stats(top)
    return [ln for ln in out.getvalue().splitlines() if ln.strip()]


def batch_plan(partitions: int, args: argparse.Namespace) -> tuple[int, int, list[int]]:
    """(settle, measured) batches per work-unit count and the work-unit counts: fewer where
    one batch takes seconds, so that the sweep fits its time budget (at 4,096 partitions the
    target's work units only)."""
    if partitions >= 4096:
        units = [TARGET["work_units"]] if TARGET["work_units"] in args.work_units else []
        return 1, 1, units or list(args.work_units)[-1:]
    return args.settle, args.batches, list(args.work_units)


class Budget:
    """The sweep's time budget: each application's cost is estimated from the last one on
    the same log (seconds per task, start-up and batches), and what would not fit is left
    out, saying so."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.per_task_s: dict[str, float] = {}  # log -> seconds per task and batch
        self.start_per_task_s: dict[str, float] = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def estimate(self, kind: str, tasks: int, batches: int) -> float:
        per_batch = self.per_task_s.get(kind, 0.0) * tasks
        return self.start_per_task_s.get(kind, 0.0) * tasks + per_batch * batches

    def learn(self, kind: str, tasks: int, batches: int, rows: list[dict[str, Any]]) -> None:
        """From the largest application so far (smaller ones are dominated by constant
        costs): its start and its time per task and batch, feeding the input included."""
        if rows:
            start = rows[0]["start_s"]
            self.per_task_s[kind] = (rows[-1]["app_s"] - start) / (tasks * batches)
            self.start_per_task_s[kind] = start / tasks


def sweep(
    args: argparse.Namespace, sim: SimulatedExecutors, root: Path
) -> tuple[list[dict[str, Any]], dict[str, str | None], list[str]]:
    """The target point first (at its work units; so that the last JSON line has it even
    when the budget is short), then every point, smallest first and both logs at each size
    (so a cut-off leaves them equally far); returns the rows (in table order), where each
    log stopped (if it did) and what the budget left out."""
    rows: list[dict[str, Any]] = []
    stopped: dict[str, str | None] = {kind: None for kind in args.logs}
    skipped: list[str] = []
    budget = Budget(args.budget_s)
    broker = None
    first = (TARGET["partitions"], TARGET["subtopologies"], TARGET["work_units"])
    targeted = (
        first[0] in args.partitions
        and first[1] in args.subtopologies
        and first[2] in args.work_units
    )

    def measure(
        kind: str, partitions: int, subs: int, units: list[int], plan: tuple[int, int]
    ) -> None:
        here = root / f"{kind}-{partitions}-{subs}"
        # one broker; a file log of its own per application
        url = broker.url if broker and kind == "kafka" else f"file://{here / 'log'}"
        try:
            found = run_application(
                kind, url, str(here / "state"), partitions, subs, units, sim, args, plan
            )
        except Exception as exc:
            stopped[kind] = f"{partitions} partitions, {subs} sub-topologies: {exc}"
            print(f"{kind}: stopped at {stopped[kind]}", flush=True)
            return
        finally:  # each application's files go as soon as it is done
            shutil.rmtree(here, ignore_errors=True)
        budget.learn(kind, partitions * subs, sum(plan) * len(units), found)
        rows.extend(found)

    try:
        if "kafka" in args.logs:
            from streamtide.testing.kafka_broker import start_broker

            broker = start_broker(root / "broker")
        if targeted:
            settle, batches, _ = batch_plan(first[0], args)
            for kind in args.logs:
                measure(kind, first[0], first[1], [first[2]], (settle, batches))
        for partitions in args.partitions:
            settle, batches, planned = batch_plan(partitions, args)
            if planned != list(args.work_units):
                skipped.append(f"{partitions} partitions: work units {planned} only")
            # the cheaper log first, so that a cut-off leaves the other one short, not both
            logs = sorted(args.logs, key=lambda k: budget.estimate(k, partitions, 1))
            for kind in logs:
                for subs in args.subtopologies:
                    if stopped[kind] is not None:
                        continue
                    units = list(planned)
                    if targeted and (partitions, subs) == first[:2]:
                        units = [u for u in units if u != first[2]]  # measured first
                        if not units:
                            continue
                    tasks = partitions * subs
                    needed = budget.estimate(kind, tasks, (settle + batches) * len(units))
                    point = f"{kind} {partitions} partitions {subs} sub-topologies"
                    if needed > budget.left():
                        skipped.append(f"{point}: about {needed:.0f} s, {budget.left():.0f} s left")
                        print(f"skipped (time budget) {skipped[-1]}", flush=True)
                        continue
                    measure(kind, partitions, subs, units, (settle, batches))
    finally:
        if broker is not None:
            broker.stop()
    rows.sort(key=lambda r: (r["log"], r["subtopologies"], r["partitions"], r["work_units"]))
    return rows, stopped, skipped


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",")]

    parser.add_argument("--partitions", type=ints, default=list(PARTITIONS))
    parser.add_argument("--subtopologies", type=ints, default=list(SUBTOPOLOGIES))
    parser.add_argument("--work-units", type=ints, default=list(WORK_UNITS))
    parser.add_argument("--logs", type=lambda t: t.split(","), default=list(LOGS))
    parser.add_argument("--settle", type=int, default=1, help="batches before measuring")
    parser.add_argument("--batches", type=int, default=2, help="measured batches per point")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="work units' reply delay")
    parser.add_argument(
        "--budget-s", type=float, default=450.0, help="leave out what would not fit in this"
    )
    parser.add_argument(
        "--profile", type=int, default=0, help="profile one more batch per point: top N"
    )
    parser.add_argument(
        "--profile-sort", default="tottime", help="order of --profile: tottime, cumulative"
    )
    parser.add_argument("--markdown", action="store_true", help="also print docs tables")
    parser.add_argument(
        "--report", action="store_true", help="print the results in --out; measure nothing"
    )
    parser.add_argument("--raw", action="store_true", help="keep every batch's figures")
    parser.add_argument("--out", type=Path, default=RESULTS / "driver_scale.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        report(json.loads(args.out.read_text()), args.markdown)
        return 0
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="streamtide-driver-scale-"))
    load = os.getloadavg()[0]
    print(f"driver scale: load average {load:.2f} at the start; {HEADER}", flush=True)
    sim = SimulatedExecutors()
    try:
        rows, stopped, skipped = sweep(args, sim, root)
    finally:
        sim.close()
        shutil.rmtree(root, ignore_errors=True)
    if not args.raw:
        for row in rows:
            row.pop("raw", None)
    result = {
        "load_average_at_start": round(load, 2),
        "elapsed_s": round(time.monotonic() - began, 1),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "report")},
        "stopped": stopped,
        "skipped": skipped,
        "assignment": assignment_step_ms(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(result))
    chart = args.out.with_suffix(".png")
    draw_chart(rows, chart, TARGET)
    print(f"wrote {args.out} and {chart} in {result['elapsed_s']} s")
    report(result, args.markdown)
    return 0


def dump(result: dict[str, Any]) -> str:
    """The results as JSON with one line per row, so that a change shows as changed rows."""
    head = {k: v for k, v in result.items() if k != "rows"}
    text = json.dumps(head, indent=1, default=str)[:-2]
    rows = ",\n".join("  " + json.dumps(row, default=str) for row in result["rows"])
    return f'{text},\n "rows": [\n{rows}\n ]\n}}\n'


def report(result: dict[str, Any], with_markdown: bool) -> None:
    """The table, the assignor, the growth per task, what was left out, the docs' tables
    (``with_markdown``) and, last, the one JSON line of the target point."""
    rows, assign_ms = result["rows"], result["assignment"]
    print(f"\nmeasured at load average {result['load_average_at_start']} at the start")
    print(HEADER)
    for row in rows:
        print(line(row))
    print(
        f"assignor, 200 clients, 4,000 stateful tasks, 1 standby: assign {assign_ms['assign_ms']}"
        f" ms, the driver's whole assignment step {assign_ms['step_ms']} ms"
    )
    for text in growth(rows, TARGET["work_units"]):
        print(text)
    for kind, why in result["stopped"].items():
        if why is not None:
            print(f"{kind}: stopped at {why}")
    for what in result["skipped"]:
        print(f"left out: {what}")
    if with_markdown:
        print("\n".join(markdown(rows, TARGET["work_units"])))
    print(json.dumps(headline(rows, assign_ms)))


def headline(rows: list[dict[str, Any]], assign_ms: dict[str, float]) -> dict[str, Any]:
    """The medians at the target point (None where the sweep did not reach it)."""

    def at(kind: str) -> float | None:
        for row in rows:
            if row["log"] == kind and all(row[k] == v for k, v in TARGET.items()):
                return float(row["driver_ms"])
        return None

    return {
        **TARGET,
        "kafka_driver_ms": at("kafka"),
        "file_driver_ms": at("file"),
        "assign_ms_200_clients_4000_tasks": assign_ms["step_ms"],
    }


if __name__ == "__main__":
    sys.exit(main())
