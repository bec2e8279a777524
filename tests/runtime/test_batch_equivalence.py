"""Processing a batch a piece at a time equals processing it one record at a time.

The same random input (disorder, late records, duplicates, key skew, None keys) runs through
the engine's work unit twice, in several batches over the file log: once as the task cuts its
input (whole pieces, handed breadth-first through the graph) and once with every piece one row
long (``StreamTask.max_piece_rows = 1``: each record goes through the whole graph before the
next, as record-at-a-time processing does, through the same operators). Each batch's segments
are sealed before the next batch starts, as the driver does, and some batches start from a
wiped local state directory (a restart on a new executor). Outputs, changelog topics,
committed task state and the final local stores must be identical, byte for byte.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdict import Options, Rdict

from streamtide import (
    BufferConfig,
    Consumed,
    Deduplicated,
    EmitStrategy,
    Grouped,
    JoinWindows,
    Materialized,
    Processor,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    TimeWindows,
    Topology,
)
from streamtide.log import LogRecord, open_log
from streamtide.runtime.state_factory import make_task_stores
from streamtide.runtime.stream_task import StreamTask
from streamtide.runtime.work_unit import ActiveSpec, WorkUnitSpec, run_work_unit
from streamtide.state.stores import Stores

S = 1_000
STRING, JSON, INT, BYTES = Serdes.string(), Serdes.json(), Serdes.int(), Serdes.bytes()


def dedup_then_sessions() -> Topology:
    """Dedup by key, then a session count of the survivors, in one sub-topology."""
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, JSON))
    unique = events.deduplicate_by_key(timedelta(seconds=10), Deduplicated.as_("dedup"))
    unique.to("unique", Produced.with_(STRING, JSON))
    (
        unique.filter(lambda k, v: v["n"] % 7 != 3)
        .group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(seconds=5)))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to("sessions", Produced.with_(Serdes.windowed(STRING), INT))
    )
    return builder.build()


def dedup_alone() -> Topology:
    """Dedup by string key straight into a sink: the benchmark's chain."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(STRING, JSON)).deduplicate_by_key(
        timedelta(seconds=6), Deduplicated.as_("dedup")
    ).to("unique", Produced.with_(STRING, JSON))
    return builder.build()


def dedup_by_id_and_list_sessions() -> Topology:
    """Dedup by (key, id) with the record cache off, and a session aggregate whose aggregator
    builds lists in place (a hazard for any path that keeps aggregates in memory)."""

    def append(key: Any, value: Any, agg: list) -> list:  # type: ignore[type-arg]
        agg.append(value["n"])
        return agg

    def merge(key: Any, left: list, right: list) -> list:  # type: ignore[type-arg]
        left.extend(right)
        return left

    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, JSON))
    ids = Deduplicated.with_(STRING, JSON).with_id_serde(INT).with_name("by-id")
    events.deduplicate_by_key_value(lambda k, v: v["n"] % 5, timedelta(seconds=3), ids).to(
        "unique", Produced.with_(STRING, JSON)
    )
    (
        events.group_by_key()
        .windowed_by(
            SessionWindows.with_inactivity_gap(timedelta(seconds=4)).until(timedelta(seconds=10))
        )
        .aggregate(
            list,
            append,
            merge,
            Materialized.as_("sessions").with_value_serde(JSON).with_caching_disabled(),
        )
        .to_stream()
        .to("sessions", Produced.with_(Serdes.windowed(STRING), JSON))
    )
    return builder.build()


def byte_keys_and_text_sessions() -> Topology:
    """Keys read as bytes, so dedup ids and session keys go by their serialized form (not by
    text), and a session reduce over text values (aggregates the session operator keeps next
    to their bytes) with the record cache on."""
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(BYTES, JSON))
    events.deduplicate_by_key(timedelta(seconds=5), Deduplicated.with_(BYTES, JSON)).to(
        "unique", Produced.with_(BYTES, JSON)
    )
    (
        events.map_values(lambda v: str(v["n"]))
        .group_by_key(Grouped.with_(BYTES, STRING))
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(seconds=4)))
        .reduce(lambda a, b: a + b, Materialized.as_("text-sessions").with_value_serde(STRING))
        .to_stream()
        .to("sessions", Produced.with_(Serdes.session_windowed(BYTES), STRING))
    )
    return builder.build()


