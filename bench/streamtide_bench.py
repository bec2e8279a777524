"""Streamtide end to end: each operation is its own application over the input topic, run
through ``StreamsApp.run_until_caught_up`` on a shared SparkSession."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.workload import PIPELINE_TOPIC, TOPIC, USERS_TOPIC, Workload
from streamtide import (
    Consumed,
    Deduplicated,
    EmitStrategy,
    Grouped,
    Materialized,
    Processor,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    TimeWindows,
    Topology,
)
from streamtide.engine.app import StreamsApp
from streamtide.engine.progress import BatchProgress
from streamtide.state.stores import Stores

STRING, INT, JSON = Serdes.string(), Serdes.long(), Serdes.json()
OPERATIONS = (
    "dedup",
    "session-count",
    "session-count-final",
    "punctuation",
    "stream-table-join",
    "pipeline",
)
#: The pipeline's windows: 60 s tumbling, 10 s grace; its large-amount branch: over 50.00.
#: The tumbling count of ``bench.kafka``: 60 s windows, no grace.
WINDOW_COUNT_MS = 60 * 1000
PIPELINE_WINDOW_MS = 60 * 1000
PIPELINE_GRACE_MS = 10 * 1000
BIG_CENTS = 5000


def event_id(key: str, value: dict[str, Any]) -> int:
    """The id of a resent event (for ``--dedup-on event-id``)."""
    return value["id"]


def dedup_topology(w: Workload) -> Topology:
    """Drop records whose key (or key and event id) was seen within the interval."""
    builder = StreamsBuilder()
    events = builder.stream(TOPIC, Consumed.with_(STRING, JSON))
    interval = timedelta(milliseconds=w.dedup_interval_ms)
    if w.dedup_on == "key":
        unique = events.deduplicate_by_key(interval)
    else:
        ids = Deduplicated.with_(STRING, JSON).with_id_serde(INT)
        unique = events.deduplicate_by_key_value(event_id, interval, ids)
    unique.to("dedup-out", Produced.with_(STRING, JSON))
    return builder.build()


def session_topology(w: Workload) -> Topology:
    """Count records per key and session (inactivity gap ``w.session_gap_ms``)."""
    builder = StreamsBuilder()
    (
        builder.stream(TOPIC, Consumed.with_(STRING, JSON))
        .group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(milliseconds=w.session_gap_ms)))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to("session-out", Produced.with_(Serdes.session_windowed(STRING), INT))
    )
    return builder.build()


def window_count_topology(w: Workload) -> Topology:
    """Count records per key in 60 s tumbling windows without grace, every update."""
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_with_no_grace(timedelta(milliseconds=WINDOW_COUNT_MS))
    (
        builder.stream(TOPIC, Consumed.with_(STRING, JSON))
        .group_by_key()
        .windowed_by(windows)
        .count(Materialized.as_("window-counts"))
        .to_stream()
        .to("window-count-out", Produced.with_(Serdes.time_windowed(STRING, WINDOW_COUNT_MS), INT))
    )
    return builder.build()


def final_session_topology(w: Workload) -> Topology:
    """Count records per key and session, each session emitted once when it closes
    (``EmitStrategy.on_window_close()``), with a grace of the watermark delay Spark's query
    uses: the output contract of Spark's append-mode session count."""
    builder = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(
        timedelta(milliseconds=w.session_gap_ms), timedelta(milliseconds=w.dedup_interval_ms)
    )
    (
        builder.stream(TOPIC, Consumed.with_(STRING, JSON))
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("final-sessions"))
        .to_stream()
        .to("final-session-out", Produced.with_(Serdes.session_windowed(STRING), INT))
    )
    return builder.build()


class PeriodicCounts(Processor):
    """Counts records per key in a store; on a stream-time schedule emits every key's count."""

    def __init__(self, every_ms: int) -> None:
        self.every_ms = every_ms

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")
        context.schedule(
            timedelta(milliseconds=self.every_ms), PunctuationType.STREAM_TIME, self.emit
        )

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)

    def emit(self, timestamp: int) -> None:
        for key, count in self.store.all():
            self.context.forward(Record(key, count, timestamp))


