"""Topologies, inputs and expected outputs shared by the engine tests.

Expected outputs come from ``TopologyTestDriver`` run once per input partition: a task of
the engine sees exactly one partition, so its output must equal the driver's, record for
record, when output records are routed to the partition of the user key they belong to.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from streamtide import (
    BufferConfig,
    Consumed,
    EmitStrategy,
    JoinWindows,
    Materialized,
    Processor,
    Produced,
    PunctuationType,
    Record,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    TimeWindows,
    Topology,
    Windowed,
)
from streamtide.log import LogRecord, open_log
from streamtide.log.factory import is_kafka_url
from streamtide.log.partitioner import partition_for_key
from streamtide.testing import TopologyTestDriver
from tests.kafka_broker import KAFKA_TEST_OPTIONS, read_committed

PARTITIONS = 2
STRING, INT, JSON = Serdes.string(), Serdes.int(), Serdes.json()


def by_user_key(key: Any, value: Any, key_bytes: bytes | None, n: int) -> int:
    """Route an output record to the partition of its user key (the inner key if windowed)."""
    user = key.key if isinstance(key, Windowed) else key
    return partition_for_key(STRING.serialize(user), n)


def event_time(record: Any, partition_time: int) -> int:
    """A timestamp extractor: the value's ``at``, or the partition time when it has none."""
    return record.value.get("at", partition_time)


def make_events(count: int, seed: int = 1, users: int = 6) -> list[tuple[str, dict, int]]:
    """Keyed events with resends (same event id) and slightly out-of-order timestamps."""
    rnd = random.Random(seed)
    events = []
    t = 0
    for i in range(count):
        t += rnd.randrange(0, 2_500)
        user = f"u{rnd.randrange(users)}"
        if events and rnd.random() < 0.15:
            user, value, ts = rnd.choice(events[-5:])
            events.append((user, dict(value), ts + rnd.randrange(0, 3_000)))
            continue
        events.append((user, {"id": f"e{i}", "n": i}, max(0, t - rnd.randrange(0, 4_000))))
    return events


def write_events(
    log_url: str,
    events: list[tuple[str, dict, int]],
    topic: str = "events",
    partitions: int = PARTITIONS,
) -> None:
    log = open_log(log_url, **log_options_for(log_url))
    log.create_topic(topic, partitions, exist_ok=True)
    per_partition: dict[int, list[LogRecord]] = {p: [] for p in range(partitions)}
    for user, value, ts in events:
        key = STRING.serialize(user)
        per_partition[partition_for_key(key, partitions)].append(
            LogRecord(key, JSON.serialize(value), ts)
        )
    for partition, records in per_partition.items():
        log.append(topic, partition, records)
    log.close()


def dedup_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .deduplicate_by_key_value(lambda k, v: v["id"], timedelta(seconds=10))
        .to("out", Produced.with_(STRING, JSON, by_user_key))
    )
    return builder.build()


def session_topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .group_by_key()
        .windowed_by(SessionWindows.with_inactivity_gap(timedelta(seconds=5)))
        .count(Materialized.as_("sessions"))
        .to_stream()
        .to("out", Produced.with_(Serdes.windowed(STRING), INT, by_user_key))
    )
    return builder.build()


def final_session_topology() -> Topology:
    """Session counts emitted once per session, when it closes (``on_window_close``)."""
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(timedelta(seconds=5), 2_000))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("final-sessions"))
        .to_stream()
        .to("out", Produced.with_(Serdes.windowed(STRING), INT, by_user_key))
    )
    return builder.build()


def final_window_topology() -> Topology:
    """Hopping-window counts emitted once per window, when it closes (``on_window_close``)."""
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10_000, 3_000).advance_by(5_000))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("final-windows"))
        .to_stream()
        .to("out", Produced.with_(Serdes.windowed(STRING), INT, by_user_key))
    )
    return builder.build()


def suppressed_topology() -> Topology:
    """Session counts held back until each session closes (``until_window_closes``), and
    per-key counts held back 4 s (``until_time_limit``): both buffers are stores."""
    builder = StreamsBuilder()
    grouped = builder.stream("events", Consumed.with_(STRING, JSON)).group_by_key()
    (
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(timedelta(seconds=5), 0))
        .count(Materialized.as_("session-counts"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
        .to_stream()
        .map(lambda k, v: (k.key, v * 1_000_000 + k.window.end // 1_000))
        .to("out", Produced.with_(STRING, INT, by_user_key))
    )
    (
        grouped.count(Materialized.as_("key-counts"))
        .suppress(Suppressed.until_time_limit(4_000, BufferConfig.max_records(3)))
        .to_stream()
        .to("out", Produced.with_(STRING, INT, by_user_key))
    )
    return builder.build()


class EveryTenSeconds(Processor):
    """Counts records per key in a store; every 10 s of stream time emits the counts."""

    def init(self, context) -> None:
        super().init(context)
        self.store = context.get_state_store("seen")
        context.schedule(timedelta(seconds=10), PunctuationType.STREAM_TIME, self.emit)

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)

    def emit(self, timestamp: int) -> None:
        for key, count in self.store.all():
            self.context.forward(Record(key, count, timestamp))


def punctuation_topology() -> Topology:
    from streamtide import Stores

    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("seen"), STRING, INT)
    )
    builder.stream("events", Consumed.with_(STRING, JSON)).process(EveryTenSeconds, "seen").to(
        "out", Produced.with_(STRING, INT, by_user_key)
    )
    return builder.build()


