"""End-to-end latency while every record flows, over a sweep of input rates.

The workload (``topology``): 4 partitions, 5,000 keys, every event with a unique id;
``deduplicate_by_key_value`` by event id (10 s; no repartition) into one topic, a session
count (30 s gap) of the survivors into another, and a stateless branch (filter, map_values)
into a third. The producer and the observer run in processes of their own
(``bench/latency_agents.py``), so this process holds only the driver; the application runs on
``local[2]`` with default settings (adaptive batch size on) and ``commit_interval=100``.

Each rate runs in each execution mode (interleaved: rate by rate), a fresh application each
time: once its first batch is committed the producer starts, the first ``--warm-up`` seconds
are not counted, then ``--seconds`` are. Printed: p50, p99 and max latency per rate and mode,
whether the engine kept up (how long it took to work off what was waiting when the producer
stopped), the highest rate held at p99 <= 500 ms and <= 1 s, and where a batch's time goes at
``--breakdown-rate`` (the batches' ``phases_ms``, and the writes counted by ``bench.io_counts``);
then the idle check: an application without input uses under 2% of a core.

    ./dev bench latency [--rates 2500 5000 10000 20000 40000] [--seconds 20] [--warm-up 5]
                        [--execution continuous micro_batch] [--log file|kafka]
                        [--partitions 4] [--commit-interval 100] [--idle-seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.io_counts import IOCounts, difference
from bench.latency_agents import now_ms, read_latencies
from bench.latency_report import held, print_breakdown, print_sweep
from bench.phases import slots_of
from bench.system_load import load_line, tree_cpu_seconds
from streamtide import (
    Consumed,
    Deduplicated,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsApp,
    StreamsBuilder,
    StreamsConfig,
    Topology,
)
from streamtide.engine.progress import BatchProgress
from streamtide.log import open_log

STRING, JSON, LONG = Serdes.string(), Serdes.json(), Serdes.long()
RATES = (2_500, 5_000, 10_000, 20_000, 40_000)
#: Topic settings on Kafka (the default time retention would do, the events being recent).
KAFKA_OPTIONS = {"topic.retention.ms": "-1"}
#: A rate is held when p99 is within the bound and the engine kept up: what was waiting
#: when the producer stopped was worked off within this many seconds.
KEPT_UP_S = 5.0
IDLE_LIMIT = 0.02


@dataclass(frozen=True)
class Topics:
    """One run's input and output topics (names unique per run: Kafka runs share a broker)."""

    prefix: str

    @property
    def source(self) -> str:
        return f"{self.prefix}-in"

    @property
    def unique(self) -> str:
        return f"{self.prefix}-unique"

    @property
    def sessions(self) -> str:
        return f"{self.prefix}-sessions"

    @property
    def stateless(self) -> str:
        return f"{self.prefix}-stateless"

    def outputs(self, stateless: bool) -> list[str]:
        return [self.unique, self.sessions, *([self.stateless] if stateless else [])]


def event_id(key: str, value: dict[str, Any]) -> int:
    return value["id"]


def not_bot(key: str, value: dict[str, Any]) -> bool:
    return value["kind"] != "bot"


def in_cents(value: dict[str, Any]) -> dict[str, Any]:
    return {"id": value["id"], "page": value["page"], "cents": round(value["amount"] * 100)}


def topology(topics: Topics, stateless: bool = True) -> Topology:
    """Dedup by event id into one topic, a session count of the survivors into another, and
    (``stateless``) a filter and map_values branch of the input into a third."""
    builder = StreamsBuilder()
    events = builder.stream(topics.source, Consumed.with_(STRING, JSON))
    ids = Deduplicated.with_(STRING, JSON).with_id_serde(LONG)
    unique = events.deduplicate_by_key_value(event_id, timedelta(seconds=10), ids)
    unique.to(topics.unique, Produced.with_(STRING, JSON))
    (
        unique.group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(seconds=30)))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to(topics.sessions, Produced.with_(Serdes.session_windowed(STRING), LONG))
    )
    if stateless:
        events.filter(not_bot).map_values(in_cents).to(
            topics.stateless, Produced.with_(STRING, JSON)
        )
    return builder.build()


def percentile(values: Any, q: float) -> float | None:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) if ordered else None


@dataclass
class RunSettings:
    """What every run of a sweep shares."""

    root: Path
    log_url: str
    log_options: dict[str, str]
    partitions: int
    keys: int
    seconds: float
    warm_up: float
    commit_interval: int
    stateless: bool = True
    counts: IOCounts | None = None
    runs: list[str] = field(default_factory=list)


def _agent(role: str, *args: str) -> subprocess.Popen:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-m", "bench.latency_agents", role, *args],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )


