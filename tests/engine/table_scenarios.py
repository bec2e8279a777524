"""Join topologies on 4 partitions for the engine tests: inputs with unique, increasing
timestamps (so the engine's event-time-aligned batches process them in the same order as a
test driver fed one partition's records in timestamp order) and the driver's outputs."""

from __future__ import annotations

import random
from collections.abc import Callable

from streamtide import Consumed, Produced, StreamsBuilder, StreamsConfig, Topology
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import JSON, STRING, by_user_key

PARTITIONS = 4

#: (topic, key, value or None, timestamp)
Event = tuple[str, str, "dict | None", int]


def partition_of(key: str) -> int:
    return partition_for_key(STRING.serialize(key), PARTITIONS)


def make_table_events(count: int, topics: tuple[str, ...], seed: int) -> list[Event]:
    """Random updates (some tombstones) of a few keys over ``topics``, timestamps 1, 2, ..."""
    rnd = random.Random(seed)
    events: list[Event] = []
    for ts in range(1, count + 1):
        topic = rnd.choice(topics)
        key = f"u{rnd.randrange(12)}"
        value = None if rnd.random() < 0.1 else {"v": ts, "n": rnd.randrange(100)}
        events.append((topic, key, value, ts))
    return events


def write_table_events(log_url: str, events: list[Event], topics: tuple[str, ...]) -> None:
    log = open_log(log_url)
    for topic in topics:
        log.create_topic(topic, PARTITIONS, exist_ok=True)
    for topic in topics:
        per_partition: dict[int, list[LogRecord]] = {p: [] for p in range(PARTITIONS)}
        for t, key, value, ts in events:
            if t == topic:
                per_partition[partition_of(key)].append(
                    LogRecord(STRING.serialize(key), JSON.serialize(value), ts)
                )
        for partition, records in per_partition.items():
            log.append(topic, partition, records)
    log.close()


def stream_table_topology() -> Topology:
    """Clicks enriched with the latest user profile (left join: unknown users get None)."""
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, JSON))
    builder.stream("clicks", Consumed.with_(STRING, JSON)).left_join(
        users, lambda click, user: {"click": click["v"], "user": user and user["n"]}
    ).to("out", Produced.with_(STRING, JSON, by_user_key))
    return builder.build()


def table_table_topology() -> Topology:
    """Users outer-joined with scores; every update of either side emits the joined row."""
    builder = StreamsBuilder()
    users = builder.table("users", Consumed.with_(STRING, JSON))
    scores = builder.table("scores", Consumed.with_(STRING, JSON))
    users.outer_join(scores, lambda u, s: [u and u["n"], s and s["n"]]).to_stream().to(
        "out", Produced.with_(STRING, JSON, by_user_key)
    )
    return builder.build()


JOIN_SCENARIOS: dict[str, tuple[Callable[[], Topology], tuple[str, ...]]] = {
    "stream-table": (stream_table_topology, ("users", "clicks")),
    "table-table": (table_table_topology, ("users", "scores")),
}


def expected_join_outputs(name: str, events: list[Event]) -> dict[int, list[tuple]]:
    """The driver's output per partition, fed that partition's events in timestamp order."""
    topology_fn, topics = JOIN_SCENARIOS[name]
    expected = {}
    for partition in range(PARTITIONS):
        config = StreamsConfig(
            application_id="expected", default_key_serde=STRING, default_value_serde=JSON
        )
        with TopologyTestDriver(topology_fn(), config) as driver:
            inputs = {t: driver.create_input_topic(t, STRING, JSON) for t in topics}
            for topic, key, value, ts in sorted(events, key=lambda e: e[3]):
                if partition_of(key) == partition:
                    inputs[topic].pipe_input(key, value, timestamp=ts)
            out = driver.create_output_topic("out", STRING, JSON)
            expected[partition] = [(r.key, r.value, r.timestamp) for r in out.read_records()]
    return expected