def punctuation_topology(w: Workload) -> Topology:
    """Per-key counts in a persistent store, emitted every ``w.punctuate_every_ms``."""
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), STRING, INT)
    )
    every = w.punctuate_every_ms
    (
        builder.stream(TOPIC, Consumed.with_(STRING, JSON))
        .process(lambda: PeriodicCounts(every), "counts")
        .to("punctuation-out", Produced.with_(STRING, INT))
    )
    return builder.build()


def enrich(event: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """The join's result: the event with its user's profile."""
    return {**event, **user}


def join_topology(w: Workload) -> Topology:
    """Each event joined with its key's profile from the users table (an inner join)."""
    builder = StreamsBuilder()
    users = builder.table(USERS_TOPIC, Consumed.with_(STRING, JSON))
    (
        builder.stream(TOPIC, Consumed.with_(STRING, JSON))
        .join(users, enrich)
        .to("join-out", Produced.with_(STRING, JSON))
    )
    return builder.build()


def not_bot(key: str, event: dict[str, Any]) -> bool:
    return event["kind"] != "bot"


def to_cents(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its amount as integer cents."""
    return {
        "id": event["id"],
        "page": event["page"],
        "kind": event["kind"],
        "cents": round(event["amount"] * 100),
        "ts": event["ts"],
    }


def with_country(event: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    return {**event, "country": user["country"]}


def page_of(key: str, event: dict[str, Any]) -> str:
    return event["page"]


def is_big(key: str, event: dict[str, Any]) -> bool:
    return event["cents"] > BIG_CENTS


class CountPerKey(Processor):
    """Keeps a count per key in a key-value store; forwards each record with its count."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("pipeline-counters")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value({**record.value, "count": count}))


def pipeline_topology(w: Workload) -> Topology:
    """What a user's topology looks like: filter, map_values, a stream-table join, a
    repartition to a windowed count, a filtered second output and a Processor API node."""
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store("pipeline-counters"), STRING, INT
        )
    )
    users = builder.table(USERS_TOPIC, Consumed.with_(STRING, JSON))
    joined = (
        builder.stream(PIPELINE_TOPIC, Consumed.with_(STRING, JSON))
        .filter(not_bot)
        .map_values(to_cents)
        .join(users, with_country)
    )
    windows = TimeWindows.of_size_and_grace(
        timedelta(milliseconds=PIPELINE_WINDOW_MS), timedelta(milliseconds=PIPELINE_GRACE_MS)
    )
    (
        joined.select_key(page_of)
        .group_by_key(Grouped.with_(STRING, JSON))
        .windowed_by(windows)
        .count(Materialized.as_("pipeline-page-counts"))
        .to_stream()
        .to(
            "pipeline-page-counts",
            Produced.with_(Serdes.time_windowed(STRING, PIPELINE_WINDOW_MS), INT),
        )
    )
    joined.filter(is_big).to("pipeline-big", Produced.with_(STRING, JSON))
    joined.process(CountPerKey, "pipeline-counters").to(
        "pipeline-counted", Produced.with_(STRING, JSON)
    )
    return builder.build()


NOTES = {
    "dedup": "{op}, interval {interval} ms, RocksDB dedup store",
    "session-count": "session count, gap {gap} ms, RocksDB session store, record cache on",
    "session-count-final": "session count, gap {gap} ms, grace {interval} ms, emitted once "
    "per session when it closes (on_window_close: the session store plus its close index)",
    "window-count": "count per key in 60 s tumbling windows, no grace, every update (collapsed "
    "per commit by the record cache)",
    "punctuation": "per-key counts in a RocksDB key-value store, all emitted every {every} ms "
    "of stream time",
    "stream-table-join": "KStream.join(KTable) with the users table ({keys:,} profiles, read from "
    "its topic into a RocksDB store first: the input count includes them), JSON values merged",
    "pipeline": "filter(kind != bot) -> map_values(cents) -> join(users KTable) -> "
    "select_key(page) -> repartition -> 60 s tumbling count, grace 10 s -> to; the joined "
    "stream also -> filter(cents > 5000) -> to, and -> a Processor API per-key counter (RocksDB "
    "key-value store) -> to; the input count includes the table and the repartitioned records",
}