class EverySecond(Processor):
    """A Processor API node: counts per key and emits all counts every 2 s of stream time."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")
        context.schedule(timedelta(seconds=2), PunctuationType.STREAM_TIME, self.emit)

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)

    def emit(self, timestamp: int) -> None:
        for key, count in self.store.all():
            self.context.forward(Record(key, count, timestamp))


def punctuated_counts() -> Topology:
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), STRING, INT)
    )
    (
        builder.stream("in", Consumed.with_(STRING, JSON))
        .filter(lambda k, v: k is not None)
        .process(EverySecond, "counts")
        .to("sessions", Produced.with_(STRING, INT))
    )
    return builder.build()


def time_window_and_key_aggregates() -> Topology:
    """Hopping-window and per-key aggregates (their stores keep result timestamps), one with
    the record cache off so that every update's timestamp is compared."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key()
    (
        grouped.windowed_by(
            TimeWindows.of_size(timedelta(seconds=10))
            .advance_by(timedelta(seconds=5))
            .grace(timedelta(seconds=3))
        )
        .count(Materialized.as_("windows").with_caching_disabled())
        .to_stream()
        .to("windows", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    (
        grouped.aggregate(
            lambda: 0,
            lambda k, v, total: total + v["n"],
            Materialized.as_("sums").with_value_serde(Serdes.long()),
        )
        .to_stream()
        .to("sums", Produced.with_(STRING, Serdes.long()))
    )
    return builder.build()


def enriched_by_a_table() -> Topology:
    """Records joined with a table of profiles (read from ``profiles``, restored from it after
    a wipe): a left join, and an inner join with a filtered view of the table."""
    builder = StreamsBuilder()
    profiles = builder.table("profiles", Consumed.with_(STRING, JSON), Materialized.as_("profiles"))
    events = builder.stream("in", Consumed.with_(STRING, JSON))
    events.left_join(profiles, lambda v, p: [v["n"], p and p["n"]]).to(
        "unique", Produced.with_(STRING, JSON)
    )
    even = profiles.filter(lambda k, p: p["n"] % 2 == 0)
    events.join(even, lambda v, p: v["n"] + p["n"]).to("sums", Produced.with_(STRING, INT))
    return builder.build()


def tables_joined() -> Topology:
    """The latest record per key (a table of ``in``) joined with the profiles table: a
    materialized outer join, and a left join with a filtered view of the profiles."""
    builder = StreamsBuilder()
    latest = builder.table("in", Consumed.with_(STRING, JSON), Materialized.as_("latest"))
    profiles = builder.table("profiles", Consumed.with_(STRING, JSON), Materialized.as_("profiles"))
    joined = latest.outer_join(
        profiles,
        lambda v, p: [v and v["i"], p and p["n"]],
        materialized=Materialized.as_("joined-table").with_value_serde(JSON),
    )
    joined.to_stream().to("joined", Produced.with_(STRING, JSON))
    even = profiles.filter(lambda k, p: p["n"] % 2 == 0)
    latest.left_join(even, lambda v, p: [v["n"], p and p["n"]]).to_stream().to(
        "unique", Produced.with_(STRING, JSON)
    )
    return builder.build()


def windowed_outer_join() -> Topology:
    """An outer join of the even records with the odd ones (by ``n``) within 5 s, grace 2 s:
    two join window stores and the store of records waiting for their window to close."""
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, JSON))
    evens = events.filter(lambda k, v: v["n"] % 2 == 0)
    odds = events.filter(lambda k, v: v["n"] % 2 == 1)
    evens.outer_join(
        odds,
        lambda even, odd: [even and even["i"], odd and odd["i"]],
        JoinWindows.of_time_difference_and_grace(timedelta(seconds=5), timedelta(seconds=2)),
    ).to("joined", Produced.with_(STRING, JSON))
    return builder.build()