def _collect(app: StreamsApp, seen: dict[int, BatchProgress]) -> None:
    for progress in list(app.history):
        seen[progress.batch] = progress


def started_app(
    spark: Any, s: RunSettings, suffix: str, execution: str
) -> tuple[StreamsApp, Topics]:
    """A fresh application of the workload (its own topics) started in the background, once
    its first batch is committed."""
    name = f"lat{len(s.runs)}-{suffix}"
    s.runs.append(name)
    topics = Topics(name)
    log = open_log(s.log_url, **s.log_options)
    try:
        for topic in (topics.source, *topics.outputs(True)):
            log.create_topic(topic, s.partitions)
    finally:
        log.close()
    config = StreamsConfig(
        application_id=name,
        log=s.log_url,
        log_options=dict(s.log_options),
        state_dir=str(s.root / f"state-{name}"),
        commit_interval=s.commit_interval,
        execution=execution,
    )
    app = StreamsApp(topology(topics, s.stateless), config, spark=spark)
    app.start()
    deadline = time.monotonic() + 180
    try:
        while app.last_progress is None:
            app.await_termination(0.1)  # raises what stopped the app
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: no batch committed within 180 s")
    except BaseException:
        app.stop()
        raise
    return app, topics


def run_rate(spark: Any, s: RunSettings, rate: int, execution: str) -> dict[str, Any]:
    """One application at one rate in one execution mode; its latency figures, the batches
    of the measured seconds and the writes counted meanwhile."""
    app, topics = started_app(spark, s, f"{execution.replace('_', '')}-{rate}", execution)
    batches: dict[int, BatchProgress] = {}
    out = str(s.root / f"latencies-{topics.prefix}")
    stop_file = s.root / f"stop-{topics.prefix}"
    agents: list[subprocess.Popen] = []
    try:
        count_after = now_ms() + int(s.warm_up * 1000)
        common = ["--log", s.log_url, "--partitions", str(s.partitions)]
        observer = _agent(
            "observe",
            *common,
            "--topics",
            *topics.outputs(s.stateless),
            "--count-after",
            str(count_after),
            "--stop-file",
            str(stop_file),
            "--out",
            out,
        )
        producer = _agent(
            "produce",
            *common,
            "--topic",
            topics.source,
            "--keys",
            str(s.keys),
            "--rate",
            str(rate),
            "--seconds",
            str(s.warm_up + s.seconds),
        )
        agents += [observer, producer]
        counts_before: dict[str, int] | None = None
        while producer.poll() is None:
            _collect(app, batches)
            if counts_before is None and s.counts is not None and now_ms() >= count_after:
                counts_before = s.counts.read()
            time.sleep(0.25)
        measured_until = now_ms()
        counts = (
            difference(s.counts.read(), counts_before)
            if s.counts is not None and counts_before is not None
            else None
        )
        produced = json.loads(producer.stdout.read() or "{}")  # type: ignore[union-attr]
        stopped = time.monotonic()
        while app.input_waiting() and time.monotonic() - stopped < 60:
            _collect(app, batches)
            time.sleep(0.05)
        drain_s = time.monotonic() - stopped
        _collect(app, batches)
        stop_file.touch()
        observer.wait(120)
        observer.stdout.read()  # type: ignore[union-attr]
    finally:
        stop_file.touch()
        for agent in agents:  # after a failure: nothing of this run keeps running
            if agent.poll() is None:
                agent.terminate()
        app.stop()
    per_topic = {t: read_latencies(out, t) for t in topics.outputs(s.stateless)}
    every = [v for values in per_topic.values() for v in values]
    measured = [b for b in batches.values() if count_after <= b.committed_at <= measured_until]
    return {
        "execution": execution,
        "rate": rate,
        "partitions": s.partitions,
        "produced": produced.get("produced"),
        "producer_max_behind_s": produced.get("max_behind_s"),
        "outputs_counted": {t: len(v) for t, v in per_topic.items()},
        "p50_ms": percentile(every, 0.50),
        "p99_ms": percentile(every, 0.99),
        "max_ms": float(max(every)) if every else None,
        "p99_ms_by_topic": {t: percentile(v, 0.99) for t, v in per_topic.items()},
        "drain_s": round(drain_s, 2),
        "kept_up": drain_s <= KEPT_UP_S,
        "batches": len(measured),
        "mean_batch_ms": _mean([b.duration_ms for b in measured]),
        "mean_batch_records": _mean([b.input_records for b in measured]),
        "phases_ms": _mean_phases(measured),
        "writes_per_batch": (
            {k: round(v / max(len(measured), 1), 1) for k, v in counts.items() if v}
            if counts is not None
            else None
        ),
        "batch_ms_measured": [round(b.duration_ms, 1) for b in measured],
    }


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _mean_phases(batches: list[BatchProgress]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for b in batches:
        for phase, ms in b.phases_ms.items():
            totals[phase] = totals.get(phase, 0.0) + ms
    return {k: round(v / len(batches), 2) for k, v in totals.items()} if batches else {}


def idle_cpu(spark: Any, s: RunSettings, seconds: float) -> float:
    """The share of one core that this process tree (driver, JVM, Python workers) uses while
    a started continuous application has no input."""
    app, _ = started_app(spark, s, "idle", "continuous")
    try:
        time.sleep(2.0)  # the first batch's aftermath (settling, Spark's bookkeeping)
        before, began = tree_cpu_seconds(os.getpid()), time.monotonic()
        time.sleep(seconds)
        used = tree_cpu_seconds(os.getpid()) - before
        return used / (time.monotonic() - began)
    finally:
        app.stop()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench latency", description=__doc__)
    p.add_argument("--rates", type=int, nargs="+", default=list(RATES), help="records/s")
    p.add_argument("--seconds", type=float, default=20, help="measured seconds per run (20)")
    p.add_argument("--warm-up", type=float, default=5, help="seconds not counted (5)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--keys", type=int, default=5_000)
    p.add_argument("--commit-interval", type=int, default=100, help="ms (100)")
    p.add_argument("--execution", nargs="+", default=["continuous", "micro_batch"])
    p.add_argument("--log", choices=["file", "kafka"], default="file")
    p.add_argument("--breakdown-rate", type=int, default=20_000)
    p.add_argument("--idle-seconds", type=float, default=30, help="idle check (0: skip)")
    p.add_argument("--no-stateless", action="store_true", help="leave out the third branch")
    p.add_argument("--no-count-writes", action="store_true", help="skip bench.io_counts")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--output", type=Path, help="also write the results as JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load = load_line()
    root = Path(tempfile.mkdtemp(prefix="streamtide-latency-"))
    counts = None if args.no_count_writes else IOCounts.start(root / "io-counts")
    broker = None
    from streamtide.engine.interop import build_session

    spark = build_session(
        args.master, "streamtide-latency", **(counts.spark_conf() if counts else {})
    )
    results: list[dict[str, Any]] = []
    idle = None
    try:
        if args.log == "kafka":
            from streamtide.testing.kafka_broker import start_broker

            broker = start_broker(root / "kafka")
            log_url, options = broker.url, dict(KAFKA_OPTIONS)
        else:
            log_url, options = f"file://{root / 'log'}", {}
        settings = RunSettings(
            root,
            log_url,
            options,
            args.partitions,
            args.keys,
            args.seconds,
            args.warm_up,
            args.commit_interval,
            stateless=not args.no_stateless,
            counts=counts,
        )
        print(
            f"{args.log} log, {args.partitions} partitions, {args.keys:,} keys, unique event "
            f"ids, commit_interval {args.commit_interval} ms, {args.master}; "
            f"{args.warm_up:g} s warm-up + {args.seconds:g} s per run",
            flush=True,
        )
        for rate in args.rates:
            for execution in args.execution:
                result = run_rate(spark, settings, rate, execution)
                results.append(result)
                print(
                    f"  {execution} {rate:,}/s: p50 {result['p50_ms']} ms, p99 "
                    f"{result['p99_ms']} ms, max {result['max_ms']} ms, {result['batches']} "
                    f"batches, drain {result['drain_s']} s",
                    flush=True,
                )
        if args.idle_seconds > 0:
            idle = idle_cpu(spark, settings, args.idle_seconds)
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print()
    print_sweep(results, args.execution)
    slots = slots_of(args.master)
    for r in results:
        if r["rate"] == args.breakdown_rate:
            print_breakdown(r, slots)
    if idle is not None:
        verdict = "under" if idle < IDLE_LIMIT else "NOT under"
        print(
            f"idle application (continuous, no input, {args.idle_seconds:g} s): "
            f"{idle:.2%} of a core, {verdict} {IDLE_LIMIT:.0%}"
        )
    print(load.describe())
    summary = {
        "log": args.log,
        "load_at_start": load.as_json(),
        "results": [{k: v for k, v in r.items() if k != "batch_ms_measured"} for r in results],
        "held_p99_500ms": {e: held(results, e, 500) for e in args.execution},
        "held_p99_1s": {e: held(results, e, 1000) for e in args.execution},
        "idle_core_share": None if idle is None else round(idle, 4),
    }
    if args.output:
        args.output.write_text(json.dumps({**summary, "results": results}, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