def note(operation: str, w: Workload) -> str:
    """What the Streamtide run of ``operation`` does (every run: JSON values deserialized,
    exactly-once commits, changelogged state)."""
    op = "deduplicate_by_key" if w.dedup_on == "key" else "deduplicate_by_key_value(event id)"
    return NOTES[operation].format(
        op=op,
        interval=w.dedup_interval_ms,
        gap=w.session_gap_ms,
        every=w.punctuate_every_ms,
        keys=w.keys,
    )


TOPOLOGIES = {
    "dedup": dedup_topology,
    "session-count": session_topology,
    "session-count-final": final_session_topology,
    "punctuation": punctuation_topology,
    "stream-table-join": join_topology,
    "pipeline": pipeline_topology,
    "window-count": window_count_topology,
}


@dataclass
class EngineRun:
    """One operation's run: wall time of ``run_until_caught_up`` and its batches."""

    operation: str
    seconds: float
    batches: list[BatchProgress]

    @property
    def input_records(self) -> int:
        return sum(b.input_records for b in self.batches)

    @property
    def output_records(self) -> int:
        return sum(b.output_records for b in self.batches)

    @property
    def changelog_records(self) -> int:
        return sum(b.changelog_records for b in self.batches)

    @property
    def batch_ms(self) -> list[float]:
        return [b.duration_ms for b in self.batches]


def make_app(
    spark: Any,
    log_url: str,
    state_root: Path,
    operation: str,
    w: Workload,
    log_options: dict[str, str] | None = None,
) -> StreamsApp:
    """A fresh application (own id and state directory) for ``operation``."""
    app_id = f"bench-{operation}"
    config = StreamsConfig(
        application_id=app_id,
        log=log_url,
        log_options=dict(log_options or {}),
        state_dir=str(state_root / app_id),
        max_records_per_batch=w.batch_size,
    )
    return StreamsApp(TOPOLOGIES[operation](w), config, spark=spark)


def run_operation(
    spark: Any,
    log_url: str,
    state_root: Path,
    operation: str,
    w: Workload,
    log_options: dict[str, str] | None = None,
) -> EngineRun:
    """Run ``operation`` over the whole input topic; time every batch, planning included."""
    app = make_app(spark, log_url, state_root, operation, w, log_options)
    try:
        started = time.perf_counter()
        batches = app.run_until_caught_up(timeout=900)
        seconds = time.perf_counter() - started
    finally:
        app.stop()
    return EngineRun(operation, seconds, batches)


def _run_in_driver(sc: Any, units: list[tuple[str, Any]], work: Any) -> list[str]:
    """Stands in for ``interop.run_pinned``: runs each work unit in this process, in turn."""
    return [out for payload, _ in units for out in work(iter([payload]))]


def profile_operation(
    spark: Any,
    log_url: str,
    state_root: Path,
    operation: str,
    w: Workload,
    *,
    in_process: bool = False,
    top: int = 25,
) -> tuple[EngineRun, str, int]:
    """Run ``operation`` under cProfile in the driver; return the run, the top entries by
    cumulative time and the number of Python function calls profiled. Normally the work
    units run in Spark's Python workers and show up as the time the driver waits for its
    jobs; with ``in_process`` they run one after another in the driver instead (no Spark
    job), so the profile covers the per-record work too."""
    import streamtide.engine.app as engine_app

    pinned = engine_app.run_pinned
    if in_process:
        engine_app.run_pinned = _run_in_driver  # type: ignore[assignment]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run = run_operation(spark, log_url, state_root, operation, w)
    finally:
        profiler.disable()
        engine_app.run_pinned = pinned
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(
        os.environ.get("STREAMTIDE_PROFILE_SORT", "cumulative")
    ).print_stats(top)
    calls = sum(stat[1] for stat in pstats.Stats(profiler).stats.values())  # type: ignore[attr-defined]
    return run, out.getvalue(), calls
