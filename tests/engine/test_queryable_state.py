"""Queryable state on the engine, in both execution modes: a count running in the background is
queried while its input is being worked off. Every answer must be the state of a committed
prefix of each partition's input (what the test driver's store holds for that prefix), and
the last one the state of all of it."""

from __future__ import annotations

import time
import zlib
from typing import Any

import pytest

from streamtide import (
    Consumed,
    InvalidStateStoreError,
    Materialized,
    StreamsApp,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from streamtide.log import LogRecord, open_log
from streamtide.log.partitioner import partition_for_key
from streamtide.testing import TopologyTestDriver
from tests.engine.scenarios import JSON, STRING, engine_config, make_events, write_events

pytestmark = pytest.mark.spark

PARTITIONS = 4
MINUTE = 60_000


def count_topology() -> Topology:
    builder = StreamsBuilder()
    grouped = builder.stream("events", Consumed.with_(STRING, JSON)).group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size(MINUTE)).count(Materialized.as_("per-minute"))
    return builder.build()


def _partition(user: str) -> int:
    return partition_for_key(STRING.serialize(user), PARTITIONS)


def _driver(events: list[tuple[str, dict, int]]) -> TopologyTestDriver:
    """The test driver after ``events`` (of one partition: a task's stream time is its own)."""
    driver = TopologyTestDriver(count_topology(), initial_wall_clock_ms=0)
    topic = driver.create_input_topic("events", STRING, JSON)
    for user, value, ts in events:
        topic.pipe_input(user, value, timestamp=ts)
    return driver


def _committed_prefixes(
    counts: dict[str, int], by_partition: dict[int, list[tuple[str, dict, int]]]
) -> dict[int, int]:
    """How many records of each partition ``counts`` reflects (each adds one to its key's
    count); checks that the counts are exactly those of that prefix of every partition."""
    prefixes = {p: 0 for p in by_partition}
    for user, count in counts.items():
        prefixes[_partition(user)] += count
    prefix_events = []
    for p, events in by_partition.items():
        assert prefixes[p] <= len(events)
        prefix_events.extend(events[: prefixes[p]])
    assert counts == dict(_driver(prefix_events).get_key_value_store("counts").all())
    return prefixes


@pytest.mark.parametrize("execution", ["micro_batch", "continuous"])
def test_a_running_count_is_queried_while_input_arrives(
    spark: Any, log_url: str, tmp_path: Any, execution: str
) -> None:
    events = make_events(360, seed=11, users=10)
    by_partition: dict[int, list[tuple[str, dict, int]]] = {p: [] for p in range(PARTITIONS)}
    for event in events:
        by_partition[_partition(event[0])].append(event)
    write_events(log_url, events[:120], partitions=PARTITIONS)
    config = engine_config(
        log_url,
        str(tmp_path / "state"),
        app=f"queries-{execution}",
        execution=execution,
        max_records_per_batch=8,
        adaptive_batch_size=False,
        commit_interval=100,
    )
    app = StreamsApp(count_topology(), config, spark=spark)
    with pytest.raises(InvalidStateStoreError, match="not running"):
        app.store("counts")
    app.start()
    counts = app.store("counts")
    seen: list[dict[int, int]] = []
    written = 120
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        answer = dict(counts.all())
        prefixes = _committed_prefixes(answer, by_partition)
        assert not seen or all(prefixes[p] >= seen[-1][p] for p in prefixes)  # never back
        seen.append(prefixes)
        if written < len(events):  # input keeps arriving while the app works
            write_events(log_url, events[written : written + 60], partitions=PARTITIONS)
            written += 60
        elif sum(prefixes.values()) == len(events):
            break
    assert sum(seen[-1].values()) == len(events), "the app did not catch up in time"
    partial = [s for s in seen if 0 < sum(s.values()) < len(events)]
    assert len(partial) >= 2, seen  # queries answered between batches, not only at the end

    for records in by_partition.values():
        driver = _driver(records)
        expected_counts = driver.get_key_value_store("counts")
        windows = driver.get_window_store("per-minute")
        for user in sorted({user for user, _, _ in records}):
            assert counts.get(user) == expected_counts.get(user)
            expected = [(w.window.start, n) for w, n in windows.fetch(user, 0, 10**12)]
            assert app.store("per-minute").fetch(user, 0, 10**12) == expected
            assert expected
    assert counts.get("nobody") is None
    users = sorted({user for user, _, _ in events})
    assert counts.range(users[1], users[3]) == [
        (u, n) for u, n in sorted(dict(counts.all()).items()) if users[1] <= u <= users[3]
    ]
    assert counts.approximate_num_entries() >= len(users)

    with pytest.raises(InvalidStateStoreError, match=r"unknown state store 'nope'.*counts"):
        app.store("nope")
    app.stop()
    with pytest.raises(InvalidStateStoreError, match="was stopped"):
        counts.get(users[0])


def _crc32_partition(key: str) -> int:
    """The partition librdkafka's default partitioner (``consistent_random``: CRC32 of the
    key) gives a key: what Python producers on confluent-kafka use unless told otherwise."""
    return zlib.crc32(STRING.serialize(key)) % PARTITIONS


def test_get_and_fetch_find_keys_the_producer_partitioned_otherwise(
    spark: Any, log_url: str, tmp_path: Any
) -> None:
    users = [f"user-{i}" for i in range(40)]
    elsewhere = [u for u in users if _crc32_partition(u) != _partition(u)][:6]
    assert len(elsewhere) == 6
    both, first_other = elsewhere[0], elsewhere[1]
    log = open_log(log_url)
    log.create_topic("events", PARTITIONS)

    def put(user: str, partition: int, count: int) -> None:
        records = [LogRecord(STRING.serialize(user), b"{}", MINUTE + i) for i in range(count)]
        log.append("events", partition, records)

    for n, user in enumerate(elsewhere, start=1):
        put(user, _crc32_partition(user), n)  # as a confluent-kafka producer would
    put(both, _partition(both), 7)  # also where murmur2 puts it: that task wins
    # a second copy of first_other in a third partition: the one in the lower partition wins
    extra = next(
        p
        for p in range(PARTITIONS)
        if p not in (_partition(first_other), _crc32_partition(first_other))
    )
    put(first_other, extra, 20)
    config = engine_config(log_url, str(tmp_path / "state"), app="queries-elsewhere")
    app = StreamsApp(count_topology(), config, spark=spark)
    app.run_until_caught_up(timeout=240)
    counts, minutes = app.store("counts"), app.store("per-minute")
    expected = {user: n for n, user in enumerate(elsewhere, start=1)}
    expected[both] = 7
    expected[first_other] = 2 if _crc32_partition(first_other) < extra else 20
    for user, count in expected.items():
        assert counts.get(user) == count, user
        assert minutes.fetch(user, 0, 10 * MINUTE) == [(MINUTE, count)], user
    assert counts.get("nobody") is None and minutes.fetch("nobody", 0, MINUTE) == []
    assert len(counts.all()) == len(elsewhere) + 2  # `both` and `first_other` twice each
    app.stop()