def final_sessions_and_windows() -> Topology:
    """Emit-final session counts and hopping-window sums (``EmitStrategy.on_window_close()``):
    final results depend on stream time at every record, and their close indexes are stores.
    Also suppressed tables: session counts (record cache) held until each session closes, and
    per-key counts held 3 s in a buffer of at most 2 keys."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key()
    (
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(3 * S, 2 * S))
        .count(Materialized.as_("suppressed-sessions"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("unique", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    (
        grouped.count(Materialized.as_("key-counts"))
        .suppress(Suppressed.until_time_limit(3 * S, BufferConfig.max_records(2)))
        .to_stream()
        .to("sums", Produced.with_(STRING, Serdes.long()))
    )
    (
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(4 * S, 3 * S))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("final-sessions"))
        .to_stream()
        .to("sessions", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    (
        grouped.windowed_by(TimeWindows.of_size_and_grace(10 * S, 2 * S).advance_by(5 * S))
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(
            lambda: 0,
            lambda k, v, total: total + v["n"],
            Materialized.as_("final-windows").with_value_serde(Serdes.long()),
        )
        .to_stream()
        .to("windows", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    return builder.build()


def distinct_and_sliding_windows() -> Topology:
    """Windowed ``distinct()`` over tumbling windows (record cache on) and sessions (off), and
    sliding windows: a count through the record cache, a list aggregate built in place (a
    hazard for any path that keeps aggregates in memory) and an emit-final sum."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key()
    (
        grouped.windowed_by(TimeWindows.of_size_and_grace(5 * S, 2 * S))
        .distinct(Materialized.as_("time-distinct"))
        .to_stream()
        .to("unique", Produced.with_(Serdes.windowed(STRING), JSON))
    )
    (
        grouped.windowed_by(SessionWindows.with_inactivity_gap(3 * S))
        .distinct(Materialized.as_("session-distinct").with_caching_disabled())
        .to_stream()
        .to("joined", Produced.with_(Serdes.session_windowed(STRING), JSON))
    )
    sliding = grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(3 * S, 2 * S))
    (
        sliding.count(Materialized.as_("sliding-counts"))
        .to_stream()
        .to("windows", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )

    def append(key: Any, value: Any, agg: list) -> list:  # type: ignore[type-arg]
        agg.append(value["n"])
        return agg

    (
        sliding.aggregate(
            list,
            append,
            Materialized.as_("sliding-lists").with_value_serde(JSON).with_caching_disabled(),
        )
        .to_stream()
        .to("sessions", Produced.with_(Serdes.windowed(STRING), JSON))
    )
    (
        sliding.emit_strategy(EmitStrategy.on_window_close())
        .aggregate(
            lambda: 0,
            lambda k, v, total: total + v["n"],
            Materialized.as_("sliding-final").with_value_serde(Serdes.long()),
        )
        .to_stream()
        .to("sums", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    return builder.build()


def suppressed_tables() -> Topology:
    """Suppression of every kind of table: sliding counts (record cache) and session counts
    until their windows close, per-key counts held 2 s in a buffer of at most 80 bytes,
    time-window counts held 1 s in a buffer of one key, and a per-key reduce (with tombstones)
    held no time at all."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, JSON)).group_by_key()
    (
        grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(3 * S, S))
        .count(Materialized.as_("sliding-counts"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("unique", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    (
        grouped.count(Materialized.as_("key-counts").with_caching_disabled())
        .suppress(Suppressed.until_time_limit(2 * S, BufferConfig.max_bytes(80)))
        .to_stream()
        .to("sums", Produced.with_(STRING, Serdes.long()))
    )
    (
        grouped.windowed_by(TimeWindows.of_size_and_grace(4 * S, S))
        .count(Materialized.as_("window-counts").with_caching_disabled())
        .suppress(Suppressed.until_time_limit(S, BufferConfig.max_records(1)))
        .to_stream()
        .to("windows", Produced.with_(Serdes.windowed(STRING), Serdes.long()))
    )
    (
        grouped.reduce(
            lambda a, b: b if b["n"] % 4 else None,
            Materialized.as_("latest").with_value_serde(JSON),
        )
        .suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
        .to_stream()
        .to("joined", Produced.with_(STRING, JSON))
    )
    (
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(3 * S, S))
        .count(Materialized.as_("session-counts").with_caching_disabled())
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("sessions", Produced.with_(Serdes.session_windowed(STRING), Serdes.long()))
    )
    return builder.build()


def fan_out_shapes() -> Topology:
    """Where breadth-first order could differ from one record at a time: a split whose
    branches write one topic, a merge after the split, a flat_map feeding a map and the same
    topic, and a count over the merged stream."""
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, JSON))
    branches = (
        events.split(named="s-")
        .branch(lambda k, v: v["n"] % 3 == 0, "zero")
        .branch(lambda k, v: v["n"] % 3 == 1, "one")
        .default_branch("two")
    )
    branches["s-zero"].map_values(lambda v: {**v, "b": 0}).to(
        "unique", Produced.with_(STRING, JSON)
    )
    branches["s-one"].to("unique", Produced.with_(STRING, JSON))
    pairs = branches["s-two"].flat_map(lambda k, v: [(k, v), (k, {**v, "copy": 1})])
    pairs.to("unique", Produced.with_(STRING, JSON))
    pairs.map_values(lambda v: {**v, "mapped": 1}).to("unique", Produced.with_(STRING, JSON))
    (
        branches["s-zero"]
        .merge(branches["s-one"])
        .group_by_key()
        .count(Materialized.as_("merged-counts").with_caching_disabled())
        .to_stream()
        .to("sums", Produced.with_(STRING, Serdes.long()))
    )
    return builder.build()


def self_join() -> Topology:
    """A stream joined with itself within 3 s: both sides of the join in one source."""
    builder = StreamsBuilder()
    events = builder.stream("in", Consumed.with_(STRING, JSON))
    events.join(
        events,
        lambda a, b: [a["i"], b["i"]],
        JoinWindows.of_time_difference_and_grace(timedelta(seconds=3), timedelta(seconds=1)),
    ).to("joined", Produced.with_(STRING, JSON))
    return builder.build()


class Tally(Processor):
    """Counts per key, forwards the count, then the count again to the child ``again``."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("tally")

    def process(self, record: Record) -> None:
        if record.key is None:
            return
        count = (self.store.get(record.key) or 0) + 1
        self.context.forward(record.with_value({"i": record.value["i"], "count": count}))
        self.store.put(record.key, count)
        self.context.forward(record.with_value({"i": record.value["i"], "again": count}), "again")


class ReadTally(Processor):
    """Reads the tally a node above it wrote for the key."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("tally")

    def process(self, record: Record) -> None:
        self.context.forward(
            record.with_value({**record.value, "read": self.store.get(record.key)})
        )


def a_store_read_below_its_writer() -> Topology:
    """A Processor API node writing a store after its forward, and a node below it reading
    the store: each record must reach the reader before the writer takes the next one."""
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("tally"), STRING, INT)
    )
    topology = builder.topology
    source = builder.stream("in", Consumed.with_(STRING, JSON)).node
    topology.add_processor("tally", Tally, source)
    topology.add_processor("read", ReadTally, "tally")
    topology.add_processor("again", ReadTally, "tally")
    topology.connect_processor_and_state_stores("tally", "tally")
    topology.connect_processor_and_state_stores("read", "tally")
    topology.connect_processor_and_state_stores("again", "tally")
    topology.add_sink("sink", "sums", "read", key_serde=STRING, value_serde=JSON)
    topology.add_sink("again-sink", "joined", "again", key_serde=STRING, value_serde=JSON)
    return builder.build()


TOPOLOGIES: dict[str, Callable[[], Topology]] = {
    "fan-out-shapes": fan_out_shapes,
    "self-join": self_join,
    "store-read-below": a_store_read_below_its_writer,
    "enriched-by-a-table": enriched_by_a_table,
    "final-sessions-windows": final_sessions_and_windows,
    "dedup-sessions": dedup_then_sessions,
    "dedup-alone": dedup_alone,
    "by-id-list-sessions": dedup_by_id_and_list_sessions,
    "byte-keys-text-sessions": byte_keys_and_text_sessions,
    "punctuated": punctuated_counts,
    "windows-and-sums": time_window_and_key_aggregates,
    "outer-join": windowed_outer_join,
    "tables-joined": tables_joined,
}


def run_batches(
    root: Path,
    topology: Topology,
    records: list[LogRecord],
    cuts: list[int],
    wipes: set[int],
    piece_rows: int | None,
) -> dict[str, Any]:
    """Run the input in batches through ``run_work_unit`` (pieces of at most ``piece_rows``
    rows; None: as the task cuts them) and return everything visible.

    A topology that reads ``profiles`` gets every third record there instead (a value with
    ``n == 0`` as a tombstone); a cut then splits both topics at that point of the input."""
    log = open_log(f"file://{root / 'log'}")
    for topic in ("in", "profiles", "unique", "sessions", "windows", "sums", "joined"):
        log.create_topic(topic, 1)
    topics = ["in"] * len(records)
    if "profiles" in topology.source_topics():
        topics = ["profiles" if i % 3 == 1 else "in" for i in range(len(records))]
    for topic in sorted(set(topics)):
        log.append(
            topic,
            0,
            [
                _as_profile(r) if topic == "profiles" else r
                for r, t in zip(records, topics)
                if t == topic
            ],
        )
    config = StreamsConfig(
        application_id="eq",
        log=log.url,
        state_dir=str(root / "state"),
        snapshot_interval=0,
    )
    state: dict[str, Any] = {}
    start = 0
    for batch, end in enumerate([*cuts, len(records)]):
        if batch in wipes:
            shutil.rmtree(root / "state", ignore_errors=True)
        ranges = {t: [topics[:start].count(t), topics[:end].count(t)] for t in sorted(set(topics))}
        spec = WorkUnitSpec(batch, 0, "c", [ActiveSpec("0_0", ranges, state)])
        StreamTask.max_piece_rows = piece_rows
        try:
            report = run_work_unit(topology, config, log, spec, make_task_stores)
        finally:
            StreamTask.max_piece_rows = None
        (task,) = report["tasks"]
        for segment in task["segments"]:
            ref = _segment(segment)
            log.seal(ref.topic, ref.partition, ref, seal_id=f"eq/{batch}/{ref.name}")
        state, start = task["state"], end
    seen: dict[str, Any] = {"state": state}
    for topic in sorted(log.list_topics()):
        seen[topic] = [
            (r.key, r.value, r.timestamp, r.headers) for r in log.read(topic, 0, 0, None)
        ]
    for store_dir in sorted((root / "state").rglob("CURRENT")):
        db = Rdict(str(store_dir.parent), Options(raw_mode=True))
        try:
            seen[str(store_dir.parent.relative_to(root))] = list(db.items())
        finally:
            db.close()
    log.close()
    return seen


def _as_profile(record: LogRecord) -> LogRecord:
    """An input record as a table update: a value with ``n == 0`` becomes a tombstone."""
    if JSON.deserialize(record.value)["n"] == 0:
        return LogRecord(record.key, None, record.timestamp, record.headers)
    return record


def _segment(data: dict[str, Any]) -> Any:
    from streamtide.log.api import SegmentRef

    return SegmentRef.from_dict(data)


KEYS = st.sampled_from(["a", "a", "a", "b", "c", None])  # skewed, with None keys


@st.composite
def inputs(draw: Any) -> tuple[list[LogRecord], list[int], set[int]]:
    count = draw(st.integers(min_value=1, max_value=60))
    records, now = [], 100 * S
    for n in range(count):
        now += draw(st.integers(min_value=0, max_value=6 * S))
        late = draw(st.sampled_from([0, 0, 0, 0, 2 * S, 8 * S, 40 * S]))  # disorder, late
        key = draw(KEYS)
        value = {"n": draw(st.integers(min_value=0, max_value=9)), "i": n}
        records.append(
            LogRecord(
                None if key is None else key.encode(),
                JSON.serialize(value),
                now - late,
                (("h", b"1"),) if n % 11 == 0 else (),
            )
        )
        if draw(st.booleans()) and draw(st.booleans()):  # a resend: same key and value
            records.append(records[-1])
    cuts = sorted(set(draw(st.lists(st.integers(0, len(records)), max_size=4))))
    wipes = set(draw(st.lists(st.integers(1, len(cuts) + 1), max_size=2)))
    return records, cuts, wipes


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    name=st.sampled_from(sorted(TOPOLOGIES)),
    data=inputs(),
)
def test_pieces_equal_records_one_at_a_time(name: str, data: Any) -> None:
    records, cuts, wipes = data
    record_path = assert_paths_equal(TOPOLOGIES[name], records, cuts, wipes)
    outputs = ("sessions", "unique", "windows", "sums", "joined")
    # records without key may all be dropped; a join or final results may hold every record back
    held_back = name in ("outer-join", "final-sessions-windows")
    keyless = all(r.key is None for r in records)
    assert any(record_path.get(topic) for topic in outputs) or keyless or held_back


def assert_paths_equal(
    topology: Callable[[], Topology], records: list[LogRecord], cuts: list[int], wipes: set[int]
) -> dict[str, Any]:
    """Run pieces of one row and whole pieces; everything visible must be equal. Returns the
    one-row run's."""
    results = []
    for piece_rows in (1, None):
        root = Path(tempfile.mkdtemp(prefix="streamtide-eq-"))
        try:
            results.append(run_batches(root, topology(), records, cuts, wipes, piece_rows))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    record_path, batch_path = results
    assert batch_path.keys() == record_path.keys()
    for what in record_path:
        assert batch_path[what] == record_path[what], what
    return record_path


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=inputs())
def test_dedup_into_a_sink_equals_records_one_at_a_time(data: Any) -> None:
    """Dedup straight into a sink: the benchmark's chain, a whole batch in one piece."""
    assert_paths_equal(dedup_alone, *data)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=inputs())
def test_join_output_does_not_depend_on_batches_or_restores(data: Any) -> None:
    """A stream-stream join run in one batch equals the same join cut into batches with its
    local state wiped in between (restored from the changelogs)."""
    records, cuts, wipes = data
    results = []
    for batch_cuts, batch_wipes in (([], set()), (cuts, wipes)):
        root = Path(tempfile.mkdtemp(prefix="streamtide-eq-"))
        try:
            seen = run_batches(root, windowed_outer_join(), records, batch_cuts, batch_wipes, None)
            results.append((seen["joined"], seen["state"]["stream_time"]))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    assert results[0] == results[1]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topology=st.sampled_from([distinct_and_sliding_windows, suppressed_tables]),
    data=inputs(),
)
def test_windowed_distinct_sliding_windows_and_suppression_equal_records_one_at_a_time(
    topology: Callable[[], Topology], data: Any
) -> None:
    assert_paths_equal(topology, *data)