def stream_join_topology() -> Topology:
    """An outer join of a topic's even events with its odd ones within 20 s (grace 5 s): the
    input's disorder and resends give joins, late records and closed windows."""
    builder = StreamsBuilder()
    events = builder.stream("events", Consumed.with_(STRING, JSON))
    evens = events.filter(lambda k, v: v["n"] % 2 == 0)
    odds = events.filter(lambda k, v: v["n"] % 2 == 1)
    windows = JoinWindows.of_time_difference_and_grace(timedelta(seconds=20), timedelta(seconds=5))
    evens.outer_join(odds, lambda even, odd: [even and even["id"], odd and odd["id"]], windows).to(
        "out", Produced.with_(STRING, JSON, by_user_key)
    )
    return builder.build()


SCENARIOS: dict[str, tuple[Callable[[], Topology], Any, Any]] = {
    "dedup": (dedup_topology, STRING, JSON),
    "session": (session_topology, Serdes.windowed(STRING), INT),
    "punctuation": (punctuation_topology, STRING, INT),
    "stream_join": (stream_join_topology, STRING, JSON),
    "final-session": (final_session_topology, Serdes.windowed(STRING), INT),
    "final-window": (final_window_topology, Serdes.windowed(STRING), INT),
    "suppressed": (suppressed_topology, STRING, INT),
}


def expected_outputs(
    name: str, events: list[tuple[str, dict, int]], partitions: int = PARTITIONS
) -> dict[int, list[tuple]]:
    """The driver's output per input partition, as (key, value, timestamp) tuples."""
    topology_fn, key_serde, value_serde = SCENARIOS[name]
    expected = {}
    for partition in range(partitions):
        config = StreamsConfig(
            application_id="expected", default_key_serde=STRING, default_value_serde=JSON
        )
        with TopologyTestDriver(topology_fn(), config) as driver:
            inp = driver.create_input_topic("events", STRING, JSON)
            for user, value, ts in events:
                if partition_for_key(STRING.serialize(user), partitions) == partition:
                    inp.pipe_input(user, value, timestamp=ts)
            out = driver.create_output_topic("out", key_serde, value_serde)
            expected[partition] = [(r.key, r.value, r.timestamp) for r in out.read_records()]
    return expected


def engine_outputs(log_url: str, name: str) -> dict[int, list[tuple]]:
    _, key_serde, value_serde = SCENARIOS[name]
    return read_outputs(log_url, key_serde, value_serde)


def read_outputs(
    log_url: str, key_serde: Any, value_serde: Any, topic: str = "out"
) -> dict[int, list[tuple]]:
    """Every partition of ``topic`` as (key, value, timestamp) tuples (on Kafka, read by a
    consumer of its own at read_committed, independent of the engine's log)."""
    if is_kafka_url(log_url):
        return {
            p: [(key_serde.deserialize(k), value_serde.deserialize(v), ts) for k, v, ts in rows]
            for p, rows in read_committed(log_url, topic).items()
        }
    log = open_log(log_url)
    try:
        return {
            p: [
                (key_serde.deserialize(r.key), value_serde.deserialize(r.value), r.timestamp)
                for r in log.read(topic, p)
            ]
            for p in range(log.partitions(topic))
        }
    finally:
        log.close()


def log_options_for(log_url: str) -> dict[str, str]:
    """The options the tests open ``log_url`` with (Kafka: keep 1970 timestamps)."""
    return dict(KAFKA_TEST_OPTIONS) if is_kafka_url(log_url) else {}


def engine_config(
    log_url: str, state_dir: str, app: str = "engine-test", **overrides
) -> StreamsConfig:
    settings = dict(
        application_id=app,
        log=log_url,
        log_options=log_options_for(log_url),
        state_dir=state_dir,
        max_records_per_batch=70,
        cache_enabled=False,
        default_key_serde=STRING,
        default_value_serde=JSON,
    )
    settings.update(overrides)
    return StreamsConfig(**settings)


class WallClockTicks(Processor):
    """Forwards one tick per wall-clock punctuation (interval 1 ms: fires in every batch)."""

    def init(self, context) -> None:
        super().init(context)
        context.schedule(1, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        pass

    def tick(self, timestamp: int) -> None:
        self.context.forward(Record(self.context.task_id, timestamp, timestamp))


def wall_clock_topology() -> Topology:
    builder = StreamsBuilder()
    builder.stream("events", Consumed.with_(STRING, JSON)).process(WallClockTicks).to(
        "ticks", Produced.with_(STRING, INT)
    )
    return builder.build()
