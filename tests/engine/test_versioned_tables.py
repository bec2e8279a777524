"""Versioned tables on the engine's batch loop (4 partitions, restarts, a wiped state
directory): the as-of stream-table join gives what the test driver gives, and queries read
``get(key, as_of)`` from the committed store."""

from __future__ import annotations

import itertools
import shutil
from typing import Any

import pytest

from streamtide import Consumed, Materialized, Produced, Stores, StreamsBuilder, Topology
from streamtide.log import LogRecord, open_log
from streamtide.state import VersionedRecord
from streamtide.testing import TopologyTestDriver
from tests.against_reference.queries import engine_store_view
from tests.engine.local_driver import LocalDriver
from tests.engine.scenarios import STRING, engine_config

PARTITIONS = 4


def topology() -> Topology:
    builder = StreamsBuilder()
    prices = builder.table(
        "prices",
        Consumed.with_(STRING, STRING),
        Materialized.as_(Stores.persistent_versioned_key_value_store("prices", 1_000)),
    )
    builder.stream("orders", Consumed.with_(STRING, STRING)).left_join(
        prices, lambda order, price: f"{order}@{price}"
    ).to("priced", Produced.with_(STRING, STRING))
    return builder.build()


#: (topic, key, value, timestamp) in arrival order: late prices, late orders, deletes
EVENTS = [
    ("prices", f"p{k}", f"v{t}", 100 * t + k)
    for t in range(6)
    for k in range(5)
    if (t + k) % 3
] + [
    ("orders", f"p{k}", f"o{k}", 250 + k) for k in range(5)
] + [
    ("prices", "p1", "late", 220),
    ("prices", "p2", None, 230),
    ("orders", "p1", "again", 225),
    ("orders", "p2", "gone", 240),
    ("orders", "p3", "early", 50),
]  # fmt: skip


def expected_on_the_driver() -> list[tuple[str, str, int]]:
    with TopologyTestDriver(topology()) as driver:
        topics = {t: driver.create_input_topic(t, STRING, STRING) for t in ("prices", "orders")}
        for topic, key, value, ts in EVENTS:
            topics[topic].pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("priced", STRING, STRING)
        return [(r.key, r.value, r.timestamp) for r in out.read_records()]


@pytest.fixture
def setup(tmp_path):
    log_url = f"file://{tmp_path / 'log'}"
    log = open_log(log_url)
    for topic in ("prices", "orders"):
        log.create_topic(topic, PARTITIONS)
    yield log, engine_config(log_url, str(tmp_path / "state"), app="versioned")
    log.close()


def append(log: Any, events: list[tuple[str, str, Any, int]]) -> None:
    for topic, key, value, ts in events:
        record = LogRecord(STRING.serialize(key), STRING.serialize(value), ts)
        log.append(topic, partition_of(log, key), [record])


def partition_of(log: Any, key: str) -> int:
    from streamtide.log.partitioner import partition_for_key

    return partition_for_key(STRING.serialize(key), PARTITIONS)


def query(driver: LocalDriver, key: str, as_of: int | None = None) -> Any:
    return engine_store_view(driver, "prices").get(key, as_of)


def test_the_as_of_join_on_four_partitions_across_restarts_equals_the_driver(setup) -> None:
    log, config = setup
    expected = expected_on_the_driver()
    cuts = [0, 9, 17, len(EVENTS) - 3, len(EVENTS)]
    for number, (start, end) in enumerate(itertools.pairwise(cuts)):
        append(log, EVENTS[start:end])
        if number == 2:
            shutil.rmtree(config.state_dir)  # stores restored from their changelogs
        LocalDriver(topology(), config).run_until_caught_up()
    found = []
    for partition in range(PARTITIONS):
        for r in log.read("priced", partition):
            found.append((STRING.deserialize(r.key), STRING.deserialize(r.value), r.timestamp))
    by_key = lambda rows: sorted(rows, key=lambda r: r[0])  # noqa: E731  # per key, in order
    assert by_key(found) == by_key(expected)
    assert ("p1", "again@late", 225) in found and ("p2", "gone@None", 240) in found
    driver = LocalDriver(topology(), config)
    assert query(driver, "p1") == VersionedRecord("v4", 401, None)
    assert query(driver, "p1", 230) == VersionedRecord("late", 220, 301)
    assert query(driver, "p2", 235) is None
    assert query(driver, "nobody") is None
