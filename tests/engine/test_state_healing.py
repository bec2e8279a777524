"""Damaged local state heals itself: the engine wipes and rebuilds it from the newest valid
snapshot and the changelog, with the outputs of a run that was never damaged."""

from __future__ import annotations

import logging
from pathlib import Path

from streamtide.log import open_log
from tests.engine.crash_points import counting_topology, setup
from tests.engine.local_driver import CLIENT, LocalDriver
from tests.engine.scenarios import make_events, write_events


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
