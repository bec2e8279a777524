"""Result timestamps survive in durable state: a task rebuilt from the changelog, or reopened
over its local store, stamps results as if it had never stopped; and stores written before
timestamps existed (plain values) restore and keep working, their timestamps unknown."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from durable_support import APP, TaskRun, file_log, open_task, store_topology

from streamtide import Consumed, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows
from streamtide.log import FileLog, LogRecord
from streamtide.processor.topology import Topology
from streamtide.state.stores import KeyValueStoreBuilder, Stores
from streamtide.state.timestamped import NO_TIMESTAMP
from streamtide.state.window_store import WindowStoreBuilder

SEC = 1000
DAY = 86_400_000
STRING, LONG = Serdes.string(), Serdes.long()


def counts_topology() -> Topology:
    """A non-windowed count (store ``counts``) and a tumbling 10 s count (store ``windows``)."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(STRING, STRING)).group_by_key()
    grouped.count(Materialized.as_("counts")).to_stream().to("counts", Produced.with_(STRING, LONG))
    (
        grouped.windowed_by(TimeWindows.of_size(10 * SEC))
        .count(Materialized.as_("windows"))
        .to_stream()
        .to("windows", Produced.with_(Serdes.windowed(STRING), LONG))
    )
    return builder.build()


def new_log(root: Path) -> FileLog:
    log = file_log(root / "log")
    for topic in ("in", "counts", "windows"):
        log.create_topic(topic, 1)
    return log


def process(run: TaskRun, log: FileLog, seconds: list[float]) -> None:
    """Append records of key ``a`` to ``in`` and process them."""
    first = log.end_offset("in", 0)
    records = [LogRecord(b"a", b"v", int(s * SEC), (), first + i) for i, s in enumerate(seconds)]
    log.append("in", 0, records)
    run.task.add_records("in", records)
    while run.task.buffered:
        run.task.process()


def outputs(log: FileLog, topic: str) -> list[tuple[Any, float]]:
    """(value, timestamp in s) of every committed record of ``topic``."""
    return [(LONG.deserialize(r.value), r.timestamp / SEC) for r in log.read(topic, 0, 0, None)]


@pytest.mark.parametrize("wipe", [False, True], ids=["local-store", "restored-from-changelog"])
def test_4b_timestamps_survive_a_restart_and_a_restore(tmp_path: Path, wipe: bool) -> None:
    log = new_log(tmp_path)
    run = open_task(log, counts_topology(), tmp_path / "state")
    process(run, log, [5, 2])
    run.commit()
    run.close()
    if wipe:  # a new executor: nothing local, everything from the changelogs
        shutil.rmtree(tmp_path / "state")
    run = open_task(log, counts_topology(), tmp_path / "state")
    assert (run.metrics.get("records-restored", 0) > 0) is wipe
    process(run, log, [1])
    run.commit()
    run.close()
    assert outputs(log, "counts") == [(1, 5), (2, 5), (3, 5)]
    assert outputs(log, "windows") == [(1, 5), (2, 5), (3, 5)]


def plain_stores_topology() -> Topology:
    """The stores as the previous release laid them out: plain values, no timestamps."""
    return store_topology(
        KeyValueStoreBuilder(Stores.persistent_key_value_store("counts"), STRING, LONG),
        WindowStoreBuilder(
            Stores.persistent_key_value_store("windows"), 10 * SEC, DAY, STRING, LONG
        ),
    )


@pytest.mark.parametrize("wipe", [False, True], ids=["local-store", "restored-from-changelog"])
def test_stores_written_without_timestamps_still_restore_and_aggregate(
    tmp_path: Path, wipe: bool
) -> None:
    log = new_log(tmp_path)
    old = open_task(log, plain_stores_topology(), tmp_path / "state")
    old.store("counts").put("a", 2)
    old.store("windows").put("a", 0, 2)
    old.commit()
    old.close()
    changelog = [r.value for r in log.read(f"{APP}-counts-changelog", 0, 0, None)]
    assert changelog == [LONG.serialize(2)]  # the old layout: the plain value
    if wipe:
        shutil.rmtree(tmp_path / "state")
    run = open_task(log, counts_topology(), tmp_path / "state")
    assert run.store("counts").get("a") == 2
    assert run.store("counts").get_with_timestamp("a") == (2, NO_TIMESTAMP)
    assert run.store("windows").get_with_timestamp("a", 0) == (2, NO_TIMESTAMP)
    process(run, log, [3, 1])  # an unknown timestamp gives way to the record's
    run.commit()
    assert outputs(log, "counts") == [(3, 3), (4, 3)]
    assert outputs(log, "windows") == [(3, 3), (4, 3)]
    assert run.store("counts").get("a") == 4
    assert run.store("windows").fetch("a")[0][1] == 4
    assert run.store("windows").get_with_timestamp("a", 0) == (4, 3 * SEC)
    run.close()