def test_batch_path_keeps_emitted_aggregates_intact() -> None:
    """An aggregator that appends in place must not change results already emitted."""
    records = [LogRecord(b"a", JSON.serialize({"n": n, "i": n}), 100 * S + n * S) for n in range(4)]
    root = Path(tempfile.mkdtemp(prefix="streamtide-eq-"))
    try:
        seen = run_batches(root, dedup_by_id_and_list_sessions(), records, [], set(), None)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    values = [JSON.deserialize(value) for _, value, _, _ in seen["sessions"]]
    assert values == [[0], None, [0, 1], None, [0, 1, 2], None, [0, 1, 2, 3]]


def test_final_results_and_suppressed_tables_are_emitted_alike() -> None:
    """A fixed input long enough that windows close and buffers fill: one-row pieces and
    whole pieces emit the same final results, suppressed records and store contents, across
    restarts."""
    keys = [b"a", b"b", b"c"]
    records = [
        LogRecord(
            keys[n % 3],
            JSON.serialize({"n": n % 10, "i": n}),
            100 * S + n * 700 + (n // 20) * 20 * S - (n % 4) * 900,
        )
        for n in range(80)
    ]
    results = []
    for piece_rows in (1, None):
        root = Path(tempfile.mkdtemp(prefix="streamtide-eq-"))
        try:
            results.append(
                run_batches(root, final_sessions_and_windows(), records, [20, 45], {2}, piece_rows)
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    record_path, batch_path = results
    assert batch_path == record_path
    assert all(record_path[topic] for topic in ("sessions", "windows", "unique", "sums"))
