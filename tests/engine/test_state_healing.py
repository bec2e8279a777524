"""Damaged local state heals itself: the engine wipes and rebuilds it from the newest valid
snapshot and the changelog, with the outputs of a run that was never damaged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamtide import Consumed, Materialized, Produced, StreamsApp, StreamsBuilder, Topology
from streamtide.log import open_log
from tests.engine.crash_points import counting_topology, setup
from tests.engine.local_driver import CLIENT, LocalDriver
from tests.engine.scenarios import (
    INT,
    JSON,
    STRING,
    engine_config,
    make_events,
    read_outputs,
    write_events,
)
from tests.state.test_rocksdb_store import damage_data_blocks


def outcome(driver: LocalDriver) -> tuple[dict, list]:
    """Committed task states and the output topic (changelogs may be truncated)."""
    log = open_log(driver.config.log)
    out = [(r.key, r.value, r.timestamp) for p in range(2) for r in log.read("out", p)]
    return driver.app_dir.last_committed().tasks, out


MORE = make_events(60, seed=12)


def reference(tmp_path: Path, **overrides):
    config = setup(tmp_path / "reference", events=240).with_overrides(**overrides)
    driver = LocalDriver(counting_topology(), config)
    driver.run_until_caught_up()
    write_events(config.log, MORE)
    driver.run_until_caught_up()
    return outcome(driver)


def store_dirs(config) -> list[Path]:
    root = Path(config.state_dir) / f"client-{CLIENT}" / config.application_id
    return sorted(root.glob("1_*/counts"))


def test_a_store_with_damaged_rocksdb_files_is_rebuilt(tmp_path, caplog) -> None:
    expected = reference(tmp_path)
    config = setup(tmp_path / "damaged", events=240)
    LocalDriver(counting_topology(), config).run_batch()
    for store in store_dirs(config):
        (store / "CURRENT").write_text("garbage\n")
    with caplog.at_level(logging.WARNING):
        driver = LocalDriver(counting_topology(), config)
        driver.run_until_caught_up()
        write_events(config.log, MORE)
        driver.run_until_caught_up()
    assert "are damaged" in caplog.text and "rebuilding store 'counts'" in caplog.text
    assert outcome(LocalDriver(counting_topology(), config)) == expected


def test_a_damaged_newest_snapshot_does_not_make_a_store_unrecoverable(tmp_path, caplog) -> None:
    expected = reference(tmp_path, snapshot_interval=1)
    config = setup(tmp_path / "damaged", events=240).with_overrides(snapshot_interval=1)
    driver = LocalDriver(counting_topology(), config)
    driver.run_until_caught_up()
    snapshots = Path(config.log[len("file://") :]) / "_snapshots" / config.application_id
    damaged = 0
    for store in snapshots.glob("1_*/counts"):
        kept = sorted(store.iterdir())
        assert len(kept) == 2  # the two newest are kept
        kept[-1].write_bytes(kept[-1].read_bytes()[:100])
        damaged += 1
    assert damaged
    for store in store_dirs(config):
        (store / "CURRENT").write_text("garbage\n")
    write_events(config.log, MORE)  # counted on top of the rebuilt stores
    with caplog.at_level(logging.WARNING):
        again = LocalDriver(counting_topology(), config)
        again.run_until_caught_up()  # the older snapshot plus the changelog
    assert "cannot load the snapshot of store 'counts'" in caplog.text
    assert outcome(again) == expected


def keyed_counts() -> Topology:
    """Counts events by their value's ``k`` (a repartition, then a count)."""
    builder = StreamsBuilder()
    (
        builder.stream("events", Consumed.with_(STRING, JSON))
        .select_key(lambda k, v: v["k"])
        .group_by_key()
        .count(Materialized.as_("counts"))
        .to_stream()
        .to("out", Produced.with_(STRING, INT))
    )
    return builder.build()


def keyed(prefix: str, count: int, keys: int, start_ts: int) -> list[tuple[str, dict, int]]:
    return [(f"u{i % 3}", {"k": f"{prefix}{i % keys}"}, start_ts + i) for i in range(count)]


@pytest.mark.spark
def test_damage_first_seen_on_a_read_heals_like_damage_seen_on_open(spark, tmp_path, caplog):
    """RocksDB opens a store whose data blocks are damaged without noticing; the first read
    of a key kept there (not one the last batch wrote, which the reopened store replays into
    memory) fails. The task's files are wiped when it closes, the driver runs the batch
    again, and the store is rebuilt from its changelog: every count exactly once."""
    log_url = f"file://{tmp_path / 'log'}"
    early, late = keyed("a", 100, 50, 1_000), keyed("b", 20, 4, 5_000)
    write_events(log_url, early)
    config = engine_config(log_url, str(tmp_path / "state"), app="heal", execution="micro_batch")
    app = StreamsApp(keyed_counts(), config, spark=spark)
    app.run_until_caught_up(timeout=300)
    write_events(log_url, late)  # the last batch before the damage touches other keys
    app.run_until_caught_up(timeout=300)
    stores = sorted((Path(config.state_dir) / "client-driver" / "heal").glob("1_*/counts"))
    assert stores and sum(damage_data_blocks(store) for store in stores) > 0
    again = keyed("a", 100, 50, 9_000)
    write_events(log_url, again)
    with caplog.at_level(logging.WARNING):
        app.run_until_caught_up(timeout=300)
    app.stop()
    assert "reading its local RocksDB files" in caplog.text  # the failed attempt's error
    outputs: dict[str, list[int]] = {}
    for rows in read_outputs(log_url, STRING, INT).values():
        for key, value, _ in rows:
            outputs.setdefault(key, []).append(value)
    counts = {f"a{i}": 4 for i in range(50)} | {f"b{i}": 5 for i in range(4)}
    assert outputs == {key: list(range(1, n + 1)) for key, n in counts.items()}
